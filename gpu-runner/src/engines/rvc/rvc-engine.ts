/**
 * The `rvc` engine: RVC v2 voice conversion on onnxruntime-node, as RVC's `Pipeline` does it, per chunk:
 *
 *   16 kHz mono ─┬─ ContentVec ──> [frames/2, 768] ── repeat each frame twice ──> phone [frames, 768]
 *                └─ log-mel (128 bands, hop 160) ─ RMVPE ─> salience [frames, 360] ─ local average ─> f0 Hz
 *                   f0 x 2^(semitones/12) ──> pitchf; mel-scale quantisation 1..255 ──> pitch
 *   synthesizer(phone, phone_lengths, pitch, pitchf, ds, rnd) ──> audio at sample_rate, sample_rate/100 per frame
 *
 * With an `index` artifact, each ContentVec frame is first blended with its nearest training vectors
 * (`feature-retrieval.ts`, `index_rate`), and unvoiced frames keep part of the original (`protect`); the output
 * takes part of the source's loudness envelope (`rms_mix_rate`, over the whole stream as RVC does). f0 comes from RMVPE or the built-in YIN
 * (`f0_method`); a synthesizer without pitch inputs (RVC's f0 = 0 models) gets no f0, and its output is shifted
 * by the key instead, formants kept (`keyShifterFor`).
 *
 * Long input is cut at quiet points and joined with crossfades (`chunker.ts`), so memory stays bounded.
 *
 * Artifacts (`job.artifactPaths`): `contentvec`, `synthesizer` (an ONNX export or RVC's `.pth` checkpoint, built
 * into ONNX on first use: `synthesizer-file.ts`), `rmvpe` (ONNX, needed for the `rmvpe` f0 method on models
 * with f0), optional `index` (faiss). Voice params: see `params.ts`; `sample_rate` is required; a job's
 * `voiceSettings` override some of them.
 *
 * Compared with RVC's pipeline (details in README.md): the 48 Hz input high-pass runs once, forwards (RVC's
 * filtfilt needs the whole file); the key shift also applies to f0 = 0 models (RVC ignores it there); the source
 * is not scaled down to peak at 0.95 first (its peak is known only at its end). The output's peak limit, which
 * needs the whole output, is the WAV writer's (`src/audio/wav-file-writer.ts`).
 */
import { randomInt } from "node:crypto";
import { availableParallelism } from "node:os";
import type { VoiceDescriptor } from "../../../../src/contracts/runner.ts";
import { removeIfDamaged } from "../../artifacts/damaged-artifact.ts";
import { PermanentJobError } from "../../job-errors.ts";
import { AlignedPitchShifter } from "../dsp/signalsmith-stretch.ts";
import { DspVoiceParams } from "../dsp/voice-params.ts";
import type { AudioBlock, Engine, EngineInfo, EngineJob, PcmFormat } from "../engine.ts";
import { type ChunkPlan, type ChunkWindow, convertInChunks, JOIN_ALIGN_SECONDS, makeChunkPlan } from "./chunker.ts";
import { type DecodeLayout, decodedFrames, splitLayout } from "./decode-pieces.ts";
import { RvcEngineError } from "./errors.ts";
import {
	EXECUTION_PROVIDERS,
	type ExecutionProviderName,
	NoExecutionProviderError,
	type ProviderSelection,
	selectExecutionProvider,
} from "./execution-provider.ts";
import { readFaissIndexWidth } from "./faiss-index.ts";
import { protectUnvoiced } from "./feature-retrieval.ts";
import { readFileBytes } from "./file-bytes.ts";
import { ButterworthHighPass } from "./high-pass.ts";
import { IndexCache } from "./index-cache.ts";
import type { IndexThread } from "./index-thread.ts";
import { StreamingLoudnessMix } from "./loudness-mix.ts";
import { LogMelSpectrogram, RMVPE_HOP, RMVPE_SAMPLE_RATE } from "./mel.ts";
import { ONNX_INSPECTION_SECONDS } from "./model-inspection.ts";
import { type LoadedModels, ModelCache, type ModelPaths, type SynthesizerModel } from "./models.ts";
import { synthesizerGraphProblem } from "./onnx-graph-rules.ts";
import { applyVoiceSettings, CPU_PARAM_DEFAULTS, parseRvcParams, type RvcParams, speakerProblem } from "./params.ts";
import { decodeSalience, shiftAndQuantise } from "./pitch.ts";
import { NormalNoise } from "./random.ts";
import { ProcessSessionHost } from "./session-host-process.ts";
import { SlotPool } from "./slot-pool.ts";
import { synthesizerOnnxPath, synthesizerSpeakers } from "./synthesizer-file.ts";
import { DECODE_SPAN_MARGIN_FRAMES } from "./synthesizer-graph.ts";
import { CONTENTVEC_STRIDE, CPU_MAX_CHUNK_SECONDS, GPU_WINDOW_MULTIPLE_SECONDS } from "./windows.ts";
import { trackPitchYin } from "./yin-pitch.ts";

/** Artifact names an `rvc` voice may carry: `rmvpe` is needed only for f0_method rmvpe, `index` is optional. */
export const RVC_ARTIFACTS = ["contentvec", "rmvpe", "synthesizer", "index"] as const;

export interface RvcChunkStats {
	index: number;
	/** Input samples (16 kHz) the chunk is responsible for, and the converted span with context. */
	segmentSamples: number;
	windowSamples: number;
	frames: number;
	/** Frames the synthesizer's decoder ran on: all of them, or the kept span (`decodedSpan`) with its pieces' overlaps. */
	decodedFrames: number;
	/** Model threads whose synthesizers decoded the span: this job's, and idle ones lent to it (`lendIdleThreads`). */
	synthesizerThreads: number;
	voicedFrames: number;
	milliseconds: {
		contentvec: number;
		/** Feature retrieval from the index (0 without one). */
		retrieval: number;
		/** Log-mel and RMVPE, or YIN (0 for models without f0). */
		mel: number;
		rmvpe: number;
		synthesizer: number;
	};
}

