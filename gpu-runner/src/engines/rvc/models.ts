/**
 * The three RVC v2 models behind onnxruntime-node, each checked against RVC's tensor layout when it is loaded
 * (from the session's declared inputs and outputs) and again on every run (actual shapes), so a wrong file
 * fails with a message that says which model, which tensor and what was expected.
 *
 * Layouts, as exported by RVC (`infer/modules/onnx/export.py`) and its ONNX ports:
 * - contentvec: audio float32 `[1, 1, samples]` (or `[1, samples]`) at 16 kHz -> float32 `[1, frames, 768]`
 *   at 50 frames/s (768 for v2 voices, 256 for v1).
 * - rmvpe: log-mel float32 `[1, 128, frames]` (frames a multiple of 32) -> salience float32 `[1, frames, 360]`.
 * - synthesizer: `phone` float32 `[1, frames, 768]`, `phone_lengths` int64 `[1]`, `pitch` int64 `[1, frames]`,
 *   `pitchf` float32 `[1, frames]`, `ds` int64 `[1]`, `rnd` float32 `[1, 192, frames]` -> audio float32
 *   `[1, 1, frames x sample_rate / 100]`.
 */

import { readFile } from "node:fs/promises";
import "./onnxruntime-telemetry-off.ts";
import * as ort from "onnxruntime-node";
import { type DecodeLayout, decodedFrames, decodeLayout, joinPieces } from "./decode-pieces.ts";
import { FeatureWidthMismatch, RvcEngineError } from "./errors.ts";
import { type ExecutionProviderName, sessionOptionsFor } from "./execution-provider.ts";
import {
	contentVecLayoutProblem,
	describeShape,
	rmvpeLayoutProblem,
	type TensorMeta,
	wOkadaExportProblem,
} from "./feature-model-layout.ts";
import { quantizeMatMuls } from "./int8-matmul.ts";
import { type LogMel, RMVPE_N_MELS } from "./mel.ts";
import { once } from "./once.ts";
import { RMVPE_PITCH_BINS } from "./pitch.ts";
import { type ModelHost, type ModelSession, SessionHost, untilAborted } from "./session-host.ts";
import { ModelLimitError } from "./session-host-process.ts";
import { DECODE_SPAN_MARGIN_FRAMES } from "./synthesizer-graph.ts";
import { ThreadStoppedError } from "./thread-client.ts";

export type ModelRole = "contentvec" | "rmvpe" | "synthesizer";

export interface SessionSettings {
	provider: ExecutionProviderName;
	intraOpNumThreads?: number;
	/** ContentVec's matrix products in int8 (`int8-matmul.ts`). */
	contentvecInt8?: boolean;
	/** ContentVec and RMVPE keep CPU arenas too, as the synthesizer always does (`memoryArenaFor`). */
	featureArenas?: boolean;
}

/**
 * Whether a model's session keeps its CPU arena. The decoder's activations are tens of MB each (32 to 512
 * channels at up to 48 kHz): freed to the system after every use, each was page-faulted and zeroed again by the
 * kernel on the next run (measured on the bench's 12 s: 8.3 million minor faults, 30 s of system time). The
 * arena reuses them; it holds the synthesizer's peak, which the CPU chunk length bounds (`CPU_PARAM_DEFAULTS`).
 * ContentVec and RMVPE go without one by default, so the three do not each keep a peak; with `featureArenas`
 * they keep theirs too, for a runner with memory to spare: on the bench, ContentVec runs about twice as fast and
 * the whole conversion 10-15 % faster, for 150-230 MiB more at the peak (README).
 */
export function memoryArenaFor(role: ModelRole, settings: Pick<SessionSettings, "featureArenas">): boolean {
	return role === "synthesizer" || settings.featureArenas === true;
}

type TensorType = ort.Tensor.Type;

/** Not the model's fault: the job can run again, on a new thread. */
function threadStopped(doing: string, error: ThreadStoppedError): RvcEngineError {
	return new RvcEngineError("model_thread_stopped", `${doing}: ${error.message}`, { cause: error });
}

/**
 * An account's uploaded synthesizer stopped at one of its process's limits (`session-host-process.ts`): the voice's
 * fault, not the runner's; running it again would do the same.
 */
