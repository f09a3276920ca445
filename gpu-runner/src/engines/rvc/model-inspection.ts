/**
 * What an operator needs to know about a voice file before uploading it (`npm run rvc -- inspect FILE`):
 * the kind, recognised by its bytes, and for each kind the facts that decide how the engine runs it. Kinds:
 * - `rvc_checkpoint`: RVC's `.pth` (a torch zip), read by `rvc-checkpoint.ts`;
 * - `onnx`: any ONNX model; when it has RVC's synthesizer inputs, its sample rate is measured by running it on
 *   a few frames (an export does not record it);
 * - `faiss_index`: RVC's `.index` (faiss's binary format, fourcc first), read by `faiss-index.ts`.
 * A file that cannot be used gives `{ refused: {problem, message} }`.
 */
import { fork } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import "./onnxruntime-telemetry-off.ts";
import * as ort from "onnxruntime-node";
import { hasZipSignature } from "../../../../src/contracts/zip-directory.ts";
import { RvcEngineError } from "./errors.ts";
import { describeFaissIndexFile } from "./faiss-index.ts";
import { wOkadaExportProblem } from "./feature-model-layout.ts";
import { readFileBytes } from "./file-bytes.ts";
import { graphRefusal } from "./onnx-graph-rules.ts";
import { type RvcCheckpoint, RvcCheckpointError, readRvcCheckpoint } from "./rvc-checkpoint.ts";

export interface Inspection {
	file: string;
	kind: "rvc_checkpoint" | "onnx" | "faiss_index" | "unknown";
	bytes: number;
	sha256: string;
	[fact: string]: unknown;
	refused?: { problem: string; message: string };
}

/** The facts about a read checkpoint, in the names RVC's own config uses. */
export function describeCheckpoint(checkpoint: RvcCheckpoint): Record<string, unknown> {
	const c = checkpoint.config;
	return {
		version: checkpoint.version,
		f0: checkpoint.f0 ? 1 : 0,
		sample_rate: c.sampleRate,
		sr: checkpoint.sr ?? null,
		speakers: checkpoint.speakers,
		feature_dim: checkpoint.featureDim,
		dtype: checkpoint.dtype,
		parameters: checkpoint.parameters,
		info: checkpoint.info ?? null,
		...(Object.keys(checkpoint.training).length > 0 ? { training: checkpoint.training } : {}),
		synthesizer_inputs: checkpoint.f0
			? ["phone", "phone_lengths", "pitch", "pitchf", "ds", "rnd"]
			: ["phone", "phone_lengths", "ds", "rnd"],
		config: {
			spec_channels: c.specChannels,
			segment_size: c.segmentSize,
			inter_channels: c.interChannels,
			hidden_channels: c.hiddenChannels,
			filter_channels: c.filterChannels,
			n_heads: c.heads,
			n_layers: c.layers,
			kernel_size: c.kernelSize,
			p_dropout: c.dropout,
			resblock: c.resblock,
			resblock_kernel_sizes: c.resblockKernelSizes,
			resblock_dilation_sizes: c.resblockDilationSizes,
			upsample_rates: c.upsampleRates,
			upsample_initial_channel: c.upsampleInitialChannel,
			upsample_kernel_sizes: c.upsampleKernelSizes,
			spk_embed_dim: checkpoint.speakers,
			gin_channels: c.ginChannels,
			sampling_rate: c.sampleRate,
		},
	};
}

/** faiss index files start with a fourcc: `IwFl` (IVF flat), `IxF2` / `IxFI` (flat L2 / inner product), ... */
function looksLikeFaissIndex(bytes: Uint8Array): boolean {
	const fourcc = new TextDecoder().decode(bytes.subarray(0, 4));
	return /^I[A-Za-z0-9]{3}$/.test(fourcc);
}