export interface RvcEngineOptions {
	/** Providers to try, in order, each alone. Default: cuda, webgpu, cpu. */
	executionProviders?: readonly ExecutionProviderName[];
	/**
	 * Jobs converted at once (the runner's `RUNNER_CAPACITY`; default 1). On the CPU up to one per core gets a
	 * model thread and a synthesizer of its own, so their synthesizer runs go side by side rather than by turns,
	 * while ContentVec and RMVPE are loaded once, on a thread the jobs share (README, "Model threads"); on a GPU
	 * the jobs share one thread and one copy of everything.
	 */
	capacity?: number;
	/**
	 * Model threads on the CPU (`RUNNER_RVC_MODEL_THREADS`): by default one per job of `capacity`, up to one per
	 * core. Fewer saves a synthesizer and its arena each; jobs beyond them wait for a thread. At most `capacity`.
	 */
	modelThreads?: number;
	/**
	 * CPU threads per session (default: onnxruntime's with one model thread, else the cores divided among the
	 * model threads, at least one each).
	 */
	intraOpNumThreads?: number;
	/** Loaded model sessions kept across jobs, per model thread and for the shared feature models (default 6). */
	maxCachedModels?: number;
	/**
	 * Voices whose synthesizer each model thread keeps loaded between jobs (`RUNNER_RVC_CACHED_VOICES`). Default:
	 * 1 on the CPU, where each costs about 0.4 GB (its weights and an arena the size of its longest window: four
	 * kept took a runner converting five voices in turn from 1.3 to 2.6 GB), so another voice's job loads its
	 * synthesizer again (about 0.4 s); 4 on a GPU.
	 */
	cachedVoices?: number;
	/**
	 * Feature indexes kept in memory across jobs, in use or idle, each on a thread of its own (default 16): a bound
	 * on their threads; what they hold is bounded by `maxCachedIndexBytes`.
	 */
	maxCachedIndexes?: number;
	/**
	 * Bytes the kept feature indexes may hold in all (`RUNNER_RVC_INDEX_CACHE_MB`; default `DEFAULT_INDEX_CACHE_BYTES`,
	 * by provider):
	 * each holds about its file's size (up to the 1000 MB upload limit) and its thread about 25 MB (`index-cache.ts`).
	 * Past it the least recently used idle ones go; one larger than all of it serves its jobs and goes after them.
	 */
	maxCachedIndexBytes?: number;
	/** Seed for the synthesizer's noise; by default a random seed per job. Set it for reproducible output. */
	noiseSeed?: number;
	/**
	 * Run ContentVec's matrix products in int8 (dynamic quantisation, weights per column, `int8-matmul.ts`):
	 * a third of ContentVec's memory, at a small feature error (README).
	 */
	contentvecInt8?: boolean;
	/**
	 * On the CPU, ContentVec and RMVPE keep their activations in arenas between runs, as the synthesizer does
	 * (`memoryArenaFor` in `models.ts`): 10-15 % faster, for 120-230 MiB more with the full-size models. Default:
	 * on where several model threads share one copy of them (their runs are what the jobs queue for, and one
	 * arena serves every job), off with one model thread.
	 */
	featureArenas?: boolean;
	/**
	 * On the CPU, each window's decoded span is cut into this many pieces that the decoder runs as rows of one
	 * run, so that all the session's threads work on its narrow layers (`decode-pieces.ts`; the output is the
	 * same). Default: the synthesizer session's threads; 1 turns it off.
	 */
	decodePieces?: number;
	/**
	 * On the CPU with several model threads, a window's decoded span is shared with the model threads that are idle
	 * at that moment and hold the same synthesizer, each decoding a part of it beside the job's own (default on;
	 * the output is the same): a job alone on a runner of capacity 2 then has both cores for its synthesizer
	 * instead of one. A lent thread goes back after that run, so a job that comes meanwhile waits at most for one.
	 * A job known to span several windows (`EngineJob.inputFrames`) first loads its synthesizer on idle threads that
	 * hold another voice's, so that it can be lent them.
	 */
	lendIdleThreads?: boolean;
	/**
	 * The limits an account's uploaded ONNX synthesizer runs under, in a process of its own (`session-host-process.ts`):
	 * each run's deadline, `secondsPerAudioSecond` times the window's audio (at least `minRunSeconds`), and the
	 * process's memory ceiling. Defaults: `UPLOADED_SYNTHESIZER_LIMITS`.
	 */
	uploadedSynthesizerLimits?: Partial<UploadedSynthesizerLimits>;
	/** Called after each chunk, for metrics and the benchmark. */
	onChunk?: (stats: RvcChunkStats) => void;
}

export interface UploadedSynthesizerLimits {
	/** A run's deadline per second of the window's audio (`RUNNER_RVC_ONNX_RUN_SECONDS_PER_AUDIO_SECOND`). */
	secondsPerAudioSecond: number;
	/** The shortest deadline a run gets, its load's too (`RUNNER_RVC_ONNX_RUN_MIN_SECONDS`). */
	minRunSeconds: number;
	/** The most resident memory its process may reach, in bytes (`RUNNER_RVC_ONNX_MEMORY_MB`). */
	memoryBytes: number;
}

/**
 * Defaults of `RvcEngineOptions.uploadedSynthesizerLimits` (README, "At conversion": measured on RVC's full-size 40 kHz
 * v2 export, 2 threads of a busy 2-core machine). Genuine exports ran a window at 1.0 to 2.3 times real time there;
 * 10 s per audio second, at least 60 s, is 4 times the slowest or more. The process peaked at 6.2 GB at the CPU's
 * longest window (6 998 frames, decoded whole); the ceiling is about twice that.
 */
export const UPLOADED_SYNTHESIZER_LIMITS: UploadedSynthesizerLimits = {
	secondsPerAudioSecond: 10,
	minRunSeconds: 60,
	memoryBytes: 12_288 * 1024 * 1024,
};