function limitExceeded(role: ModelRole, path: string, error: ModelLimitError): RvcEngineError {
	return new RvcEngineError(
		"model_limit_exceeded",
		`${role} model ${path} (an account's uploaded ONNX) was stopped: ${error.message}`,
		{ cause: error },
	);
}

/**
 * One loaded model, its session on the cache's `SessionHost` thread (or, for an account's uploaded synthesizer, in a
 * `ProcessSessionHost`'s process). Runs are serialised per model (and per
 * host, whose thread runs one at a time), which keeps memory bounded.
 */
class OnnxModel {
	readonly role: ModelRole;
	readonly path: string;
	readonly session: ModelSession;
	/**
	 * Whether the job running it is the only one holding it (set by its `ModelCache`, from the entry's users): a run
	 * aborted in a process is killed with its process only then (`RunControl.soleUser`).
	 */
	soleUser: () => boolean = () => true;
	#queue: Promise<unknown> = Promise.resolve();

	constructor(role: ModelRole, path: string, session: ModelSession) {
		this.role = role;
		this.path = path;
		this.session = session;
	}

	static async load(role: ModelRole, path: string, settings: SessionSettings, host: ModelHost): Promise<OnnxModel> {
		try {
			const options = sessionOptionsFor(settings.provider, {
				...settings,
				memoryArena: memoryArenaFor(role, settings),
			});
			const session =
				role === "contentvec" && settings.contentvecInt8 === true
					? await host.create(quantizeMatMuls(await readFile(path)).model, options)
					: await host.create(path, options);
			return new OnnxModel(role, path, session);
		} catch (error) {
			if (error instanceof ThreadStoppedError) throw threadStopped(`loading ${role} model ${path}`, error);
			if (error instanceof ModelLimitError) throw limitExceeded(role, path, error);
			const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
			throw new RvcEngineError(
				"invalid_model",
				`${role} model ${path} could not be loaded on ${settings.provider}: ${reason}`,
				{ cause: error },
			);
		}
	}

	fail(message: string): RvcEngineError {
		return new RvcEngineError("invalid_model", `${this.role} model ${this.path}: ${message}`);
	}

	/**
	 * The declared shape of an input or output (sizes or symbolic names; empty when the model declares none),
	 * after checking that it exists, its element type, and its rank where both are known.
	 */
	declared(kind: "input" | "output", name: string, type: TensorType, rank?: number): ReadonlyArray<number | string> {
		const list = kind === "input" ? this.session.inputMetadata : this.session.outputMetadata;
		const meta = list.find((m) => m.name === name);
		if (meta === undefined) throw this.fail(`has no ${kind} named "${name}"`);
		if (!meta.isTensor) throw this.fail(`${kind} "${name}" is not a tensor`);
		if (meta.type !== type) throw this.fail(`${kind} "${name}" is ${meta.type}, expected ${type}`);
		if (rank !== undefined && meta.shape.length > 0 && meta.shape.length !== rank) {
			throw this.fail(`${kind} "${name}" has shape ${describeShape(meta.shape)}, expected rank ${rank}`);
		}
		return meta.shape;
	}

