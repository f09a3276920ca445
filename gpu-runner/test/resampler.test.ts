import { describe, expect, it } from "vitest";
import { converterRates, resampleStream } from "../src/audio/resampler.ts";
import { sine } from "./helpers/signals.ts";
import { blocksOf, collect } from "./helpers/streams.ts";

/** Amplitude of one frequency in a signal (a single-bin DFT), independent of the resampler's code. */
function amplitudeAt(samples: Float32Array, frequency: number, sampleRate: number): number {
	let re = 0;
	let im = 0;
	for (let i = 0; i < samples.length; i++) {
		const phase = (2 * Math.PI * frequency * i) / sampleRate;
		re += (samples[i] as number) * Math.cos(phase);
		im -= (samples[i] as number) * Math.sin(phase);
	}
	return (2 * Math.hypot(re, im)) / samples.length;
}

describe("streaming resampler", () => {
	it("44.1 kHz → 16 kHz keeps a 1 kHz tone, removes 12 kHz without aliasing, and gives the exact length", async () => {
		const input = sine(1000, 2, 44_100, 0.5).map((v, i) => v + 0.3 * Math.sin((2 * Math.PI * 12_000 * i) / 44_100));
		const out = await collect(resampleStream(blocksOf([input], 44_100, 3000), 16_000));
		const samples = out.channels[0] as Float32Array;
		expect(out.sampleRate).toBe(16_000);
		expect(samples.length).toBe(Math.round((input.length * 16_000) / 44_100));
		const middle = samples.subarray(1000, samples.length - 1000); // away from the edges
		expect(amplitudeAt(middle, 1000, 16_000)).toBeCloseTo(0.5, 2);
		expect(amplitudeAt(middle, 4000, 16_000)).toBeLessThan(1e-3); // where 12 kHz would alias to
	});

	it("16 kHz → 40 kHz stereo keeps both channels aligned and the exact length", async () => {
		const left = sine(500, 1.01, 16_000, 0.5);
		const right = sine(700, 1.01, 16_000, 0.5);
		const out = await collect(resampleStream(blocksOf([left, right], 16_000, 777), 40_000));
		expect(out.channels).toHaveLength(2);
		expect(out.channels[0]?.length).toBe(Math.round(left.length * 2.5));
		const tail = (out.channels[1] as Float32Array).subarray(20_000, 38_000);
		expect(amplitudeAt(tail, 700, 40_000)).toBeCloseTo(0.5, 2);
		// Output is aligned with the input: the 500 Hz tone's phase at t=0.5 s matches the source's.
		const t = 20_000;
		expect((out.channels[0] as Float32Array)[t] as number).toBeCloseTo(
			0.5 * Math.sin((2 * Math.PI * 500 * t) / 40_000),
			2,
		);
	});

	// libsamplerate-js refuses rates above 192 kHz; sources are accepted up to 768 kHz (an rvc job or an auto key at
	// 384 kHz failed with "invalid inputSampleRate").
	for (const inputRate of [384_000, 705_600, 768_000, 767_999]) {
		it(`${inputRate / 1000} kHz → 16 kHz keeps a 1 kHz tone and gives the exact length`, async () => {
			const input = sine(1000, 0.5, inputRate, 0.5);
			const out = await collect(resampleStream(blocksOf([input], inputRate, 50_000), 16_000));
			const samples = out.channels[0] as Float32Array;
			expect(samples.length).toBe(Math.round((input.length * 16_000) / inputRate));
			expect(amplitudeAt(samples.subarray(500, samples.length - 500), 1000, 16_000)).toBeCloseTo(0.5, 2);
		});
	}

	it("gives libsamplerate-js rates within its limit and with the same ratio", () => {
		expect(converterRates(44_100, 16_000)).toEqual([44_100, 16_000]);
		expect(converterRates(384_000, 16_000)).toEqual([192_000, 8000]);
		expect(converterRates(705_600, 40_000)).toEqual([191_835, 10_875]); // 441:25
		const [input, output] = converterRates(767_999, 16_000);
		expect(Math.max(input, output)).toBeLessThanOrEqual(192_000);
		// No exact fraction fits: the closest convergent is off by about a millionth (9 ms in 2 hours).
		expect(Math.abs(output / input / (16_000 / 767_999) - 1)).toBeLessThan(1e-5);
	});

	it("passes blocks through untouched when the rate already matches", async () => {
		const block = sine(440, 0.1, 22_050);
		const out = await collect(resampleStream(blocksOf([block], 22_050), 22_050));
		expect(out.channels[0]).toEqual(block);
	});
});