async function inspectFeatureIndex(path: string): Promise<Record<string, unknown>> {
	try {
		const { kind, ...facts } = await describeFaissIndexFile(path);
		return { index_type: kind, ...facts };
	} catch (error) {
		if (!(error instanceof RvcEngineError)) throw error;
		return { refused: { problem: error.code, message: error.message } };
	}
}

const PROBE_FRAMES = 4;

/** What `inspectOnnx` learns of an ONNX model; run in a child process by `inspectModelFile` (see below). */
export async function inspectOnnx(bytes: Uint8Array): Promise<Record<string, unknown>> {
	// A synthesizer's graph is read against `onnx-graph-rules.ts` before onnxruntime loads (and so runs) any of it.
	const refusedGraph = graphRefusal(bytes);
	if (refusedGraph !== undefined) return refusedGraph;
	let session: ort.InferenceSession;
	try {
		session = await ort.InferenceSession.create(bytes);
	} catch (error) {
		const reason = error instanceof Error ? (error.message.split("\n")[0] ?? "") : String(error);
		return { refused: { problem: "invalid_model", message: `not a loadable ONNX model: ${reason}` } };
	}
	try {
		const describe = (list: readonly ort.InferenceSession.ValueMetadata[]) =>
			list.map((m) => (m.isTensor ? { name: m.name, type: m.type, shape: m.shape } : { name: m.name }));
		const facts: Record<string, unknown> = {
			inputs: describe(session.inputMetadata),
			outputs: describe(session.outputMetadata),
		};
		const input = (name: string) => session.inputMetadata.find((m) => m.name === name);
		const phone = input("phone");
		const rnd = input("rnd");
		if (phone?.isTensor && rnd?.isTensor && input("phone_lengths") && input("ds")) {
			const f0 = input("pitch") !== undefined && input("pitchf") !== undefined;
			const featureDim = phone.shape[2];
			const noiseChannels = rnd.shape[1];
			Object.assign(facts, {
				role: "synthesizer",
				f0: f0 ? 1 : 0,
				feature_dim: typeof featureDim === "number" ? featureDim : null,
				noise_channels: typeof noiseChannels === "number" ? noiseChannels : null,
			});
			if (typeof featureDim === "number" && typeof noiseChannels === "number") {
				const frames = PROBE_FRAMES;
				const feeds: Record<string, ort.Tensor> = {
					phone: new ort.Tensor("float32", new Float32Array(frames * featureDim), [1, frames, featureDim]),
					phone_lengths: new ort.Tensor("int64", BigInt64Array.of(BigInt(frames)), [1]),
					ds: new ort.Tensor("int64", BigInt64Array.of(0n), [1]),
					rnd: new ort.Tensor("float32", new Float32Array(frames * noiseChannels), [1, noiseChannels, frames]),
				};
				if (f0) {
					feeds.pitch = new ort.Tensor("int64", new BigInt64Array(frames).fill(100n), [1, frames]);
					feeds.pitchf = new ort.Tensor("float32", new Float32Array(frames).fill(200), [1, frames]);
				}
				try {
					const result = await session.run(feeds);
					const audio = result[session.outputNames[0] as string];
					// 100 frames per second: samples per frame x 100 is the output rate.
					if (audio !== undefined) facts.sample_rate = (audio.size / frames) * 100;
				} catch (error) {
					facts.sample_rate = null;
					facts.probe_error = error instanceof Error ? error.message.split("\n")[0] : String(error);
				}
			}
		} else {
			facts.role = "unknown";
			const wOkada = wOkadaExportProblem(session.inputNames);
			if (wOkada) facts.refused = { problem: "invalid_model", message: wOkada };
		}
		return facts;
	} finally {
		await session.release();
	}
}

/** How long loading an ONNX model and its probe run may take (a published RVC export: about a second). */
export const ONNX_INSPECTION_SECONDS = 60;