	/**
	 * Runs the session once the model's earlier runs are done. `signal`, the job's abort: a run still waiting for its
	 * turn fails at once with the abort's reason and is never sent; one under way in a process (`ProcessSessionHost`)
	 * is stopped the same way; a model thread's run goes on.
	 */
	run(feeds: Record<string, ort.Tensor>, signal?: AbortSignal): Promise<ort.InferenceSession.ReturnType> {
		if (signal?.aborted) return Promise.reject(signal.reason);
		/** Whether its turn came: from then on the session answers the abort (a process's run fails at once). */
		let started = false;
		const result = this.#queue.then(async () => {
			// Its job ended while it waited: not run at all.
			signal?.throwIfAborted();
			started = true;
			try {
				return await this.session.run(feeds, signal === undefined ? undefined : { signal, soleUser: this.soleUser });
			} catch (error) {
				// The job ended: whatever the run did is not the model's doing, and the job's end is the abort's.
				if (signal?.aborted) throw signal.reason;
				if (error instanceof ThreadStoppedError) throw threadStopped(`running ${this.role} model`, error);
				if (error instanceof ModelLimitError) throw limitExceeded(this.role, this.path, error);
				const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
				const shapes = Object.entries(feeds)
					.map(([name, t]) => `${name} ${t.type}${describeShape(t.dims)}`)
					.join(", ");
				throw new RvcEngineError(
					"invalid_model",
					`${this.role} model ${this.path} failed on inputs ${shapes}: ${reason}`,
					{ cause: error },
				);
			}
		});
		// The runs after it still wait for the one before it (the queue follows `result`, not the abort).
		this.#queue = result.catch(() => undefined);
		// Under way, the run answers the abort itself (or, on a model thread, goes on and is waited for).
		return untilAborted(result, signal, () => !started);
	}

	/** The output tensor `name` as float32 data, checked for rank. */
	floatOutput(
		result: ort.InferenceSession.ReturnType,
		name: string,
		rank: number,
	): { data: Float32Array; dims: readonly number[] } {
		const tensor = result[name];
		if (tensor === undefined) throw this.fail(`produced no output "${name}"`);
		if (tensor.type !== "float32" || !(tensor.data instanceof Float32Array))
			throw this.fail(`output "${name}" is ${tensor.type}, expected float32`);
		if (tensor.dims.length !== rank)
			throw this.fail(`output "${name}" has shape ${describeShape(tensor.dims)}, expected rank ${rank}`);
		return { data: tensor.data, dims: tensor.dims };
	}

	async release(): Promise<void> {
		await this.#queue;
		await this.session.release();
	}
}

/** ContentVec (HuBERT-base layout): 16 kHz audio to one feature vector per 320 samples. */
export class ContentVecModel {
	readonly model: OnnxModel;
	readonly #inputName: string;
	readonly #inputRank: 2 | 3;
	readonly #outputName: string;
	/** Feature width declared by the model, if it declares one. */
	readonly declaredFeatureDim: number | undefined;

	constructor(model: OnnxModel) {
		this.model = model;
		const { inputMetadata, outputMetadata } = model.session;
		const problem = contentVecLayoutProblem(inputMetadata, outputMetadata);
		if (problem !== undefined) throw model.fail(problem);
		const [input, output] = [inputMetadata[0], outputMetadata[0]] as [TensorMeta, TensorMeta];
		this.#inputName = input.name;
		// RVC's export is [1, 1, samples]; assume it when the model does not declare a shape.
		this.#inputRank = input.shape?.length === 2 ? 2 : 3;
		this.#outputName = output.name;
		const dim = output.shape?.[2];
		this.declaredFeatureDim = typeof dim === "number" ? dim : undefined;
	}

