/**
 * What an uploaded ONNX synthesizer costs at the longest window the engine can give it, weighed against the engine's
 * own synthesizer on the same machine, before any runner runs it (`model-inspection.ts`).
 *
 * The graph rules (`onnx-graph-rules.ts`) refuse loops and branches, but a graph of standard operators can still
 * cost more than its input grows: a product of (10 x frames)^2 matrices, or an `Expand` to frames^2 x 320 floats,
 * is nothing on the probe's 4 frames and hours or hundreds of GB on a conversion's window, which runs on the
 * runner's model thread and cannot be stopped (onnxruntime-node's `run` holds the calling thread until it returns,
 * and its binding does not read `RunOptions.terminate`). Genuine synthesizers are not linear either: the text
 * encoder's attention is quadratic in frames. So the graph is measured where it is cheap to, and its cost carried
 * out to the longest window:
 * - the inspection child runs the candidate at `COST_FRAMES` (125 and 500 frames) on one thread with onnxruntime's
 *   memory arena off, taking each run's CPU seconds and the rise of the process's peak resident memory;
 * - a second child does the same with the engine's graph of RVC's published 40 kHz config, random weights, of the
 *   same feature width and pitch input (`referenceSynthesizer`): measured on the same machine (once per runner
 *   process and shape), so a slow CPU slows both;
 * - each measure is carried out as a x frames + b x frames^2 from the two points (`costAt`), for both graphs, and
 *   evaluated at the engine's longest windows (`longestSynthesizerFrames` in `windows.ts`: 6 998 frames on the
 *   CPU, 18 400 on CUDA); the candidate is refused (`too_large`) where it exceeds `COST_LIMITS` times the reference.
 * A model whose cost runs exceed the child's time limit, or fail, is refused too. Figures are in the rvc README.
 */
import { readFileSync, writeFileSync } from "node:fs";
import "./onnxruntime-telemetry-off.ts";
import * as ort from "onnxruntime-node";
import { NormalNoise } from "./random.ts";
import { PUBLISHED_CONFIG_40K, parseSynthesizerConfig, synthesizerTensors } from "./synthesizer-config.ts";
import { buildSynthesizerGraph } from "./synthesizer-graph.ts";

export interface SynthesizerShape {
	featureDim: number;
	noiseChannels: number;
	f0: boolean;
}

/** The frame counts a synthesizer's cost is measured at (1.25 s and 5 s of audio). */
export const COST_FRAMES = [125, 500] as const;

/** How many times the reference's cost, carried out to a longest window, a candidate may cost there. */
export const COST_LIMITS = { cpuSeconds: 4, peakBytes: 8 } as const;

/**
 * Sessions that measure: one thread (CPU seconds are the work, not the spinning of idle pool threads on a busy
 * machine) and no memory arena (peak memory is the tensors' own, not the arena's doubling steps).
 */
export const MEASURING_SESSION: ort.InferenceSession.SessionOptions = {
	intraOpNumThreads: 1,
	interOpNumThreads: 1,
	enableCpuMemArena: false,
};

/** Inputs of `frames` frames: silent features, a steady 200 Hz pitch, no noise. */
export function synthesizerFeeds(shape: SynthesizerShape, frames: number): Record<string, ort.Tensor> {
	const feeds: Record<string, ort.Tensor> = {
		phone: new ort.Tensor("float32", new Float32Array(frames * shape.featureDim), [1, frames, shape.featureDim]),
		phone_lengths: new ort.Tensor("int64", BigInt64Array.of(BigInt(frames)), [1]),
		ds: new ort.Tensor("int64", BigInt64Array.of(0n), [1]),
		rnd: new ort.Tensor("float32", new Float32Array(frames * shape.noiseChannels), [1, shape.noiseChannels, frames]),
	};
	if (shape.f0) {
		feeds.pitch = new ort.Tensor("int64", new BigInt64Array(frames).fill(100n), [1, frames]);
		feeds.pitchf = new ort.Tensor("float32", new Float32Array(frames).fill(200), [1, frames]);
	}
	return feeds;
}

/** The engine's own graph of RVC's published 40 kHz config with `shape`'s width and pitch input, random weights. */
export function referenceSynthesizer(shape: Pick<SynthesizerShape, "featureDim" | "f0">): Uint8Array {
	const config = parseSynthesizerConfig(PUBLISHED_CONFIG_40K);
	const noise = new NormalNoise(1);
	const weights = new Map<string, { dims: number[]; data: Float32Array }>();
	for (const [name, spec] of synthesizerTensors(config, shape.featureDim, shape.f0)) {
		const dims = spec.dims.map((d) => (d === -1 ? 1 : d));
		const size = dims.reduce((a, b) => a * b, 1);
		const fanIn = dims.length >= 2 ? size / (dims[0] as number) : 1;
		const data = name.endsWith("gamma")
			? new Float32Array(size).fill(1)
			: noise.fill(size, dims.length >= 2 ? 1 / Math.sqrt(fanIn) : 0.1);
		weights.set(name, { dims, data });
	}
	return buildSynthesizerGraph({ config, featureDim: shape.featureDim, f0: shape.f0, weights }).bytes;
}

export interface CostPoint {
	frames: number;
	/** CPU seconds of the run (user + system). */
	cpuSeconds: number;
	/** How far the process's peak resident memory rose over this run and the ones before it, in bytes. */
	peakBytes: number;
}

