/**
 * `inspectModelFile` on an uploaded ONNX model: the graph is the uploader's, so loading it and running its probe
 * happen in a child process with a time limit, and the runner's event loop (its heartbeats, its other jobs) keeps
 * running meanwhile; an index is checked in one pass over the file, never held whole.
 */
import { truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { inspectModelFile } from "../../src/engines/rvc/model-inspection.ts";
import { scratchDir } from "../helpers/scratch.ts";

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
		// loop-3m.onnx (make-hostile-onnx.py) counts to 3 000 000 in a Loop: about 3 s of onnxruntime.
		const { result, ticks, ms } = await ticksDuring(() =>
			inspectModelFile(join(FIXTURES, "hostile/loop-3m.onnx"), { onnxSeconds: 1 }),
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
		const { result, ticks, ms } = await ticksDuring(() => inspectModelFile(join(FIXTURES, "hostile/loop-3m.onnx")));
		expect(result).toMatchObject({ kind: "onnx", role: "synthesizer", f0: 0, feature_dim: 768, sample_rate: 40_000 });
		expect(result.refused).toBeUndefined();
		expect(ticks).toBeGreaterThan(ms / 50 / 2);
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
