/**
 * `inspectModelFile` on an uploaded ONNX model: the graph is the uploader's, so loading it and running its probe
 * happen in a child process with a time limit, and the runner's event loop (its heartbeats, its other jobs) keeps
 * running meanwhile; an index is checked in one pass over the file, never held whole.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import { inspectModelFile } from "../../src/engines/rvc/model-inspection.ts";
import { COST_LIMITS } from "../../src/engines/rvc/onnx-cost.ts";
import { readOnnxGraph, synthesizerGraphProblem } from "../../src/engines/rvc/onnx-graph-rules.ts";
import { readRvcCheckpoint } from "../../src/engines/rvc/rvc-checkpoint.ts";
import { buildSynthesizerGraph } from "../../src/engines/rvc/synthesizer-graph.ts";
import { scratchDir } from "../helpers/scratch.ts";
import { childrenRunning, gone, peakMiB } from "./support/processes.ts";
import { buildTinyContentVec, buildTinyRmvpe, buildTinySynthesizer } from "./support/tiny-models.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");

/** Runs `work` while counting 50 ms timer ticks: how many the event loop served meanwhile. */
async function ticksDuring<T>(work: () => Promise<T>): Promise<{ result: T; ticks: number; ms: number }> {
	let ticks = 0;
	const timer = setInterval(() => ticks++, 50);
	const started = performance.now();
	try {
		const result = await work();
		return { result, ticks, ms: performance.now() - started };
	} finally {
		clearInterval(timer);
	}
}

describe("ONNX model inspection", () => {
	it("refuses a model whose probe run outlasts the limit, without holding the event loop", async () => {
		// slow-matmul.onnx (make-hostile-onnx.py): 200 products of 2000 x 2000 matrices, standard operators only, so
		// the graph rules let it through: tens of seconds of onnxruntime.
		const { result, ticks, ms } = await ticksDuring(() =>
			inspectModelFile(join(FIXTURES, "onnx/slow-matmul.onnx"), { onnxSeconds: 1 }),
		);
		expect(result.refused).toEqual({
			problem: "invalid_model",
			message: "the ONNX model did not load and run 4 frames within 1 s",
		});
		expect(ms).toBeLessThan(2500);
		// 50 ms ticks over at least a second: the loop was free for nearly all of them.
		expect(ticks).toBeGreaterThan(ms / 50 / 2);
	});

	it("reads a model that finishes in time, in its child process", async () => {
		// RVC's synthesizer as RVC's exporter writes it (export-onnx.py, Debian's PyTorch): 1 479 nodes.
		const { result, ticks, ms } = await ticksDuring(() =>
			inspectModelFile(join(FIXTURES, "onnx/rvc-export-v2-f0-40k.onnx")),
		);
		expect(result).toMatchObject({ kind: "onnx", role: "synthesizer", f0: 1, feature_dim: 768, sample_rate: 40_000 });
		expect(result.refused).toBeUndefined();
		expect(ticks).toBeGreaterThan(ms / 50 / 2);
	});
});

describe("ONNX synthesizer cost at the engine's longest windows", () => {
	const onnx = (name: string) => join(FIXTURES, "onnx", name);

	it("refuses graphs of standard operators whose cost grows faster than RVC's, in bounded time", async () => {
		// make-hostile-onnx.py: nothing on the probe's 4 frames. A product of (10 x frames)^2 matrices, and an Expand
		// to [frames, frames, 640] floats: carried out to 6 998 (CPU) and 18 400 (CUDA) frames, hours and hundreds of GB.
		for (const [name, measure] of [
			[
				"quadratic-matmul.onnx",
				/the synthesizer's (run time|memory) grows faster with the input than an RVC synthesizer's/,
			],
			["quadratic-expand.onnx", /the synthesizer's memory grows faster with the input than an RVC synthesizer's/],
		] as const) {
			const { result, ticks, ms } = await ticksDuring(() => inspectModelFile(onnx(name)));
			expect(result, name).toMatchObject({ kind: "onnx", role: "synthesizer", sample_rate: 40_000 });
			expect(result.refused?.problem, name).toBe("too_large");
			expect(result.refused?.message, name).toMatch(measure);
			expect(result.refused?.message, name).toMatch(/longest (CPU|CUDA) window \((6998|18400) frames\)/);
			expect(ms, name).toBeLessThan(60_000);
			expect(ticks, name).toBeGreaterThan(ms / 50 / 2);
		}
	});

	it("kills the child of a graph whose cost runs outlast the limit, and refuses it", async () => {
		// (40 x frames)^2 matrices: 4 frames in milliseconds, 125 in seconds, 500 in minutes.
		const { result, ms } = await ticksDuring(() =>
			inspectModelFile(onnx("quadratic-matmul-40.onnx"), { onnxSeconds: 8 }),
		);
		expect(result.refused).toEqual({
			problem: "too_large",
			message: "the ONNX synthesizer did not run 125 and 500 frames within 8 s (RVC's synthesizer: a few seconds)",
		});
		// Ended by the kill, not by the runs: those take minutes. Wide of 8 s, for a busy machine's start of the child.
		expect(ms).toBeLessThan(45_000);
	});

	it("passes RVC's own export, within a fraction of the limits", async () => {
		const result = await inspectModelFile(onnx("rvc-export-v2-f0-40k.onnx"));
		expect(result.refused).toBeUndefined();
		const ratios = result.cost_vs_reference as Record<string, number>;
		expect(Object.keys(ratios).sort()).toEqual([
			"cpuSeconds_CPU",
			"cpuSeconds_CUDA",
			"peakBytes_CPU",
			"peakBytes_CUDA",
		]);
		// Measured: at most 0.1 of the reference's time and 2.9 times its memory (the export's attention is wider).
		for (const [key, ratio] of Object.entries(ratios)) {
			expect(ratio, key).toBeLessThan(COST_LIMITS[key.startsWith("cpu") ? "cpuSeconds" : "peakBytes"] / 2);
		}
	});
});

