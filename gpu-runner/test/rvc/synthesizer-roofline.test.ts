/**
 * The benchmark's count of the synthesizer's arithmetic (bench/runner/synthesizer-roofline.ts), on which its floor
 * for the rvc engine's speed rests: counted here again by hand from RVC's published 40 kHz config, and its probe
 * graph checked against a convolution written in JS.
 */
import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import { synthesizerArithmetic, synthesizerFlop } from "../../../bench/runner/synthesizer-roofline.ts";
import { sessionOptionsFor } from "../../src/engines/rvc/execution-provider.ts";
import { type ConvLayer, convolutionChainModel } from "../../src/engines/rvc/probe-convolution.ts";
import { PUBLISHED_CONFIG_40K, parseSynthesizerConfig } from "../../src/engines/rvc/synthesizer-config.ts";

describe("synthesizer arithmetic", () => {
	const arithmetic = synthesizerArithmetic(parseSynthesizerConfig(PUBLISHED_CONFIG_40K), 768, true);

	it("counts the 40 kHz decoder's residual blocks: 6 convolutions per kernel (3, 7, 11) at each stage's width and rate", () => {
		const stages = [
			[256, 1_000],
			[128, 10_000],
			[64, 20_000],
			[32, 40_000],
		] as const;
		expect(arithmetic.stages.map((s) => [s.channels, s.rate])).toEqual(stages);
		for (const [i, [channels, rate]] of stages.entries()) {
			for (const kernel of [3, 7, 11]) {
				expect(arithmetic.stages[i]?.residualByKernel.get(kernel)).toBe(2 * 6 * channels * channels * kernel * rate);
			}
		}
		const residual = stages.reduce((sum, [c, rate]) => sum + 2 * 6 * 21 * c * c * rate, 0);
		expect(arithmetic.decoder - arithmetic.decoderOther).toBe(residual);
		expect(residual / 1e9).toBeCloseTo(88.77, 2);
	});

	it("counts the rest of the decoder: upsampling per input sample, the noise, pre, cond and post convolutions", () => {
		const ups = 2 * (512 * 256 * 16 * 100 + 256 * 128 * 16 * 1_000 + 128 * 64 * 4 * 10_000 + 64 * 32 * 4 * 20_000);
		// noise_convs.i: one input channel, kernel twice the stride down from the sample rate (1 at the last stage).
		const noise = 2 * (256 * 80 * 1_000 + 128 * 8 * 10_000 + 64 * 4 * 20_000 + 32 * 1 * 40_000);
		const edges = 2 * (512 * 192 * 7 * 100 + 512 * 256 * 100 + 32 * 7 * 40_000);
		expect(arithmetic.decoderOther).toBe(ups + noise + edges);
	});

	it("counts the text encoder and flow per frame of window, and adds them to the decoder's for a run", () => {
		const encoder = 768 * 192 + 6 * (4 * 192 * 192 + 2 * 768 * 192 * 3) + 384 * 192;
		const coupling = 192 * 96 + 1152 * 256 + 3 * 384 * 192 * 5 + 2 * 384 * 192 + 192 * 192 + 96 * 192;
		expect(arithmetic.encoderAndFlow).toBe(2 * 100 * (encoder + 4 * coupling));
		const flop = synthesizerFlop(arithmetic, 45, 56);
		expect(flop).toBe(arithmetic.decoder * 45 + arithmetic.encoderAndFlow * 56);
	});
});

describe("the probe's convolution", () => {
	it("is the decoder's: a chain of same-padded dilated convolutions over rows, as a JS reference computes", async () => {
		const layer: ConvLayer = {
			channels: 3,
			length: 20,
			rows: 2,
			kernel: 3,
			dilation: 2,
			weight: Float32Array.from({ length: 3 * 3 * 3 }, (_, i) => ((i % 5) - 2) / 8),
			bias: Float32Array.from([0.25, -0.5, 0]),
		};
		const { channels: C, length: T, kernel: K, dilation: D } = layer;
		const rows = 2;
		const convolve = (x: Float32Array) => {
			const y = new Float32Array(x.length);
			const pad = ((K - 1) * D) >> 1;
			for (let o = 0; o < C; o++) {
				for (let r = 0; r < rows; r++) {
					for (let t = 0; t < T; t++) {
						let sum = layer.bias[o] as number;
						for (let c = 0; c < C; c++) {
							for (let k = 0; k < K; k++) {
								const s = t + k * D - pad;
								if (s >= 0 && s < T)
									sum += (layer.weight[(o * C + c) * K + k] as number) * (x[(c * rows + r) * T + s] as number);
							}
						}
						y[(o * rows + r) * T + t] = sum;
					}
				}
			}
			return y;
		};
		const x = Float32Array.from({ length: C * rows * T }, (_, i) => Math.sin(i * 0.7));
		const session = await ort.InferenceSession.create(convolutionChainModel(layer, 2), sessionOptionsFor("cpu"));
		try {
			const y = (await session.run({ x: new ort.Tensor("float32", x, [1, C, rows, T]) })).y?.data as Float32Array;
			const want = convolve(convolve(x));
			expect(y.length).toBe(want.length);
			for (let i = 0; i < want.length; i++) expect(y[i]).toBeCloseTo(want[i] as number, 5);
		} finally {
			await session.release();
		}
	});
});
