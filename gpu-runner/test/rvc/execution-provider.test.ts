/**
 * Provider selection: each candidate alone with a self-test; this machine has no GPU (WebGPU finds only Mesa's
 * lavapipe, which runs on the CPU), so it ends on the CPU.
 */
import { describe, expect, it } from "vitest";
import { missingCudaLibrary } from "../../src/engines/rvc/execution-provider.ts";
import { createRvcEngine, RvcEngineError, selectExecutionProvider } from "../../src/engines/rvc/index.ts";

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
