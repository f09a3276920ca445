/** The streaming 48 Hz high-pass against the closed-form gain of a bilinear-transform Butterworth filter. */
import { describe, expect, it } from "vitest";
import { ButterworthHighPass } from "../../src/engines/rvc/high-pass.ts";

const RATE = 16000;

/** |H(f)| of an order-n digital Butterworth high-pass designed by bilinear transform with pre-warping. */
function expectedGain(f: number, cutoff: number, order: number): number {
	const ratio = Math.tan((Math.PI * cutoff) / RATE) / Math.tan((Math.PI * f) / RATE);
	return 1 / Math.sqrt(1 + ratio ** (2 * order));
}

/** Steady-state gain for a sine at f, measured by least squares against sin and cos after the transient. */
function measuredGain(filter: ButterworthHighPass, f: number, blockSize: number): number {
	const seconds = 4;
	const input = Float32Array.from({ length: seconds * RATE }, (_, i) => Math.sin((2 * Math.PI * f * i) / RATE));
	const output = new Float32Array(input.length);
	for (let start = 0; start < input.length; start += blockSize)
		output.set(filter.process(input.subarray(start, start + blockSize)), start);
	let s = 0;
	let c = 0;
	const from = 2 * RATE;
	for (let i = from; i < input.length; i++) {
		s += (output[i] as number) * Math.sin((2 * Math.PI * f * i) / RATE);
		c += (output[i] as number) * Math.cos((2 * Math.PI * f * i) / RATE);
	}
	return (2 * Math.hypot(s, c)) / (input.length - from);
}

describe("48 Hz Butterworth high-pass", () => {
	it.each([20, 35, 48, 60, 100, 300, 3000])("passes %d Hz with the closed-form gain, across block boundaries", (f) => {
		const gain = measuredGain(new ButterworthHighPass(48, RATE), f, 1037);
		expect(gain).toBeCloseTo(expectedGain(f, 48, 5), 3);
	});

	it("is -3 dB at the cutoff and removes DC", () => {
		expect(measuredGain(new ButterworthHighPass(48, RATE), 48, 4096)).toBeCloseTo(Math.SQRT1_2, 3);
		const filter = new ButterworthHighPass(48, RATE);
		const out = filter.process(new Float32Array(RATE * 2).fill(0.5));
		expect(Math.abs(out.at(-1) as number)).toBeLessThan(1e-4);
	});

	it("starts from the first sample's steady state, as RVC's filtfilt does: a DC offset leaves no thump", () => {
		// scipy's filtfilt starts its pass at lfilter_zi x the first value, so a constant offset comes out as 0 from
		// the first sample, not as the filter's step response (here 0.3 at once, ringing out over 30 ms).
		const tone = Float32Array.from({ length: RATE / 2 }, (_, i) => 0.2 * Math.sin((2 * Math.PI * 220 * i) / RATE));
		const offset = tone.map((v) => v + 0.3);
		const clean = new ButterworthHighPass(48, RATE).process(tone);
		const shifted = new ButterworthHighPass(48, RATE);
		const out = new Float32Array(offset.length);
		for (let start = 0; start < offset.length; start += 160)
			out.set(shifted.process(offset.subarray(start, start + 160)), start);
		let worst = 0;
		for (let i = 0; i < out.length; i++) worst = Math.max(worst, Math.abs((out[i] as number) - (clean[i] as number)));
		expect(worst).toBeLessThan(1e-6);
		// A stream that starts inside a held value is the same case.
		const held = new ButterworthHighPass(48, RATE).process(new Float32Array(800).fill(-0.6));
		expect(Math.max(...held.map(Math.abs))).toBeLessThan(1e-6);
	});

	it("gives the same output whatever the block sizes", () => {
		const input = Float32Array.from({ length: 5000 }, (_, i) => Math.sin(i * 0.01) + 0.3 * Math.sin(i * 0.7));
		const whole = new ButterworthHighPass(48, RATE).process(input);
		const blocks = new ButterworthHighPass(48, RATE);
		const pieces = [1, 99, 1000, 3900].map((n, i, all) => {
			const start = all.slice(0, i).reduce((a, b) => a + b, 0);
			return blocks.process(input.subarray(start, start + n));
		});
		expect(Float32Array.from(pieces.flatMap((p) => [...p]))).toEqual(whole);
	});
});
