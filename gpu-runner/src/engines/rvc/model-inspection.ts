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
import {
	COST_FRAMES,
	type CostPoint,
	costVerdict,
	MEASURING_SESSION,
	measureCost,
	referenceSynthesizer,
	synthesizerFeeds,
} from "./onnx-cost.ts";
import { graphRefusal } from "./onnx-graph-rules.ts";
import { childEnv } from "./parent-watchdog.ts";
import { type RvcCheckpoint, RvcCheckpointError, readRvcCheckpoint } from "./rvc-checkpoint.ts";
import { longestSynthesizerFrames } from "./windows.ts";

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

/** A message from the inspection child: its progress before the facts, so a kill can say what was running. */
export type InspectionMessage = { stage: "cost" } | { facts: Record<string, unknown> };

/**
 * What `inspectOnnx` learns of an ONNX model; run in a child process by `inspectModelFile` (see below). A synthesizer
 * whose 4-frame probe runs is then run at `COST_FRAMES` (`onnx-cost.ts`), its costs in `facts.cost`; `onStage`
 * hears when that begins.
 */
export async function inspectOnnx(
	bytes: Uint8Array,
	onStage: (stage: "cost") => void = () => {},
): Promise<Record<string, unknown>> {
	// A synthesizer's graph is read against `onnx-graph-rules.ts` before onnxruntime loads (and so runs) any of it.
	const refusedGraph = graphRefusal(bytes);
	if (refusedGraph !== undefined) return refusedGraph;
	let session: ort.InferenceSession;
	try {
		session = await ort.InferenceSession.create(bytes, MEASURING_SESSION);
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
				const shape = { featureDim, noiseChannels, f0 };
				const frames = PROBE_FRAMES;
				try {
					const result = await session.run(synthesizerFeeds(shape, frames));
					const audio = result[session.outputNames[0] as string];
					// 100 frames per second: samples per frame x 100 is the output rate.
					if (audio !== undefined) facts.sample_rate = (audio.size / frames) * 100;
				} catch (error) {
					facts.sample_rate = null;
					facts.probe_error = error instanceof Error ? error.message.split("\n")[0] : String(error);
				}
				if (typeof facts.sample_rate === "number") {
					onStage("cost");
					try {
						facts.cost = await measureCost(session, shape);
					} catch (error) {
						const reason = error instanceof Error ? (error.message.split("\n")[0] ?? "") : String(error);
						facts.refused = {
							problem: "invalid_model",
							message: `the synthesizer failed on ${COST_FRAMES.join(" or ")} frames: ${reason}`,
						};
					}
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

/**
 * The reference for `inspectOnnx`'s costs, in a child process of its own: the engine's graph of RVC's published
 * config with this width and pitch input (`referenceSynthesizer`), probed and measured as a candidate is.
 */
export async function measureReference(featureDim: number, f0: boolean): Promise<CostPoint[]> {
	const session = await ort.InferenceSession.create(referenceSynthesizer({ featureDim, f0 }), MEASURING_SESSION);
	try {
		const noiseChannels = session.inputMetadata.find(
			(m) => m.name === "rnd",
		) as ort.InferenceSession.TensorValueMetadata;
		const shape = { featureDim, f0, noiseChannels: noiseChannels.shape[1] as number };
		await session.run(synthesizerFeeds(shape, PROBE_FRAMES));
		return await measureCost(session, shape);
	} finally {
		await session.release();
	}
}

/**
 * How long loading an ONNX model and its probe runs may take: a published RVC export takes about a second to load
 * and run 4 frames, and 10 to 20 s of one thread for `COST_FRAMES` (rvc README).
 */
export const ONNX_INSPECTION_SECONDS = 60;

/**
 * `onnx-inspection-process.ts` with `args`, killed after `seconds`: the graph is the uploader's, and onnxruntime runs
 * it on the thread that calls it, so a model that computes for ever (or allocates what the machine lacks) would stop
 * the runner's event loop, heartbeats and jobs with it. A model that does not finish in time, or whose process dies,
 * is refused; a process that cannot be started is the runner's trouble.
 */
function inspectionChild(args: string[], seconds: number, what: string): Promise<Record<string, unknown>> {
	const child = fork(new URL("./onnx-inspection-process.ts", import.meta.url), args, {
		stdio: ["ignore", "ignore", "pipe", "ipc"],
		serialization: "advanced",
		// Every block of 128 KiB or more is mapped and unmapped by itself (glibc otherwise raises this threshold as
		// blocks are freed and keeps them), so the resident memory a run leaves is what it holds: `measureCost`.
		// The runner's id, for the child's watchdog (`parent-watchdog.ts`).
		env: childEnv({ ...process.env, MALLOC_MMAP_THRESHOLD_: String(128 * 1024) }),
	});
	let stderr = "";
	child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
		if (stderr.length < 4000) stderr += chunk;
	});
	return new Promise((resolve, reject) => {
		let facts: Record<string, unknown> | undefined;
		let stage: "probe" | "cost" = "probe";
		let timedOut = false;
		const timer = setTimeout(() => {
			timedOut = true;
			child.kill("SIGKILL");
		}, seconds * 1000);
		child.on("message", (message: InspectionMessage) => {
			if ("facts" in message) facts = message.facts;
			else stage = message.stage;
		});
		child.on("error", (error) => {
			clearTimeout(timer);
			reject(error);
		});
		child.on("exit", (code, signal) => {
			clearTimeout(timer);
			if (facts !== undefined) return resolve(facts);
			const cost = stage === "cost";
			const message = timedOut
				? cost
					? `the ${what} did not run ${COST_FRAMES.join(" and ")} frames within ${seconds} s (RVC's synthesizer: a few seconds)`
					: `the ONNX model did not load and run ${PROBE_FRAMES} frames within ${seconds} s`
				: `the ${what}'s ${cost ? `run of ${COST_FRAMES.join(" and ")} frames` : "probe"} stopped (${signal ?? `exit code ${code}`})${stderr ? `: ${stderr.trim().split("\n").at(-1)}` : ""}`;
			resolve({ refused: { problem: cost ? "too_large" : "invalid_model", message } });
		});
	});
}

/** References measured in this process, by shape: the engine's graph costs the same until the machine changes. */
const references = new Map<string, Promise<CostPoint[]>>();

function referenceCost(featureDim: number, f0: boolean, seconds: number): Promise<CostPoint[]> {
	const key = `${featureDim}/${f0 ? 1 : 0}`;
	let measured = references.get(key);
	if (measured === undefined) {
		measured = inspectionChild(["--reference", String(featureDim), f0 ? "1" : "0"], seconds, "reference").then(
			(facts) => {
				if (!Array.isArray(facts.cost))
					throw new Error(`the reference synthesizer could not be measured: ${JSON.stringify(facts.refused)}`);
				return facts.cost as CostPoint[];
			},
		);
		references.set(key, measured);
		measured.catch(() => references.delete(key));
	}
	return measured;
}

/**
 * `inspectOnnx` in a child process (`inspectionChild`); a synthesizer's costs are then weighed against the
 * reference's at the engine's longest windows (`costVerdict`), and one that grows too fast is refused.
 */
async function inspectOnnxApart(path: string, seconds: number): Promise<Record<string, unknown>> {
	const facts = await inspectionChild([path], seconds, "ONNX synthesizer");
	const cost = facts.cost as CostPoint[] | undefined;
	if (cost === undefined || facts.refused !== undefined || typeof facts.feature_dim !== "number") return facts;
	const reference = await referenceCost(facts.feature_dim, facts.f0 === 1, ONNX_INSPECTION_SECONDS);
	const verdict = costVerdict(cost, reference, {
		CPU: longestSynthesizerFrames("cpu"),
		CUDA: longestSynthesizerFrames("cuda"),
	});
	const { cost: _points, ...rest } = facts;
	return {
		...rest,
		cost_vs_reference: verdict.ratios,
		...(verdict.refused !== undefined ? { refused: verdict.refused } : {}),
	};
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