/** A process host for an account's uploaded synthesizer under `limits`. */
function uploadedSynthesizerHost(limits: UploadedSynthesizerLimits): ProcessSessionHost {
	return new ProcessSessionHost({
		runLimit(feeds) {
			// The window's frames, 100 a second (phone is [1, frames, features]).
			const frames = Number(feeds.phone?.dims[1] ?? 0);
			const seconds = frames / 100;
			return {
				seconds: Math.max(limits.minRunSeconds, limits.secondsPerAudioSecond * seconds),
				run: `${frames} frames (${seconds.toFixed(1)} s of audio)`,
			};
		},
		// Validation loaded it within ONNX_INSPECTION_SECONDS; a load is not held to a shorter floor than that.
		loadSeconds: Math.max(ONNX_INSPECTION_SECONDS, limits.minRunSeconds),
		memoryBytes: limits.memoryBytes,
	});
}

/**
 * The feature indexes' memory unless the operator sets it: the ceilings the count alone gave before. On the CPU, one
 * index at the 1000 MB upload limit (about 1030 MB held with its thread), or several of the 50-150 MB indexes RVC's
 * training writes; on a GPU, whose host's memory is larger, two.
 */
export const DEFAULT_INDEX_CACHE_BYTES = { cpu: 1_100_000_000, gpu: 2_200_000_000 } as const;

const INPUT_FORMAT: PcmFormat = { sampleRate: RMVPE_SAMPLE_RATE, channels: 1 };

type VoiceFiles = Pick<EngineJob, "voice" | "artifactPaths">;

function missingArtifacts(job: VoiceFiles, names: readonly string[], why: string): RvcEngineError {
	const present = [...job.artifactPaths.keys()].join(", ") || "none";
	return new RvcEngineError(
		"missing_artifact",
		`rvc voice ${job.voice.id} lacks artifact(s) ${names.join(", ")} (has: ${present}); ${why}`,
	);
}

/** The model files this job loads: RMVPE only where its f0 method is rmvpe. */
function modelPaths(job: VoiceFiles, params: RvcParams): ModelPaths {
	const rmvpe = params.f0Method === "rmvpe" ? job.artifactPaths.get("rmvpe") : undefined;
	const missing = ["contentvec", "synthesizer"].filter((name) => !job.artifactPaths.has(name));
	if (missing.length > 0) {
		// Whether RMVPE is needed is known once the synthesizer is loaded; name it here too, so one message lists all.
		if (params.f0Method === "rmvpe" && rmvpe === undefined) missing.splice(1, 0, "rmvpe");
		throw missingArtifacts(
			job,
			missing,
			"an rvc voice needs contentvec and synthesizer ONNX files, and rmvpe for f0_method rmvpe on a model with f0",
		);
	}
	return {
		contentvec: job.artifactPaths.get("contentvec") as string,
		synthesizer: job.artifactPaths.get("synthesizer") as string,
		...(rmvpe !== undefined ? { rmvpe } : {}),
	};
}

/** Pitch inputs for the synthesizer, from the job's f0 method. */
async function estimatePitch(
	samples: Float32Array,
	frames: number,
	models: LoadedModels,
	params: RvcParams,
	mel: LogMelSpectrogram,
): Promise<{ f0: Float32Array; melMs: number; rmvpeMs: number }> {
	if (params.f0Method === "yin") {
		const started = performance.now();
		return {
			f0: trackPitchYin(samples, frames, RMVPE_SAMPLE_RATE, RMVPE_HOP),
			melMs: performance.now() - started,
			rmvpeMs: 0,
		};
	}
	const rmvpe = models.rmvpe as NonNullable<LoadedModels["rmvpe"]>;
	let started = performance.now();
	const spectrogram = mel.compute(samples);
	const melMs = performance.now() - started;
	started = performance.now();
	const salience = await rmvpe.salience(spectrogram);
	// The mel has frames + 1 columns (centred STFT); RVC keeps the first `frames` f0 values (pitch[:p_len]).
	return { f0: decodeSalience(salience, frames, params.f0Threshold), melMs, rmvpeMs: performance.now() - started };
}

/** ContentVec's 50 frames/s doubled to the synthesizer's 100 (RVC: F.interpolate(scale_factor=2), nearest). */
function doubleFrameRate(features: Float32Array, featureFrames: number, dim: number, frames: number): Float32Array {
	// The doubled count can fall a frame or two short of the audio's; the last frame is repeated so the
	// output keeps the input's duration.
	const phone = new Float32Array(frames * dim);
	for (let f = 0; f < frames; f++) {
		const source = Math.min(f >> 1, featureFrames - 1);
		phone.set(features.subarray(source * dim, (source + 1) * dim), f * dim);
	}
	return phone;
}

/** The job's 16 kHz mono samples, high-passed at 48 Hz as RVC does before anything else, each also shown to `observe`. */
async function* monoSamples(
	input: AsyncIterable<AudioBlock>,
	observe: (samples: Float32Array) => void,
): AsyncGenerator<Float32Array> {
	const highPass = new ButterworthHighPass(48, RMVPE_SAMPLE_RATE);
	for await (const block of input) {
		const channel = block.channels[0];
		if (block.sampleRate !== RMVPE_SAMPLE_RATE || block.channels.length !== 1 || channel === undefined) {
			throw new RvcEngineError(
				"invalid_input",
				`rvc engine takes 16000 Hz mono blocks, got ${block.sampleRate} Hz with ${block.channels.length} channel(s); resample and downmix first`,
			);
		}
		const filtered = highPass.process(channel);
		observe(filtered);
		yield filtered;
	}
}

/**
 * The frames of a window the synthesizer decodes: all of them, or, where the graph can decode a span, the
 * segment with half the crossfade, the join's alignment (`JOIN_ALIGN_SECONDS`) and DECODE_SPAN_MARGIN_FRAMES
 * either side, so the context that the chunker cuts away is run through the text encoder and the flow (which see
 * the whole window) but not through the decoder, the bulk of the work (loudness mixing runs over the joined output,
 * so it never sees the silence left outside the span). Not on CUDA (`spans` false): every span length would be a
 * new shape for cuDNN's algorithm search.
 */