	/** Features of `audio` (16 kHz), `[frames, dim]` row-major, about one frame per 320 samples. */
	async extract(audio: Float32Array): Promise<{ data: Float32Array; frames: number; dim: number }> {
		const dims = this.#inputRank === 3 ? [1, 1, audio.length] : [1, audio.length];
		const result = await this.model.run({
			[this.#inputName]: new ort.Tensor("float32", audio, dims),
		});
		const { data, dims: out } = this.model.floatOutput(result, this.#outputName, 3);
		const [batch, frames, dim] = out as [number, number, number];
		// HuBERT's feature encoder has a 400-sample receptive field and a stride of 320.
		const expected = Math.floor((audio.length - 400) / 320) + 1;
		if (batch !== 1 || Math.abs(frames - expected) > 2) {
			throw this.model.fail(
				`output has shape ${describeShape(out)} for ${audio.length} samples; expected [1, about ${expected}, features] (50 frames/s)`,
			);
		}
		return { data, frames, dim };
	}
}

/** RMVPE: log-mel spectrogram to 360-bin pitch salience. */
export class RmvpeModel {
	readonly model: OnnxModel;
	readonly #inputName: string;
	readonly #outputName: string;

	constructor(model: OnnxModel) {
		this.model = model;
		const { inputMetadata, outputMetadata } = model.session;
		const problem = rmvpeLayoutProblem(inputMetadata, outputMetadata);
		if (problem !== undefined) throw model.fail(problem);
		this.#inputName = (inputMetadata[0] as TensorMeta).name;
		this.#outputName = (outputMetadata[0] as TensorMeta).name;
	}

	/** Salience `[paddedFrames, 360]` row-major for the padded mel. */
	async salience(mel: LogMel): Promise<Float32Array> {
		const result = await this.model.run({
			[this.#inputName]: new ort.Tensor("float32", mel.data, [1, RMVPE_N_MELS, mel.paddedFrames]),
		});
		const { data, dims } = this.model.floatOutput(result, this.#outputName, 3);
		if (dims[0] !== 1 || (dims[1] as number) < mel.frames || dims[2] !== RMVPE_PITCH_BINS) {
			throw this.model.fail(
				`output has shape ${describeShape(dims)} for ${mel.paddedFrames} mel frames; expected [1, ${mel.paddedFrames}, ${RMVPE_PITCH_BINS}]`,
			);
		}
		return data;
	}
}

export interface SynthesizerInputs {
	/** `[frames, featureDim]` row-major. */
	phone: Float32Array;
	frames: number;
	/** Absent for models without f0. */
	pitch?: BigInt64Array;
	pitchf?: Float32Array;
	speakerId: number;
	/** `[noiseChannels, frames]` row-major. */
	rnd: Float32Array;
}

/** The NSF synthesizer with RVC's six inputs. */
export class SynthesizerModel {
	static readonly INPUTS = [
		["phone", "float32", 3],
		["phone_lengths", "int64", 1],
		["pitch", "int64", 2],
		["pitchf", "float32", 2],
		["ds", "int64", 1],
		["rnd", "float32", 3],
	] as const;

	readonly model: OnnxModel;
	readonly #outputName: string;
	readonly declaredFeatureDim: number | undefined;
	/** Channels of the `rnd` noise (192 in RVC's synthesizers). */
	readonly noiseChannels: number;
	/** False for RVC's f0 = 0 models (`_nono`): no `pitch` and `pitchf` inputs, so no f0 (the engine shifts their output). */
	readonly takesPitch: boolean;
	/** Built with `decode_start` and `decode_frames` (`synthesizer-graph.ts`): can decode part of its frames. */
	readonly decodesSpan: boolean;
	/** `decode_start` takes one start per piece (`decode-pieces.ts`); graphs built before take one. */
	readonly decodesPieces: boolean;

	constructor(model: OnnxModel) {
		this.model = model;
		const names = model.session.inputNames;
		this.takesPitch = names.includes("pitch") || names.includes("pitchf");
		this.decodesSpan = names.includes("decode_start") && names.includes("decode_frames");
		const starts = model.session.inputMetadata.find((m) => m.name === "decode_start");
		this.decodesPieces = this.decodesSpan && starts?.isTensor === true && typeof starts.shape[0] === "string";
		const inputs = SynthesizerModel.INPUTS.filter(([name]) => this.takesPitch || !name.startsWith("pitch"));
		const missing = inputs.map(([name]) => name).filter((name) => !names.includes(name));
		if (missing.length > 0) {
			const wOkada = wOkadaExportProblem(names);
			throw model.fail(
				`is missing input(s) ${missing.join(", ")}; found [${names.join(", ")}], expected RVC's phone, phone_lengths, pitch, pitchf, ds, rnd (or, for a model without f0, phone, phone_lengths, ds, rnd)${wOkada ? `; ${wOkada}` : ""}`,
			);
		}
		const shapes = new Map<string, ReadonlyArray<number | string>>();
		for (const [name, type, rank] of inputs) shapes.set(name, model.declared("input", name, type, rank));
		const output = model.session.outputMetadata[0];
		if (output === undefined) throw model.fail("has no output");
		model.declared("output", output.name, "float32");
		this.#outputName = output.name;
		const phoneDim = shapes.get("phone")?.[2];
		this.declaredFeatureDim = typeof phoneDim === "number" ? phoneDim : undefined;
		const noise = shapes.get("rnd")?.[1];
		this.noiseChannels = typeof noise === "number" ? noise : 192;
	}

	/**
	 * The span in up to `pieces` pieces for each of `runs` runs (`decode-pieces.ts`; `splitLayout` gives each run
	 * its own), one piece a run where this graph takes a single start.
	 */
	layout(span: { start: number; frames: number }, pieces: number, runs = 1): DecodeLayout {
		return decodeLayout(span, runs * (this.decodesPieces ? pieces : 1), DECODE_SPAN_MARGIN_FRAMES);
	}

	/**
	 * Audio samples for the frames; at least `frames x samplesPerFrame` of them. With `decode` (only where
	 * `decodesSpan`), the decoder runs on its span's frames alone and the samples are theirs, `decode.frames x
	 * samplesPerFrame` of them; a layout of several pieces (only where `decodesPieces`) decodes them piece by
	 * piece as rows of one run, with the same samples (`decode-pieces.ts`). `signal`: the job's abort, which stops a
	 * run in a process (`OnnxModel.run`).
	 */
	async synthesize(
		inputs: SynthesizerInputs,
		samplesPerFrame: number,
		decode?: DecodeLayout,
		signal?: AbortSignal,
	): Promise<Float32Array> {
		const { frames } = inputs;
		const dim = inputs.phone.length / frames;
		const layout = this.decodesSpan ? decode : undefined;
		if (layout !== undefined && layout.starts.length > 1 && !this.decodesPieces)
			throw this.model.fail("takes one decode_start, not one per piece (lay the span out with `layout`)");
		const result = await this.model.run(
			{
				...(layout !== undefined
					? {
							decode_start: new ort.Tensor("int64", BigInt64Array.from(layout.starts, BigInt), [layout.starts.length]),
							decode_frames: new ort.Tensor("int64", BigInt64Array.of(BigInt(layout.length)), [1]),
						}
					: {}),
				phone: new ort.Tensor("float32", inputs.phone, [1, frames, dim]),
				phone_lengths: new ort.Tensor("int64", BigInt64Array.of(BigInt(frames)), [1]),
				...(this.takesPitch && inputs.pitch !== undefined && inputs.pitchf !== undefined
					? {
							pitch: new ort.Tensor("int64", inputs.pitch, [1, frames]),
							pitchf: new ort.Tensor("float32", inputs.pitchf, [1, frames]),
						}
					: {}),
				ds: new ort.Tensor("int64", BigInt64Array.of(BigInt(inputs.speakerId)), [1]),
				rnd: new ort.Tensor("float32", inputs.rnd, [1, this.noiseChannels, frames]),
			},
			signal,
		);
		const tensor = result[this.#outputName];
		if (tensor === undefined || !(tensor.data instanceof Float32Array))
			throw this.model.fail(`produced no float32 output "${this.#outputName}"`);
		const decoded = layout === undefined ? frames : decodedFrames(layout);
		if (tensor.data.length < decoded * samplesPerFrame) {
			const perFrame = tensor.data.length / decoded;
			throw this.model.fail(
				`returned ${tensor.data.length} samples for ${decoded} frames (${perFrame} per frame); expected ${samplesPerFrame} per frame — does the voice's params.sample_rate (${samplesPerFrame * 100}) match this synthesizer?`,
			);
		}
		return layout === undefined ? tensor.data : joinPieces(layout, tensor.data, samplesPerFrame);
	}
}

export interface LoadedModels {
	contentvec: ContentVecModel;
	/** Absent when the job needs no RMVPE (another f0 method, or a model without f0). */
	rmvpe: RmvpeModel | undefined;
	synthesizer: SynthesizerModel;
}

/**
 * Model files by role; `rmvpe` is optional. `isolateSynthesizer`: the synthesizer is an account's uploaded ONNX graph,
 * run in a process the runner can kill (`ModelCacheOptions.newIsolatedHost`).
 */
export type ModelPaths = Record<"contentvec" | "synthesizer", string> & {
	rmvpe?: string;
	isolateSynthesizer?: boolean;
};

interface CacheEntry {
	role: ModelRole;
	path: string;
	/** Where its session is: the cache's thread, or its process for isolated synthesizers. */
	host: ModelHost;
	isolated: boolean;
	model: Promise<OnnxModel>;
	/** The model once loaded. */
	loaded?: OnnxModel;
	/** Loaded for a transient use only (`acquire`'s `transient`), or forgotten: dropped when its last user is done. */
	transient: boolean;
	users: number;
	lastUsed: number;
}

/**
 * Releases a dropped entry's session once it has loaded; settles either way (a failed load has none). An isolated
 * one's process is ended instead, with its session and any run in it (`ProcessSessionHost.close`).
 */
function releaseSession(entry: CacheEntry): Promise<void> {
	if (entry.isolated) return entry.host.close().catch(() => undefined);
	return entry.model.then((model) => model.release()).catch(() => undefined);
}

/** A cache entry's key: one session per role, file and host kind. */
const entryKey = (role: ModelRole, path: string, isolated = false): string =>
	`${role}\u0000${path}${isolated ? "\u0000isolated" : ""}`;

/** Where a `ModelCache` runs its sessions, where it takes the feature models from, and how many voices it keeps. */
export interface ModelCacheOptions {
	/** Where the sessions run: a new `SessionHost` by default; tests pass their own. */
	newHost?: () => ModelHost;
	/**
	 * Where isolated synthesizers run (`ModelPaths.isolateSynthesizer`): a `ProcessSessionHost` with the engine's
	 * limits, one for each such synthesizer loaded, so that one killed at a limit takes no other voice's runs with it,
	 * and the next job that needs it loads it in a fresh one. Without it, none can load.
	 */
	newIsolatedHost?: () => ModelHost;
	/** The cache ContentVec and RMVPE come from (not disposed with this one); by default this one. */
	features?: ModelCache;
	/**
	 * Synthesizer sessions kept, in use or idle (default: no limit beyond `capacity`). On the CPU each one holds
	 * its weights and an arena grown to its longest window, about 0.4 GB for the published 40 kHz model: the
	 * engine keeps one per model thread there unless told otherwise (`RvcEngineOptions.cachedVoices`).
	 */
	maxSynthesizers?: number;
}

/**
 * Loaded sessions by role and file, shared by the jobs that use this cache (ContentVec and RMVPE are usually
 * the same files for every voice), all on one `SessionHost` thread of the cache's own, so their runs take turns.
 * Beyond `capacity` sessions, or `maxSynthesizers` synthesizers, the least recently used idle sessions are
 * released, before a new one loads, so that its load and its first run do not stack on the memory of the one it
 * replaces. `dispose` stops the thread.
 *
 * A cache given `features` takes ContentVec and RMVPE from that one instead and holds synthesizers only: several
 * model threads then share one copy of the two feature models (about 700 MB with the full-size ones), whose runs
 * take turns on the shared cache's thread while each job's synthesizer runs on its own.
 */
export class ModelCache {
	readonly #entries = new Map<string, CacheEntry>();
	readonly #settings: SessionSettings;
	readonly #capacity: number;
	readonly #maxSynthesizers: number;
	readonly #newHost: () => ModelHost;
	readonly #newIsolatedHost: (() => ModelHost) | undefined;
	readonly #features: ModelCache | undefined;
	#host: ModelHost;
	#clock = 0;
	#disposed = false;

	constructor(settings: SessionSettings, capacity: number, options: ModelCacheOptions = {}) {
		this.#settings = settings;
		this.#capacity = capacity;
		this.#maxSynthesizers = options.maxSynthesizers ?? Number.POSITIVE_INFINITY;
		this.#newHost = options.newHost ?? (() => new SessionHost());
		this.#newIsolatedHost = options.newIsolatedHost;
		this.#features = options.features;
		this.#host = this.#newHost();
	}

	/** A thread that stopped under its jobs took their sessions with it: start again on a new one. */
	#liveHost(): ModelHost {
		if (this.#host.stopped) {
			for (const [key, entry] of this.#entries) if (entry.host === this.#host) this.#entries.delete(key);
			this.#host = this.#newHost();
		}
		return this.#host;
	}

	/** A new process for an isolated synthesizer. */
	#isolatedHost(): ModelHost {
		if (this.#newIsolatedHost === undefined)
			throw new RvcEngineError("not_ready", "this model cache has no process for uploaded synthesizers");
		return this.#newIsolatedHost();
	}

	get size(): number {
		return this.#entries.size;
	}

	/**
	 * The entry for the file, loading it on first use, with one more user; `#releaseUse` takes the user back. A
	 * transient use evicts nothing, does not count as a use for eviction order, and a model it loads is dropped
	 * after it unless a lasting use took it meanwhile. `signal`, the job's abort: the job stops waiting for the load at
	 * once, and a load in a process that no other job waits for is ended with its process (`#releaseUse`).
	 */
	async #acquire(
		role: ModelRole,
		path: string,
		transient: boolean,
		isolated = false,
		signal?: AbortSignal,
	): Promise<{ entry: CacheEntry; model: OnnxModel }> {
		if (this.#disposed) throw new RvcEngineError("not_ready", "model cache used after dispose()");
		signal?.throwIfAborted();
		const shared = this.#liveHost();
		const key = entryKey(role, path, isolated);
		let entry = this.#entries.get(key);
		// An isolated synthesizer whose process was killed (at a limit, under another job) or died: loaded again.
		if (entry?.host.stopped === true) {
			this.#entries.delete(key);
			entry = undefined;
		}
		if (entry === undefined) {
			const host = isolated ? this.#isolatedHost() : shared;
			// Room first: what this load replaces is released (on the same thread, in order) before it starts.
			const released = transient ? [] : this.#evict(role);
			const model = Promise.all(released).then(() => OnnxModel.load(role, path, this.#settings, host));
			const created: CacheEntry = { role, path, host, isolated, model, transient, users: 0, lastUsed: 0 };
			this.#entries.set(key, created);
			model.then(
				(loaded) => {
					created.loaded = loaded;
					loaded.soleUser = () => created.users <= 1;
				},
				() => {
					if (this.#entries.get(key) === created) this.#entries.delete(key);
					if (isolated) void host.close();
				},
			);
			entry = created;
		}
		entry.users++;
		if (!transient) {
			entry.transient = false;
			entry.lastUsed = ++this.#clock;
		}
		try {
			return { entry, model: await untilAborted(entry.model, signal) };
		} catch (error) {
			// The job's end while the model loaded: as its use's end (a load nobody else waits for may be ended).
			if (signal?.aborted) this.#releaseUse(entry);
			else entry.users--;
			throw error;
		}
	}

	#releaseUse(entry: CacheEntry): void {
		entry.users--;
		const key = entryKey(entry.role, entry.path, entry.isolated);
		// A process killed under its jobs (at a limit, or with an aborted job's run) is of no use to the next; one still
		// computing the run of a job that was aborted while another job held it is of no use to anybody now, nor one
		// still loading a session for jobs that all stopped waiting (their abort): an account's graph may take up to the
		// load's deadline there, and the voice's next job loads it again in a fresh one.
		const ended =
			entry.isolated && (entry.host.stopped || entry.host.abandonedRun === true || entry.loaded === undefined);
		if ((entry.transient || ended) && entry.users === 0 && this.#entries.get(key) === entry) {
			this.#entries.delete(key);
			void releaseSession(entry);
		}
		void this.#evict();
	}

	/**
	 * Releases the least recently used idle sessions beyond the limits, counting one more of role `incoming` (about
	 * to load); the promises settle when their sessions are released. Transient ones do not count: they go after
	 * their use.
	 */
	#evict(incoming?: ModelRole): Promise<void>[] {
		const idle = [...this.#entries.entries()]
			.filter(([, e]) => e.users === 0)
			.sort(([, a], [, b]) => a.lastUsed - b.lastUsed);
		const kept = [...this.#entries.values()].filter((e) => !e.transient);
		const synthesizers = kept.filter((e) => e.role === "synthesizer").length;
		let excess = kept.length + (incoming === undefined ? 0 : 1) - this.#capacity;
		let excessSynthesizers = synthesizers + (incoming === "synthesizer" ? 1 : 0) - this.#maxSynthesizers;
		const released: Promise<void>[] = [];
		for (const [key, entry] of idle) {
			const synthesizer = entry.role === "synthesizer";
			if (excess <= 0 && !(synthesizer && excessSynthesizers > 0)) continue;
			this.#entries.delete(key);
			released.push(releaseSession(entry));
			excess--;
			if (synthesizer) excessSynthesizers--;
		}
		return released;
	}

	/**
	 * Loads (or reuses) the models and checks they fit together; call `release` when done with them. `transient`
	 * (a voice's validation): what this loads is not kept after it, and loading it evicts nothing jobs use. `signal`,
	 * the job's abort: it fails at once with the abort's reason instead of waiting for a load (which other jobs may
	 * still wait for; an isolated synthesizer's process that none does is ended).
	 */
	async acquire(
		paths: ModelPaths,
		{ transient = false, signal }: { transient?: boolean; signal?: AbortSignal } = {},
	): Promise<{ models: LoadedModels; release: () => void }> {
		const roles: ModelRole[] =
			paths.rmvpe === undefined ? ["contentvec", "synthesizer"] : ["rmvpe", "contentvec", "synthesizer"];
		// One at a time, RMVPE first: while a session loads, the file's weights and the session's copy are both
		// in memory (twice the model's size for RMVPE, whose convolution weights are reordered for NCHWc);
		// loading the three together stacked those peaks, and RMVPE's is the largest.
		const settled: PromiseSettledResult<{ owner: ModelCache; entry: CacheEntry; model: OnnxModel }>[] = [];
		for (const role of roles) {
			const owner = role === "synthesizer" ? this : (this.#features ?? this);
			settled.push(
				await owner
					.#acquire(
						role,
						paths[role] as string,
						transient,
						role === "synthesizer" && paths.isolateSynthesizer === true,
						signal,
					)
					.then(
						(value) => ({ status: "fulfilled", value: { owner, ...value } }) as const,
						(reason: unknown) => ({ status: "rejected", reason }) as const,
					),
			);
		}
		const release = once(() => {
			for (const s of settled) if (s.status === "fulfilled") s.value.owner.#releaseUse(s.value.entry);
		});
		const failure = settled.find((s) => s.status === "rejected");
		if (failure !== undefined) {
			release();
			throw failure.reason;
		}
		const loaded = new Map(
			settled.map((s, i) => [roles[i], (s as PromiseFulfilledResult<{ model: OnnxModel }>).value.model]),
		);
		try {
			const rmvpe = loaded.get("rmvpe");
			const models = {
				contentvec: new ContentVecModel(loaded.get("contentvec") as OnnxModel),
				rmvpe: rmvpe === undefined ? undefined : new RmvpeModel(rmvpe),
				synthesizer: new SynthesizerModel(loaded.get("synthesizer") as OnnxModel),
			};
			const a = models.contentvec.declaredFeatureDim;
			const b = models.synthesizer.declaredFeatureDim;
			if (a !== undefined && b !== undefined && a !== b) {
				throw new FeatureWidthMismatch(
					a,
					b,
					`contentvec model ${paths.contentvec} gives ${a}-d features but synthesizer ${paths.synthesizer} takes ${b}-d phone input (v2 voices use 768, v1 voices 256)`,
				);
			}
			return { models, release };
		} catch (error) {
			release();
			throw error;
		}
	}

	/**
	 * The synthesizer from `path`, for one more user, where this cache has it loaded already, else nothing: an
	 * idle model thread is lent to another job's run only where that costs no load and no memory (`rvc-engine.ts`).
	 * `release` when done.
	 */
	lendSynthesizer(path: string): { synthesizer: SynthesizerModel; release: () => void } | undefined {
		const entry = this.#loadedSynthesizer(path);
		if (entry?.loaded === undefined) return undefined;
		const synthesizer = new SynthesizerModel(entry.loaded);
		entry.users++;
		entry.lastUsed = ++this.#clock;
		return { synthesizer, release: once(() => this.#releaseUse(entry)) };
	}

	/** Whether `lendSynthesizer(path)` would lend it. */
	holdsSynthesizer(path: string): boolean {
		return this.#loadedSynthesizer(path) !== undefined;
	}

	#loadedSynthesizer(path: string): CacheEntry | undefined {
		if (this.#disposed) return undefined;
		for (const isolated of [false, true]) {
			const entry = this.#entries.get(entryKey("synthesizer", path, isolated));
			if (entry?.loaded !== undefined && !entry.host.stopped) return entry;
		}
		return undefined;
	}

	/**
	 * Drops the sessions loaded from `path` (a deleted voice's file): at once where idle, else when their last user is
	 * done (a lasting use that takes one meanwhile keeps it again). Resolves when the idle ones are released.
	 */
	async forget(path: string): Promise<void> {
		const released: Promise<void>[] = [];
		for (const [key, entry] of this.#entries) {
			if (entry.path !== path) continue;
			entry.transient = true;
			if (entry.users > 0) continue;
			this.#entries.delete(key);
			released.push(releaseSession(entry));
		}
		await Promise.all(released);
	}

	async dispose(): Promise<void> {
		this.#disposed = true;
		const entries = [...this.#entries.values()];
		this.#entries.clear();
		await Promise.all(entries.map(releaseSession));
		await this.#host.close();
	}
}
