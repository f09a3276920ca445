/**
 * `inspectModelFile` on an uploaded ONNX model: the graph is the uploader's, so loading it and running its probe
 * happen in a child process with a time limit, and the runner's event loop (its heartbeats, its other jobs) keeps
 * running meanwhile.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { inspectModelFile } from "../../src/engines/rvc/model-inspection.ts";

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