function decodedSpan(
	window: ChunkWindow,
	frames: number,
	params: RvcParams,
	spans: boolean,
): { start: number; frames: number } {
	if (!spans) return { start: 0, frames };
	const reach = Math.ceil((params.crossfadeSeconds / 2 + JOIN_ALIGN_SECONDS) * 100) + DECODE_SPAN_MARGIN_FRAMES;
	// Whole frames around the segment: the last one ends with the source, rarely on a frame boundary.
	const start = Math.max(0, Math.floor((window.segmentStart - window.windowStart) / RMVPE_HOP) - reach);
	const end = Math.min(frames, Math.ceil((window.segmentEnd - window.windowStart) / RMVPE_HOP) + reach);
	return { start, frames: end - start };
}

/**
 * The key shift of a model without pitch input (RVC's f0 = 0 models, which RVC runs without any): the converted
 * audio is shifted instead, after the synthesizer, with its formants kept, as a dsp voice with default params
 * shifts it (Signalsmith Stretch), and keeps its length. None for a model that takes pitch (its f0 is shifted)
 * or for no shift.
 */
async function keyShifterFor(
	synthesizer: SynthesizerModel,
	semitones: number,
	sampleRate: number,
): Promise<AlignedPitchShifter | undefined> {
	if (synthesizer.takesPitch || semitones === 0) return undefined;
	const dsp = DspVoiceParams.parse({});
	return AlignedPitchShifter.create(1, sampleRate, {
		semitones,
		formantSemitones: dsp.formant_shift,
		formantBaseHz: dsp.formant_base_hz,
		tonalityLimitHz: dsp.tonality_limit_hz,
	});
}

/** A synthesizer on an idle model thread, lent to a job for one run (`RvcEngineOptions.lendIdleThreads`). */
interface LentSynthesizer {
	synthesizer: SynthesizerModel;
	release: () => void;
}

/**
 * The span's samples from the job's synthesizer and any lent ones, each decoding consecutive pieces of the span
 * at the same time (`splitLayout`); every piece keeps what it keeps when one run decodes them all, so the samples
 * are the same. Lent synthesizers go back when their run is over (all of them by the time this returns).
 */
async function decodeSpread(
	own: SynthesizerModel,
	lent: LentSynthesizer[],
	inputs: Parameters<SynthesizerModel["synthesize"]>[0],
	samplesPerFrame: number,
	span: { start: number; frames: number },
	pieces: number,
	/** The job's abort: it stops runs in a process (an account's uploaded synthesizer), the lent ones' too. */
	signal?: AbortSignal,
): Promise<{ audio: Float32Array; decodedFrames: number; threads: number }> {
	try {
		const layout = own.layout(span, pieces, 1 + lent.length);
		const runs = splitLayout(layout, 1 + lent.length);
		// A span too short for a piece per thread leaves some unused.
		for (const unused of lent.slice(runs.length - 1)) unused.release();
		const synthesizers = [own, ...lent.map((l) => l.synthesizer)];
		const parts = await Promise.allSettled(
			runs.map(async (run, i) => {
				try {
					return await (synthesizers[i] as SynthesizerModel).synthesize(inputs, samplesPerFrame, run, signal);
				} finally {
					lent[i - 1]?.release();
				}
			}),
		);
		const failed = parts.find((p) => p.status === "rejected");
		if (failed !== undefined) throw failed.reason;
		const audio = parts.map((p) => (p as PromiseFulfilledResult<Float32Array>).value);
		if (audio.length === 1)
			return { audio: audio[0] as Float32Array, decodedFrames: decodedFrames(layout), threads: 1 };
		const joined = new Float32Array(span.frames * samplesPerFrame);
		let offset = 0;
		audio.forEach((part, i) => {
			const samples = (runs[i] as DecodeLayout).frames * samplesPerFrame;
			joined.set(part.subarray(0, samples), offset);
			offset += samples;
		});
		return { audio: joined, decodedFrames: decodedFrames(layout), threads: runs.length };
	} finally {
		for (const l of lent) l.release();
	}
}