/**
 * `inspectOnnx` in a child process (`onnx-inspection-process.ts`), killed after `seconds`: the graph is the
 * uploader's, and onnxruntime runs it on the thread that calls it, so a model that computes for ever (or allocates
 * what the machine lacks) would stop the runner's event loop, heartbeats and jobs with it. A model that does not
 * finish in time, or whose process dies, is refused; a process that cannot be started is the runner's trouble.
 */
async function inspectOnnxApart(path: string, seconds: number): Promise<Record<string, unknown>> {
	const child = fork(new URL("./onnx-inspection-process.ts", import.meta.url), [path], {
		stdio: ["ignore", "ignore", "pipe", "ipc"],
		serialization: "advanced",
	});
	let stderr = "";
	child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
		if (stderr.length < 4000) stderr += chunk;
	});
	return new Promise((resolve, reject) => {
		let facts: Record<string, unknown> | undefined;
		let timedOut = false;
		const timer = setTimeout(() => {
			timedOut = true;
			child.kill("SIGKILL");
		}, seconds * 1000);
		child.on("message", (message) => {
			facts = message as Record<string, unknown>;
		});
		child.on("error", (error) => {
			clearTimeout(timer);
			reject(error);
		});
		child.on("exit", (code, signal) => {
			clearTimeout(timer);
			if (facts !== undefined) return resolve(facts);
			const message = timedOut
				? `the ONNX model did not load and run ${PROBE_FRAMES} frames within ${seconds} s`
				: `the ONNX model's probe stopped (${signal ?? `exit code ${code}`})${stderr ? `: ${stderr.trim().split("\n").at(-1)}` : ""}`;
			resolve({ refused: { problem: "invalid_model", message } });
		});
	});
}

/** The file's first bytes (enough to tell a zip, a faiss index and anything else apart) and its size. */
async function headOf(path: string): Promise<{ head: Uint8Array; size: number }> {
	const handle = await open(path, "r");
	try {
		const size = (await handle.stat()).size;
		const head = new Uint8Array(Math.min(size, 8));
		await handle.read(head, 0, head.length, 0);
		return { head, size };
	} finally {
		await handle.close();
	}
}

/** SHA-256 of a file read in 1 MiB pieces: its memory stays small, and the event loop runs between pieces. */
async function sha256OfFile(path: string): Promise<string> {
	const hash = createHash("sha256");
	for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
	return hash.digest("hex");
}

/**
 * What `path` is and holds. A checkpoint is read whole (its pickle and tensors are what is checked); an index is
 * checked in one pass over the file (`describeFaissIndexFile`) and an ONNX model in a child process, so that neither
 * is ever held whole here: an index may be 1 GB, which read at once cost as much memory and its hash held the event
 * loop for seconds.
 */
export async function inspectModelFile(path: string, options: { onnxSeconds?: number } = {}): Promise<Inspection> {
	const { head: first, size } = await headOf(path);
	if (hasZipSignature(first)) {
		const bytes = await readFileBytes(path);
		const head: Inspection = {
			file: path,
			kind: "rvc_checkpoint",
			bytes: bytes.length,
			sha256: createHash("sha256").update(bytes).digest("hex"),
		};
		try {
			return { ...head, ...describeCheckpoint(readRvcCheckpoint(bytes)) };
		} catch (error) {
			if (!(error instanceof RvcCheckpointError)) throw error;
			return { ...head, refused: { problem: error.problem, message: error.message } };
		}
	}
	const head: Inspection = { file: path, kind: "unknown", bytes: size, sha256: await sha256OfFile(path) };
	if (looksLikeFaissIndex(first)) return { ...head, kind: "faiss_index", ...(await inspectFeatureIndex(path)) };
	const onnx = await inspectOnnxApart(path, options.onnxSeconds ?? ONNX_INSPECTION_SECONDS);
	// An ONNX model that does not load is of no known kind; one that loads and is refused is still ONNX.
	return { ...head, kind: onnx.inputs === undefined ? "unknown" : "onnx", ...onnx };
}
