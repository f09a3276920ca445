/**
 * Provider selection: each candidate alone with a self-test; this machine has no GPU (WebGPU finds only Mesa's
 * lavapipe, which runs on the CPU), so it ends on the CPU. And
 * the session options: a CPU arena that stops growing after its first run.
 */
import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import { missingCudaLibrary, sessionOptionsFor } from "../../src/engines/rvc/execution-provider.ts";
import { createRvcEngine, RvcEngineError, selectExecutionProvider } from "../../src/engines/rvc/index.ts";
import { OnnxGraphBuilder } from "../../src/engines/rvc/onnx-writer.ts";

describe("execution provider selection", () => {
	it("tries CUDA, then WebGPU, then CPU, one at a time, and reports every attempt", async () => {
		const selection = await selectExecutionProvider();
		expect(selection.provider).toBe("cpu");
		// WebGPU finds Mesa's lavapipe here (.ci/run installs it), slower than the CPU (webgpu-provider.test.ts).
		expect(selection.attempts.map((a) => [a.provider, a.outcome])).toEqual([
			["cuda", "failed"],
			["webgpu", "slower"],
			["cpu", "selected"],
		]);
		const cuda = selection.attempts[0];
		// No CUDA provider libraries are installed here (ONNXRUNTIME_NODE_INSTALL=skip); the report says so. The
		// missing file is found before onnxruntime tries to load it (which would print an error line of its own).
		expect(missingCudaLibrary()).toMatch(/bin\/napi-v6\/linux\/[^/]+\/libonnxruntime_providers_shared\.so$/);
		expect(cuda?.reason).toMatch(
			/Failed to load shared library .*libonnxruntime_providers_shared\.so: no such file.*ONNXRUNTIME_NODE_INSTALL=cuda12/,
		);
		expect(selection.attempts[1]?.reason).toMatch(/where the CPU provider took .* ms: its adapter is a software one/);
	});

	it("reports the chosen provider from engine init", async () => {
		const engine = createRvcEngine({ executionProviders: ["cuda", "cpu"] });
		const info = await engine.init();
		expect(info).toMatchObject({ name: "rvc", executionProvider: "cpu" });
		expect(info.details?.attempts).toHaveLength(2);
		await engine.dispose();
	});

	it("refuses to start, listing why, when no candidate works", async () => {
		const engine = createRvcEngine({ executionProviders: ["cuda"] });
		const failure = engine.init();
		await expect(failure).rejects.toBeInstanceOf(RvcEngineError);
		await expect(failure).rejects.toMatchObject({
			code: "no_execution_provider",
			message: expect.stringMatching(/no execution provider passed its self-test \(cuda: .*Failed to load/),
		});
	});
});

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