/** Converts one chunk window, as RVC's `Pipeline.vc` converts one of its segments. */
async function convertWindow(
	window: ChunkWindow,
	models: LoadedModels,
	/** The voice's feature index, if it has one and `index_rate` is above 0. */
	retrieval: IndexThread | undefined,
	params: RvcParams,
	job: {
		semitones: number;
		mel: LogMelSpectrogram;
		noise: NormalNoise;
		onChunk: RvcEngineOptions["onChunk"];
		/** Whether spans may be decoded (`decodedSpan`). */
		spans: boolean;
		/** Pieces a decoded span is cut into, as rows of one run (`decode-pieces.ts`); 1 for none. */
		decodePieces: number;
		/** Idle model threads holding this synthesizer (file path), lent for one run each; none where not wanted. */
		lendThreads?: (synthesizerPath: string) => Promise<LentSynthesizer[]>;
		/** The job's abort, for the synthesizer's runs (`decodeSpread`). */
		signal?: AbortSignal;
	},
): Promise<Float32Array> {
	const { semitones, mel, noise, onChunk } = job;
	const frames = window.samples.length / RMVPE_HOP;
	const samplesPerFrame = params.sampleRate / 100;
	let started = performance.now();

	const features = await models.contentvec.extract(window.samples);
	const timeContentvec = performance.now() - started;
	if (features.frames < 1)
		throw new RvcEngineError("invalid_model", `contentvec returned no frames for ${window.samples.length} samples`);

	started = performance.now();
	const blended =
		retrieval === undefined
			? features.data
			: await retrieval.retrieve(features.data, features.frames, params.indexRate);
	const timeRetrieval = retrieval === undefined ? 0 : performance.now() - started;
	const phone = doubleFrameRate(blended, features.frames, features.dim, frames);

	const takesPitch = models.synthesizer.takesPitch;
	const estimate = takesPitch ? await estimatePitch(window.samples, frames, models, params, mel) : undefined;
	const f0 = estimate?.f0;
	const shifted = f0 === undefined ? undefined : shiftAndQuantise(f0, semitones + params.transposeSemitones);
	// protect only changes anything where retrieval changed the features.
	if (shifted !== undefined && retrieval !== undefined && params.protect < 0.5) {
		protectUnvoiced(
			phone,
			doubleFrameRate(features.data, features.frames, features.dim, frames),
			shifted.pitchf,
			params.protect,
		);
	}

	started = performance.now();
	const rnd = noise.fill(models.synthesizer.noiseChannels * frames, params.noiseScale);
	const spans = job.spans && models.synthesizer.decodesSpan;
	const span = decodedSpan(window, frames, params, spans);
	const lent = spans ? ((await job.lendThreads?.(models.synthesizer.model.path)) ?? []) : [];
	const decoded = await decodeSpread(
		models.synthesizer,
		lent,
		{ phone, frames, ...shifted, speakerId: params.speakerId, rnd },
		samplesPerFrame,
		span,
		job.decodePieces,
		job.signal,
	);
	const audio = decoded.audio;
	let output = audio.subarray(0, frames * samplesPerFrame);
	if (span.frames < frames) {
		// Outside the span is context that the chunker cuts away: left silent.
		output = new Float32Array(frames * samplesPerFrame);
		output.set(audio.subarray(0, span.frames * samplesPerFrame), span.start * samplesPerFrame);
	}
	const timeSynthesizer = performance.now() - started;

	onChunk?.({
		index: window.index,
		segmentSamples: window.segmentEnd - window.segmentStart,
		windowSamples: window.samples.length,
		frames,
		decodedFrames: decoded.decodedFrames,
		synthesizerThreads: decoded.threads,
		voicedFrames: f0 === undefined ? 0 : f0.reduce((n, v) => (v > 0 ? n + 1 : n), 0),
		milliseconds: {
			contentvec: timeContentvec,
			retrieval: timeRetrieval,
			mel: estimate?.melMs ?? 0,
			rmvpe: estimate?.rmvpeMs ?? 0,
			synthesizer: timeSynthesizer,
		},
	});
	return output;
}

