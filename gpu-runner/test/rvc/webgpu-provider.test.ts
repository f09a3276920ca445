/**
 * The rvc engine's WebGPU provider, on a real WebGPU implementation: onnxruntime's (Dawn) over Mesa's lavapipe, a
 * Vulkan driver that runs on the CPU, which is what WebGPU finds on a machine with Mesa's Vulkan drivers and no GPU.
 * Provider selection must pass it over for the CPU, which is tens of times faster there; named alone, it must
 * convert a `.pth` voice as the CPU does. Needs lavapipe from Mesa 23.1 or later (`mesa-vulkan-drivers`; `.ci/run`
 * installs it, from backports on Debian 12, whose Mesa 22.3 lacks a feature Dawn requires).
 */
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { VoiceDescriptor } from "../../../src/contracts/runner.ts";
import { type ExecutionProviderName, selectExecutionProvider } from "../../src/engines/rvc/execution-provider.ts";
import { createRvcEngine } from "../../src/engines/rvc/index.ts";
import { scratchDir } from "../helpers/scratch.ts";
import { sine } from "../helpers/signals.ts";
import { blocksOf, collect } from "../helpers/streams.ts";
import { checksumNamedCopy } from "./support/checksum-named-copy.ts";
import { buildTinyContentVec, buildTinyRmvpe, writeModels } from "./support/tiny-models.ts";

const IN_RATE = 16000;
const FIXTURES = join(import.meta.dirname, "fixtures");

describe("the WebGPU provider on a software adapter (Mesa's lavapipe)", () => {
	beforeAll(async () => {
		// Named alone, WebGPU is selected wherever it has an adapter; without one the tests below cannot say anything.
		const alone = await selectExecutionProvider(["webgpu"]).catch((error: Error) => error);
		if (alone instanceof Error) {
			throw new Error(
				`no WebGPU adapter on this machine (${alone.message}): install Mesa's Vulkan drivers, 23.1 or later (mesa-vulkan-drivers; .ci/run does)`,
			);
		}
		expect(alone.provider).toBe("webgpu");
	});

	it("is passed over for the CPU, which runs the probe convolution faster, and the attempt says so", async () => {
		const selection = await selectExecutionProvider(["webgpu", "cpu"]);
		expect(selection.provider).toBe("cpu");
		expect(selection.attempts.map((a) => [a.provider, a.outcome])).toEqual([
			["webgpu", "slower"],
			["cpu", "selected"],
		]);
		const [, own, cpu] =
			/in ([\d.]+) ms where the CPU provider took ([\d.]+) ms: its adapter is a software one/.exec(
				selection.attempts[0]?.reason ?? "",
			) ?? [];
		expect(Number(own)).toBeGreaterThanOrEqual(Number(cpu));
		// The runner's default order ends the same way, and the engine reports it.
		const engine = createRvcEngine();
		const info = await engine.init();
		expect(info.executionProvider).toBe("cpu");
		expect(info.details?.attempts).toEqual([
			expect.objectContaining({ provider: "cuda", outcome: "failed" }),
			expect.objectContaining({ provider: "webgpu", outcome: "slower" }),
			expect.objectContaining({ provider: "cpu", outcome: "selected" }),
		]);
		await engine.dispose();
	});

	it("converts a .pth voice as the CPU provider does, when named alone", async () => {
		const artifactPaths = writeModels({ contentvec: buildTinyContentVec(), rmvpe: buildTinyRmvpe({ pitchBin: 168 }) });
		// The ONNX built from the checkpoint goes beside it.
		artifactPaths.set("synthesizer", checksumNamedCopy(join(FIXTURES, "v2-f0-48k.pth"), scratchDir("rvc-webgpu")));
		const voice: VoiceDescriptor = {
			id: "6c1d0a4e-93b2-4f57-8e0a-2d4b6f8a1c39",
			name: "pth",
			engine: "rvc",
			params: { sample_rate: 48000, chunk_seconds: 1, chunk_search_seconds: 0.2, context_seconds: 0.2 },
			artifacts: [],
		};
		const convertOn = async (provider: ExecutionProviderName): Promise<Float32Array> => {
			const engine = createRvcEngine({ noiseSeed: 7, executionProviders: [provider] });
			expect((await engine.init()).executionProvider).toBe(provider);
			try {
				const job = { voice, semitones: 0, artifactPaths, input: { sampleRate: IN_RATE, channels: 1 } };
				const source = blocksOf([sine(150, 1.5, IN_RATE, 0.3)], IN_RATE, 1600);
				const { channels } = await collect(engine.convert(source, job, new AbortController().signal));
				return channels[0] ?? new Float32Array(0);
			} finally {
				await engine.dispose();
			}
		};
		const cpu = await convertOn("cpu");
		const gpu = await convertOn("webgpu");
		expect(gpu.length).toBe(1.5 * 48000);
		expect(cpu.length).toBe(gpu.length);
		const signal = cpu.reduce((sum, v) => sum + v * v, 0);
		const error = cpu.reduce((sum, v, i) => sum + (v - (gpu[i] as number)) ** 2, 0);
		expect(signal).toBeGreaterThan(0);
		// Measured: 120 dB (max abs difference 3.5e-6 over 3 s); float32 kernels that sum in another order.
		expect(10 * Math.log10(signal / error)).toBeGreaterThan(90);
	}, 180_000);
});