/**
 * Where a run's memory is measured from: on Linux the resident memory now, with the peak (`VmHWM` of
 * /proc/self/status) reset by writing 5 to /proc/self/clear_refs, as loading a large graph peaks higher than a short
 * run does; elsewhere the process's peak so far (`maxRSS`, which only a run that goes past it moves).
 */
function memoryMark(): { start: number; peak: () => number } {
	try {
		writeFileSync("/proc/self/clear_refs", "5");
		const kib = (field: string) => {
			const value = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync("/proc/self/status", "latin1"))?.[1];
			if (value === undefined) throw new Error(`no ${field} in /proc/self/status`);
			return Number(value) * 1024;
		};
		return { start: kib("VmRSS"), peak: () => kib("VmHWM") };
	} catch {
		const maxRss = () => process.resourceUsage().maxRSS * 1024;
		return { start: maxRss(), peak: maxRss };
	}
}

/**
 * Runs `session` (made with `MEASURING_SESSION`) at each of `COST_FRAMES` in turn: what each run cost, its memory
 * as how far the process's resident memory rose above where it began (`memoryMark`).
 */
export async function measureCost(session: ort.InferenceSession, shape: SynthesizerShape): Promise<CostPoint[]> {
	const points: CostPoint[] = [];
	for (const frames of COST_FRAMES) {
		const feeds = synthesizerFeeds(shape, frames);
		const memory = memoryMark();
		const before = process.cpuUsage();
		await session.run(feeds);
		const used = process.cpuUsage(before);
		points.push({
			frames,
			cpuSeconds: (used.user + used.system) / 1e6,
			peakBytes: Math.max(0, memory.peak() - memory.start),
		});
	}
	return points;
}

type Measure = "cpuSeconds" | "peakBytes";

/**
 * How much of a rise in CPU seconds per frame, from the shorter run to the longer, is taken as noise: a busy
 * machine's runs of RVC's synthesizer vary by 10-20 %, and carried out 37 times further, a fifth more per frame
 * over 375 frames is a quadratic term of 5 times the linear cost. Memory repeats within a few MB and is taken as is.
 */
export const CPU_SECONDS_NOISE = 1.5;

/**
 * `measure` at `frames`, from two runs: the longer run's cost per frame, times `frames`, plus a quadratic term from
 * the rise in cost per frame between the runs (beyond `CPU_SECONDS_NOISE` times the shorter's, for time): a x f +
 * b x f^2 through both points where that rise is all counted, linear from the longer run where there is none.
 */
export function costAt(points: readonly CostPoint[], measure: Measure, frames: number): number {
	const first = points[0] as CostPoint;
	const last = points.at(-1) as CostPoint;
	const perFrame1 = first[measure] / first.frames;
	const perFrame2 = last[measure] / last.frames;
	const noise = measure === "cpuSeconds" ? CPU_SECONDS_NOISE : 1;
	const b = Math.max(0, perFrame2 - noise * perFrame1) / (last.frames - first.frames);
	return frames * (perFrame2 + b * (frames - last.frames));
}

const describe = (measure: Measure, value: number): string =>
	measure === "cpuSeconds" ? `${Math.round(value)} CPU s` : `${(value / 2 ** 30).toFixed(1)} GB`;

/**
 * Why the candidate costs too much at one of `windows` (frames), against the reference measured the same way, or
 * undefined; with the ratios found, for the inspection's facts. Where several measures or windows are past their
 * limits, the message names the one furthest past its own: the graph's cause, not whichever a busy machine's
 * timing happened to tip over too.
 */
export function costVerdict(
	candidate: readonly CostPoint[],
	reference: readonly CostPoint[],
	windows: Readonly<Record<string, number>>,
): { ratios: Record<string, number>; refused?: { problem: string; message: string } } {
	const ratios: Record<string, number> = {};
	let worst: { measure: Measure; where: string; frames: number; own: number; ratio: number } | undefined;
	for (const measure of ["cpuSeconds", "peakBytes"] as const) {
		for (const [where, frames] of Object.entries(windows)) {
			const own = costAt(candidate, measure, frames);
			// A floor of a tenth of a second or 16 MB a window keeps rounding on a near-empty reference harmless.
			const allowed = Math.max(costAt(reference, measure, frames), measure === "cpuSeconds" ? 0.1 : 2 ** 24);
			const ratio = own / allowed;
			ratios[`${measure}_${where}`] = Math.round(ratio * 100) / 100;
			const excess = ratio / COST_LIMITS[measure];
			if (excess > 1 && (worst === undefined || excess > worst.ratio / COST_LIMITS[worst.measure])) {
				worst = { measure, where, frames, own, ratio };
			}
		}
	}
	if (worst === undefined) return { ratios };
	const { measure, where, frames, own, ratio } = worst;
	const refused = {
		problem: "too_large",
		message:
			`the synthesizer's ${measure === "cpuSeconds" ? "run time" : "memory"} grows faster with the input than an RVC ` +
			`synthesizer's: carried out to the engine's longest ${where} window (${frames} frames) from runs of ` +
			`${candidate.map((p) => p.frames).join(" and ")} frames, it needs about ${describe(measure, own)}, ` +
			`${ratio.toFixed(1)} times RVC's published 40 kHz synthesizer (at most ${COST_LIMITS[measure]} times)`,
	};
	return refused === undefined ? { ratios } : { ratios, refused };
}