export function createRvcEngine(options: RvcEngineOptions = {}): Engine {
	const order = options.executionProviders ?? EXECUTION_PROVIDERS;
	let selection: ProviderSelection | undefined;
	let caches: SlotPool<ModelCache> | undefined;
	/** ContentVec and RMVPE for every model thread, when there are several. */
	let features: ModelCache | undefined;
	let indexes: IndexCache | undefined;
	/** Pieces per decoded span (`RvcEngineOptions.decodePieces`), set by `init`. */
	let decodePieces = 1;
	/** Synthesizers each model thread keeps (`RvcEngineOptions.cachedVoices`), set by `init`. */
	let cachedVoices = 1;
	/** Feature indexes kept (`RvcEngineOptions.maxCachedIndexes`), set by `init`. */
	let cachedIndexes = 1;
	/** Bytes they may hold (`RvcEngineOptions.maxCachedIndexBytes`), set by `init`. */
	let cachedIndexBytes: number = DEFAULT_INDEX_CACHE_BYTES.cpu;
	/** The ONNX file built from each `.pth` synthesizer artifact used (`synthesizerOnnxPath`), for `forget`. */
	const builtFrom = new Map<string, string>();
	/** Uploaded ONNX synthesizers already read against the graph rules (`onnx-graph-rules.ts`). */
	const graphsChecked = new Set<string>();
	/** Whether idle model threads decode parts of a job's spans (`RvcEngineOptions.lendIdleThreads`), set by `init`. */
	let lendThreads = false;
	const mel = new LogMelSpectrogram();

	const chunkPlan = (params: RvcParams): ChunkPlan =>
		makeChunkPlan({
			inputRate: RMVPE_SAMPLE_RATE,
			outputRate: params.sampleRate,
			hop: RMVPE_HOP,
			cutStep: CONTENTVEC_STRIDE,
			chunkSeconds: params.chunkSeconds,
			searchSeconds: params.chunkSearchSeconds,
			contextSeconds: params.contextSeconds,
			crossfadeSeconds: params.crossfadeSeconds,
			...(selection?.provider === "cuda" ? { windowMultipleSeconds: GPU_WINDOW_MULTIPLE_SECONDS } : {}),
		});
	// On the CPU a 30 s chunk takes a minute or more and several GB; shorter chunks keep memory down and
	// let an abort (checked between chunks) take effect sooner.
	const voiceParams = (voice: VoiceDescriptor, settings: EngineJob["voiceSettings"]): RvcParams => {
		const cpu = selection?.provider === "cpu";
		const params = applyVoiceSettings(parseRvcParams(voice.params, cpu ? CPU_PARAM_DEFAULTS : {}), settings);
		if (!cpu || params.chunkSeconds <= CPU_MAX_CHUNK_SECONDS) return params;
		return {
			...params,
			chunkSeconds: CPU_MAX_CHUNK_SECONDS,
			chunkSearchSeconds: Math.min(params.chunkSearchSeconds, CPU_MAX_CHUNK_SECONDS / 4),
		};
	};
	/** The voice's model files, a `.pth` synthesizer built into ONNX once (cached beside it by checksum). */
	const modelFiles = async (files: VoiceFiles, params: RvcParams): Promise<ModelPaths> => {
		const paths = modelPaths(files, params);
		const synthesizer = await synthesizerOnnxPath(paths.synthesizer);
		// A synthesizer uploaded as ONNX (not built here from a `.pth`) is the uploader's graph. Validation and the
		// admin tool refuse graphs that loop or branch before any run; this holds the rule for a voice that reached
		// the runner without them (made ready before the rule), as such a graph would hold the model thread, and every
		// job of its slot, for as long as it loops. Read once per file and process.
		if (synthesizer === paths.synthesizer && !graphsChecked.has(synthesizer)) {
			const problem = synthesizerGraphProblem(await readFileBytes(synthesizer));
			if (problem !== undefined) {
				throw new RvcEngineError("invalid_model", `synthesizer model ${synthesizer}: ${problem}`);
			}
			graphsChecked.add(synthesizer);
		}
		// A speaker past the model's fails its embedding lookup (onnxruntime's words on the CPU, after the first
		// window's features), so it is refused before anything runs: by the count the params record (parseRvcParams),
		// else by the model file's own: a checkpoint's, or an ONNX export's where its graph says it (read once, and only
		// for a speaker other than the first, which every model has).
		if (params.speakerId > 0 && params.speakers === undefined) {
			const speakers = await synthesizerSpeakers(paths.synthesizer);
			const problem = speakers === undefined ? undefined : speakerProblem(params.speakerId, speakers);
			if (problem !== undefined) throw new RvcEngineError("invalid_params", `invalid rvc voice params: ${problem}`);
		}
		if (synthesizer !== paths.synthesizer) builtFrom.set(paths.synthesizer, synthesizer);
		// An account's uploaded graph runs in a process the runner can kill at its limits; the graph built from a
		// `.pth` is the engine's own, and a service voice's is the operator's: both stay on the model thread.
		const isolateSynthesizer = synthesizer === paths.synthesizer && files.voice.account_voice !== false;
		return { ...paths, synthesizer, ...(isolateSynthesizer ? { isolateSynthesizer } : {}) };
	};
	/** The job's models, from a model cache (and its thread) lent to this job until `release`. */
	const acquireModels = async (files: VoiceFiles, params: RvcParams, transient: boolean, signal: AbortSignal) => {
		if (caches === undefined) throw new RvcEngineError("not_ready", "rvc engine used before init() or after dispose()");
		const paths = await modelFiles(files, params);
		// The job's abort stops its wait for a model thread (behind other jobs' conversions), and for a load (an uploaded
		// synthesizer's may take up to its deadline).
		const slot = await caches.acquire(signal);
		try {
			const { models, release } = await slot.item.acquire(paths, { transient, signal });
			return {
				models,
				paths,
				release: () => {
					release();
					slot.release();
				},
			};
		} catch (error) {
			slot.release();
			throw error;
		}
	};

	/**
	 * The model threads that are free at this moment and hold this synthesizer already, each lent for one run
	 * (`RvcEngineOptions.lendIdleThreads`). Never waits and never loads: a thread a job is waiting for is not free.
	 */
	const lendIdleThreads = (synthesizerPath: string): LentSynthesizer[] => {
		const lent: LentSynthesizer[] = [];
		for (;;) {
			const slot = caches?.tryAcquire((cache) => cache.holdsSynthesizer(synthesizerPath));
			if (slot === undefined) return lent;
			const synthesizer = slot.item.lendSynthesizer(synthesizerPath);
			if (synthesizer === undefined) {
				slot.release();
				return lent;
			}
			lent.push({
				synthesizer: synthesizer.synthesizer,
				release: () => {
					synthesizer.release();
					slot.release();
				},
			});
		}
	};

	/**
	 * Loads the synthesizer on the model threads that are free at this moment and hold another voice's (evicting
	 * it, idle), so that they can be lent to this job's later windows; resolves when they are loaded and free again.
	 * `signal`, the job's abort: it stops waiting for them at once and gives their threads back, and a load in a
	 * process (an account's uploaded synthesizer) that no other job waits for is ended with it (`ModelCache.acquire`).
	 */
	const loadOnIdleThreads = async (paths: ModelPaths, signal: AbortSignal): Promise<void> => {
		const loads: Promise<void>[] = [];
		for (;;) {
			const slot = caches?.tryAcquire((cache) => !cache.holdsSynthesizer(paths.synthesizer));
			if (slot === undefined) break;
			loads.push(
				slot.item
					.acquire(paths, { signal })
					.then(({ release }) => release())
					.catch(() => undefined)
					.finally(slot.release),
			);
		}
		await Promise.all(loads);
	};

	/** Loads the voice's models on one model thread and runs each once (the runner's start-up self-test). */
	const warmUp = async (cache: ModelCache, paths: ModelPaths, plan: ChunkPlan, params: RvcParams): Promise<void> => {
		const { models, release } = await cache.acquire(paths);
		try {
			// Every session runs once. Where window lengths are bucketed (CUDA), once on every length a window
			// can have, so cuDNN's algorithm search for each happens now rather than during jobs (measured on an
			// H100: about 3 s for a new length); elsewhere one second of audio with its context is enough.
			const longest = plan.targetSamples + plan.searchSamples + 2 * plan.contextSamples + plan.hop;
			const lengths =
				plan.windowMultiple > plan.hop
					? Array.from({ length: Math.ceil(longest / plan.windowMultiple) }, (_, i) => (i + 1) * plan.windowMultiple)
					: [RMVPE_SAMPLE_RATE + 2 * plan.contextSamples];
			for (const length of lengths) {
				const window: ChunkWindow = {
					index: 0,
					segmentStart: 0,
					segmentEnd: length,
					windowStart: 0,
					windowEnd: length,
					samples: new NormalNoise(1).fill(length, 0.01),
					final: true,
				};
				await convertWindow(window, models, undefined, params, {
					semitones: 0,
					mel,
					noise: new NormalNoise(1),
					onChunk: undefined,
					spans: false,
					decodePieces: 1,
				});
			}
		} finally {
			release();
		}
	};

	return {
		name: "rvc",

		async init(): Promise<EngineInfo> {
			try {
				selection = await selectExecutionProvider(order);
			} catch (error) {
				if (error instanceof NoExecutionProviderError) {
					throw new RvcEngineError("no_execution_provider", `rvc engine cannot run here: ${error.message}`, {
						cause: error,
					});
				}
				throw error;
			}
			// On the CPU one model thread per job, up to one per core (or `modelThreads`): two jobs each on one core
			// of two convert more than both taking turns on two cores (intra-op threads do not scale linearly). A GPU
			// provider runs one kernel stream per device anyway: one thread, shared by the jobs.
			const capacity = Math.max(1, options.capacity ?? 1);
			const cpu = selection.provider === "cpu";
			const threads = cpu ? Math.max(1, Math.min(capacity, options.modelThreads ?? availableParallelism())) : 1;
			// One model thread keeps onnxruntime's own default (one thread per physical core).
			const intraOpNumThreads =
				options.intraOpNumThreads ??
				(threads > 1 ? Math.max(1, Math.floor(availableParallelism() / threads)) : undefined);
			// The decoder's narrow layers use one thread per row of pieces (`decode-pieces.ts`): one piece per thread.
			const pieces = options.decodePieces ?? intraOpNumThreads ?? availableParallelism();
			decodePieces = cpu && Number.isFinite(pieces) ? Math.max(1, Math.floor(pieces)) : 1;
			lendThreads = cpu && threads > 1 && (options.lendIdleThreads ?? true);
			const settings = {
				provider: selection.provider,
				...(intraOpNumThreads !== undefined ? { intraOpNumThreads } : {}),
				contentvecInt8: options.contentvecInt8 ?? false,
				featureArenas: options.featureArenas ?? threads > 1,
			};
			// With several model threads, ContentVec and RMVPE are loaded once, on a thread of their own that the
			// jobs share, and each model thread holds only its job's synthesizer: the feature models are most of
			// the weights (700 of 810 MB full-size), the synthesizer most of the time. Their runs take turns on
			// all the cores the model threads divide among them (measured, 8 jobs at capacity 2 on 2 cores: 2.41
			// audio s per wall s, slowest job 1.69x alone, peak RSS 1793 MiB, against 2.30, 1.76x and 2622 MiB
			// with a copy per thread; on one core each, the jobs waited on each other's turns: 1.98 and 2.19x).
			// Shared, they keep arenas by default (`featureArenas`): the jobs queue for their runs, so those runs'
			// speed is every job's, and their arenas are paid once (README, "Several jobs").
			features =
				threads > 1
					? new ModelCache(
							{ ...settings, intraOpNumThreads: (intraOpNumThreads ?? 1) * threads },
							options.maxCachedModels ?? 6,
						)
					: undefined;
			cachedVoices = Math.max(1, Math.floor(options.cachedVoices ?? (cpu ? 1 : 4)));
			const uploadedLimits = { ...UPLOADED_SYNTHESIZER_LIMITS, ...options.uploadedSynthesizerLimits };
			caches = new SlotPool(
				Array.from(
					{ length: threads },
					() =>
						new ModelCache(settings, options.maxCachedModels ?? 6, {
							maxSynthesizers: cachedVoices,
							newIsolatedHost: () => uploadedSynthesizerHost(uploadedLimits),
							...(features !== undefined ? { features } : {}),
						}),
				),
				cpu ? 1 : capacity,
			);
			cachedIndexes = Math.max(1, Math.floor(options.maxCachedIndexes ?? 16));
			cachedIndexBytes = Math.max(1, options.maxCachedIndexBytes ?? DEFAULT_INDEX_CACHE_BYTES[cpu ? "cpu" : "gpu"]);
			indexes = new IndexCache(
				{ count: cachedIndexes, bytes: cachedIndexBytes },
				options.intraOpNumThreads !== undefined ? { intraOpNumThreads: options.intraOpNumThreads } : {},
			);
			return {
				name: "rvc",
				executionProvider: selection.provider,
				details: {
					attempts: selection.attempts,
					artifacts: RVC_ARTIFACTS,
					model_threads: threads,
					shared_feature_models: features !== undefined,
					intra_op_threads: intraOpNumThreads ?? "provider default",
					feature_arenas: settings.featureArenas,
					decode_pieces: decodePieces,
					lend_idle_threads: lendThreads,
					cached_voices: cachedVoices,
					cached_indexes: cachedIndexes,
					cached_index_bytes: cachedIndexBytes,
					uploaded_synthesizer_limits: uploadedLimits,
				},
			};
		},

		inputFormat(): PcmFormat {
			return INPUT_FORMAT;
		},

		outputFormat(_source: PcmFormat, voice: VoiceDescriptor): PcmFormat {
			return {
				sampleRate: parseRvcParams(voice.params).sampleRate,
				channels: 1,
			};
		},

		transposeSemitones(voice: VoiceDescriptor): number {
			return parseRvcParams(voice.params).transposeSemitones;
		},

		async prepare(voice: VoiceDescriptor, artifactPaths: ReadonlyMap<string, string>): Promise<void> {
			if (caches === undefined)
				throw new RvcEngineError("not_ready", "rvc engine used before init() or after dispose()");
			const params = voiceParams(voice, undefined);
			const plan = chunkPlan(params);
			const paths = await modelFiles({ voice, artifactPaths }, params);
			// Every model thread, one after the other (loading stacks each model's file and session in memory).
			for (const cache of caches.items) await warmUp(cache, paths, plan, params);
			// The feature index too, when jobs with the voice's own settings use it: read onto its thread now (a
			// large one takes seconds), kept by the index cache for the first job.
			const indexPath = artifactPaths.get("index");
			if (indexPath !== undefined && params.indexRate > 0 && indexes !== undefined) {
				(await indexes.acquire(indexPath)).release();
			}
		},

		async *convert(input: AsyncIterable<AudioBlock>, job: EngineJob, signal: AbortSignal): AsyncIterable<AudioBlock> {
			if (caches === undefined || indexes === undefined)
				throw new RvcEngineError("not_ready", "rvc engine used before init() or after dispose()");
			const params = voiceParams(job.voice, job.voiceSettings);
			const indexPath = job.artifactPaths.get("index");
			if (
				indexPath === undefined &&
				job.voiceSettings?.index_rate !== undefined &&
				job.voiceSettings.index_rate !== 0
			) {
				throw new PermanentJobError(
					"internal",
					`invalid voice_settings for rvc voice ${job.voice.id}: voice_settings.index_rate needs a voice with a feature index, and this one has none`,
				);
			}
			if (job.input.sampleRate !== RMVPE_SAMPLE_RATE || job.input.channels !== 1) {
				throw new RvcEngineError(
					"invalid_input",
					`rvc engine takes 16000 Hz mono input, the job says ${job.input.sampleRate} Hz x ${job.input.channels}`,
				);
			}
			const plan = chunkPlan(params);
			// A transient job (a voice's validation) keeps nothing it loads and evicts nothing for it.
			const transient = job.transient === true;
			const { models, paths, release } = await acquireModels(job, params, transient, signal);
			let releaseIndex = (): void => {};
			try {
				if (models.synthesizer.takesPitch && params.f0Method === "rmvpe" && models.rmvpe === undefined) {
					throw missingArtifacts(
						job,
						["rmvpe"],
						'its synthesizer takes pitch and f0_method is "rmvpe"; add the rmvpe ONNX file or use f0_method "yin"',
					);
				}
				const shifter = await keyShifterFor(
					models.synthesizer,
					job.semitones + params.transposeSemitones,
					params.sampleRate,
				);
				let retrieval: IndexThread | undefined;
				if (indexPath !== undefined && params.indexRate > 0) {
					const width = models.synthesizer.declaredFeatureDim ?? models.contentvec.declaredFeatureDim;
					const refuseWidth = (dim: number) =>
						new RvcEngineError(
							"invalid_index",
							`feature index ${indexPath} holds ${dim}-wide vectors but the voice's models use ${width}-wide features (v1 voices 256, v2 768)`,
						);
					// From the file's header first, before it is read onto its thread (its lists may take seconds). A cached
					// file damaged there is removed to be downloaded again, not refused for good.
					const stated = width === undefined ? undefined : await readFaissIndexWidth(indexPath);
					if (stated !== undefined && stated !== width) {
						await removeIfDamaged(indexPath, "feature index");
						throw refuseWidth(stated);
					}
					const loaded = await indexes.acquire(indexPath, { transient, signal });
					releaseIndex = loaded.release;
					if (width !== undefined && width !== loaded.index.facts.dim) throw refuseWidth(loaded.index.facts.dim);
					retrieval = loaded.index;
				}
				// A job of more than one window, where idle threads hold another voice: its synthesizer is loaded there
				// now, beside its first window's features, so the windows can be lent those threads (each waits for
				// that load first). Only where the source's length is known, and not for a transient job.
				const longer = (job.inputFrames ?? 0) > params.chunkSeconds * RMVPE_SAMPLE_RATE;
				const preloaded = lendThreads && longer && !transient ? loadOnIdleThreads(paths, signal) : undefined;
				const lend = async (synthesizerPath: string): Promise<LentSynthesizer[]> => {
					await preloaded;
					return lendIdleThreads(synthesizerPath);
				};
				const noise = new NormalNoise(options.noiseSeed ?? randomInt(2 ** 31));
				const convert = (window: ChunkWindow): Promise<Float32Array> =>
					convertWindow(window, models, retrieval, params, {
						semitones: job.semitones,
						mel,
						noise,
						onChunk: options.onChunk,
						spans: selection?.provider !== "cuda",
						decodePieces,
						...(lendThreads ? { lendThreads: lend } : {}),
						signal,
					});
				// rms_mix_rate over the whole stream, as RVC mixes its whole output (only the frames it needs are held).
				const loudness = new StreamingLoudnessMix({
					sourceRate: RMVPE_SAMPLE_RATE,
					outputRate: params.sampleRate,
					rate: params.rmsMixRate,
					...(job.inputFrames !== undefined ? { expectedSourceLength: job.inputFrames } : {}),
				});
				const source = monoSamples(input, (samples) => loudness.addSource(samples));
				const out = (samples: Float32Array): AudioBlock[] =>
					(shifter === undefined ? [[samples]] : [...shifter.push([samples])])
						.filter(([channel]) => channel !== undefined && channel.length > 0)
						.map((channels) => ({ sampleRate: params.sampleRate, channels }));
				for await (const samples of convertInChunks(source, plan, convert, signal)) {
					yield* out(loudness.mix(samples));
				}
				yield* out(loudness.end());
				for (const channels of shifter?.flush() ?? []) yield { sampleRate: params.sampleRate, channels };
			} catch (error) {
				// The voice's fault: its failure names the voice as well as the model file.
				if (error instanceof RvcEngineError && error.code === "model_limit_exceeded")
					throw new RvcEngineError(error.code, `rvc voice ${job.voice.id}: ${error.message}`, { cause: error });
				throw error;
			} finally {
				releaseIndex();
				release();
			}
		},

		async forget(artifactPaths: readonly string[]): Promise<void> {
			// A checkpoint's sessions were loaded from the ONNX file built beside it.
			const loaded = artifactPaths.flatMap((path) => [path, builtFrom.get(path) ?? path]);
			for (const path of artifactPaths) builtFrom.delete(path);
			const models = [...(caches?.items ?? []), ...(features !== undefined ? [features] : [])];
			await Promise.all(
				[...new Set(loaded)].flatMap((path) => [
					...models.map((cache) => cache.forget(path)),
					indexes?.forget(path) ?? Promise.resolve(),
				]),
			);
		},

		async dispose(): Promise<void> {
			const current = caches?.items ?? [];
			const currentFeatures = features;
			const currentIndexes = indexes;
			caches = undefined;
			features = undefined;
			indexes = undefined;
			await Promise.all([...current.map((cache) => cache.dispose()), currentIndexes?.clear()]);
			await currentFeatures?.dispose();
		},
	};
}
