/**
 * Session options: a CPU arena that stops growing after its first run. In a file of its own, so that its process
 * has no WebGPU device set up by a provider selection (lavapipe's threads allocate beside the RSS it measures).
 */
import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import { sessionOptionsFor } from "../../src/engines/rvc/execution-provider.ts";
import { OnnxGraphBuilder } from "../../src/engines/rvc/onnx-writer.ts";

describe("session options", () => {
	it("keeps a CPU arena at its first run's size: no memory pattern is allocated beside it on later runs", async () => {
		// Twelve elementwise steps over 32 MiB tensors: about 100 MiB of activations, reused from the arena. The
		// output is one number, so that no output buffer waiting for garbage collection is counted.
		const g = new OnnxGraphBuilder();
		const x = g.input("x", "float32", ["rows", 1024]);
		let h = x;
		for (let i = 0; i < 12; i++) h = g.node(i % 2 ? "Sin" : "Tanh", [g.node("Add", [h, x])]);
		g.node("ReduceMean", [h], { keepdims: 0 }, ["y"]);
		g.output("y", "float32", []);
		const rows = 8192;
		const feeds = { x: new ort.Tensor("float32", new Float32Array(rows * 1024).fill(0.5), [rows, 1024]) };
		const options = sessionOptionsFor("cpu", { memoryArena: true, intraOpNumThreads: 1 });
		expect(options.enableCpuMemArena).toBe(true);
		const session = await ort.InferenceSession.create(g.toModel(), options);
		try {
			const before = process.memoryUsage.rss();
			await session.run(feeds);
			const afterFirst = process.memoryUsage.rss();
			for (let run = 0; run < 3; run++) await session.run(feeds);
			const afterMore = process.memoryUsage.rss();
			expect(afterFirst - before).toBeGreaterThan(64 * 2 ** 20);
			// With onnxruntime's memory pattern, the second run's planned block took a new arena region: +66 MiB.
			expect(afterMore - afterFirst).toBeLessThan(16 * 2 ** 20);
		} finally {
			await session.release();
		}
		expect(sessionOptionsFor("cpu").enableMemPattern).toBeUndefined();
		expect(sessionOptionsFor("cuda", { memoryArena: true }).enableMemPattern).toBeUndefined();
	});
});