/** Runs a synthesizer-shaped model straight in onnxruntime on `frames` frames (no pitch inputs): its output's size. */
async function runDirectly(path: string, frames: number): Promise<number> {
	const session = await ort.InferenceSession.create(readFileSync(path));
	try {
		const result = await session.run({
			phone: new ort.Tensor("float32", new Float32Array(frames * 768).fill(0.01), [1, frames, 768]),
			phone_lengths: new ort.Tensor("int64", BigInt64Array.of(BigInt(frames)), [1]),
			ds: new ort.Tensor("int64", BigInt64Array.of(0n), [1]),
			rnd: new ort.Tensor("float32", new Float32Array(frames * 192), [1, 192, frames]),
		});
		return result.audio?.size ?? 0;
	} finally {
		await session.release();
	}
}

describe("ONNX synthesizer graph rules", () => {
	const hostile = (name: string) => join(FIXTURES, "hostile", name);

	it("refuses control flow and non-standard operators by the graph, before onnxruntime loads it", async () => {
		// Each of these loads and runs in onnxruntime on the probe's 4 frames, quickly: the probe alone passed them.
		// loop-frames.onnx loops 1000 x frames^3 times: 64 000 here, 10^12 on a conversion's 1000-frame window.
		for (const name of ["loop-frames.onnx", "if-input.onnx", "contrib-op.onnx"]) {
			expect(await runDirectly(hostile(name), 4)).toBe(1600);
		}
		const refusals: [string, RegExp][] = [
			["loop-3m.onnx", /^the ONNX graph holds the control-flow operator "Loop": loops, branches and sequences/],
			["loop-frames.onnx", /^the ONNX graph holds the control-flow operator "Loop": /],
			["if-input.onnx", /^the ONNX graph holds the control-flow operator "If": /],
			[
				"contrib-op.onnx",
				/^the ONNX graph holds the operator "FastGelu" \(node "gelu"\) of domain "com.microsoft": only the standard ONNX operators \(domain ai.onnx\) run here/,
			],
			// onnxruntime would read its tensor from a file beside the model, the runner's artifact folder.
			["external-data.onnx", /^the ONNX model keeps tensor "secret" in an external file \("neighbour.bin"\): /],
		];
		for (const [name, message] of refusals) {
			const result = await inspectModelFile(hostile(name));
			expect(result, name).toMatchObject({ kind: "onnx", role: "synthesizer", refused: { problem: "invalid_model" } });
			expect(result.refused?.message, name).toMatch(message);
			expect(result.refused?.message, name).toMatch(/RVC's synthesizer exports hold none: export it as RVC does/);
			// Refused from its bytes: no probe ran, so no sample rate was measured.
			expect(result.sample_rate, name).toBeUndefined();
		}
	});

	it("lets RVC's exports, the graphs built from checkpoints and the test models through", () => {
		const genuine = readOnnxGraph(readFileSync(join(FIXTURES, "onnx/rvc-export-v2-f0-40k.onnx")));
		expect(genuine).toEqual({
			inputs: ["phone", "phone_lengths", "pitch", "pitchf", "ds", "rnd"],
			synthesizer: true,
		});
		const checkpoints = readdirSync(FIXTURES).filter((name) => /^v\d.*\.pth$/.test(name));
		expect(checkpoints.length).toBeGreaterThan(5);
		for (const name of checkpoints) {
			const { bytes } = buildSynthesizerGraph(readRvcCheckpoint(new Uint8Array(readFileSync(join(FIXTURES, name)))), {
				decodeSpan: true,
			});
			expect(synthesizerGraphProblem(bytes), name).toBeUndefined();
		}
		for (const model of [
			buildTinySynthesizer({ sampleRate: 40_000 }),
			buildTinyContentVec(),
			buildTinyRmvpe({ pitchBin: 100 }),
		]) {
			expect(synthesizerGraphProblem(model)).toBeUndefined();
		}
	});

	it("refuses a graph cut short or a varint that never ends as unreadable, not as a shorter graph", () => {
		const genuine = new Uint8Array(readFileSync(join(FIXTURES, "onnx/rvc-export-v2-f0-40k.onnx")));
		expect(synthesizerGraphProblem(genuine.subarray(0, genuine.length - 1000))).toBe(
			"not a readable ONNX model: a protobuf field runs past the end of its message",
		);
		expect(synthesizerGraphProblem(new Uint8Array(12).fill(0xff))).toBe(
			"not a readable ONNX model: a protobuf varint is longer than 10 bytes",
		);
	});
});

describe("feature index inspection", () => {
	it("checks a 512 MiB index without holding it in memory or holding the event loop", async () => {
		// A Flat L2 index of 174 762 zero vectors of 768 (a sparse file): fourcc, d, ntotal, two dummies, is_trained,
		// metric, then the size-prefixed floats.
		const ntotal = 174_762;
		const header = Buffer.alloc(4 + 4 + 8 + 8 + 8 + 1 + 4 + 8);
		header.write("IxF2", 0, "latin1");
		header.writeInt32LE(768, 4);
		header.writeBigInt64LE(BigInt(ntotal), 8);
		header.writeUInt8(1, 32);
		header.writeInt32LE(1, 33);
		header.writeBigInt64LE(BigInt(ntotal * 768), 37);
		const path = join(scratchDir("index-inspection"), "big.index");
		await writeFile(path, header);
		await truncate(path, header.length + ntotal * 768 * 4);

		const before = process.memoryUsage().rss;
		let peak = before;
		const sampler = setInterval(() => {
			peak = Math.max(peak, process.memoryUsage().rss);
		}, 5);
		let result: Awaited<ReturnType<typeof inspectModelFile>>;
		let ticks: number;
		let ms: number;
		try {
			({ result, ticks, ms } = await ticksDuring(() => inspectModelFile(path)));
		} finally {
			clearInterval(sampler);
		}
		expect(result).toMatchObject({
			kind: "faiss_index",
			bytes: header.length + ntotal * 768 * 4,
			index_type: "flat",
			dim: 768,
			ntotal,
		});
		expect(result.sha256).toMatch(/^[0-9a-f]{64}$/);
		// Before, the file was read whole (512 MiB more) and hashed in one call that held the loop.
		expect(peak - before).toBeLessThan(128 * 1024 * 1024);
		expect(ticks).toBeGreaterThan(ms / 50 / 2);
	});
});

describe("an inspection process whose runner dies hard", () => {
	/** The inspection process of parent `parent`, once it is there. */
	const inspectionOf = (parent: number): number | undefined => childrenRunning(parent, "onnx-inspection-process")[0];
	async function until(predicate: () => boolean, milliseconds: number): Promise<void> {
		const deadline = Date.now() + milliseconds;
		while (!predicate()) {
			if (Date.now() > deadline) throw new Error("timed out waiting");
			await new Promise((resolve) => setTimeout(resolve, 50));
		}
	}

	it("ends itself when its parent is killed while it loads an uploaded model", async () => {
		// A runner-like parent inspecting slow-load as an upload: hours of onnxruntime folding its convolution.
		const parent = spawn(
			process.execPath,
			[
				join(import.meta.dirname, "support", "runner-like-parent.ts"),
				"inspect",
				join(FIXTURES, "onnx", "slow-load.onnx"),
			],
			{ stdio: ["ignore", "ignore", "inherit"] },
		);
		let child: number | undefined;
		try {
			// In the load: its main thread inside onnxruntime, its time limit kept by the parent alone.
			await until(() => {
				child = inspectionOf(parent.pid as number);
				return child !== undefined && peakMiB(child) > 200;
			}, 60_000);
			const exited = new Promise((resolve) => parent.once("exit", resolve));
			parent.kill("SIGKILL");
			await exited;
			const orphan = child as number;
			await until(() => gone(orphan), 20_000);
		} finally {
			parent.kill("SIGKILL");
			if (child !== undefined && !gone(child)) process.kill(child, "SIGKILL");
		}
	});
});
