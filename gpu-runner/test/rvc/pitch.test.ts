/**
 * f0 quantisation and RMVPE salience decoding, against references written here from RVC's numpy code
 * (`Pipeline.get_f0`, `RMVPE.to_local_average_cents`) step by step, and against hand-computed values.
 */
import { describe, expect, it } from "vitest";
import { coarsePitch, decodeSalience, roundHalfEven, shiftAndQuantise } from "../../src/engines/rvc/pitch.ts";

/** numpy.rint by its definition: nearest integer, ties to the even one. */
function rint(x: number): number {
	const lower = Math.floor(x);
	const upper = Math.ceil(x);
	if (x - lower !== upper - x) return x - lower < upper - x ? lower : upper;
	return lower % 2 === 0 ? lower : upper;
}

/** get_f0's quantisation, vectorised the numpy way: mel, rescale where > 0, clip, rint. */
function referenceCoarse(f0: number[]): number[] {
	const mel = (f: number) => 1127 * Math.log(1 + f / 700);
	const melMin = mel(50);
	const melMax = mel(1100);
	return f0
		.map(mel)
		.map((m) => (m > 0 ? ((m - melMin) * 254) / (melMax - melMin) + 1 : m))
		.map((m) => Math.max(m, 1)) // f0_mel[f0_mel <= 1] = 1
		.map((m) => Math.min(m, 255)) // f0_mel[f0_mel > 255] = 255
		.map(rint);
}

/** to_local_average_cents + decode, transcribed: pad 4 zero bins each side, slice 9 around the argmax. */
function referenceDecode(rows: number[][], threshold: number): number[] {
	const mapping = [0, 0, 0, 0, ...Array.from({ length: 360 }, (_, i) => 20 * i + 1997.3794084376191), 0, 0, 0, 0];
	return rows.map((row) => {
		const center = row.indexOf(Math.max(...row)) + 4;
		const padded = [0, 0, 0, 0, ...row, 0, 0, 0, 0];
		const window = padded.slice(center - 4, center + 5);
		const cents =
			window.reduce((s, v, i) => s + v * (mapping[center - 4 + i] as number), 0) / window.reduce((s, v) => s + v, 0);
		// numpy compares the float32 salience with the threshold in float32.
		const f0 = 10 * 2 ** ((Math.max(...padded) <= Math.fround(threshold) ? 0 : cents) / 1200);
		return f0 === 10 ? 0 : f0;
	});
}

describe("coarse pitch (RVC get_f0 quantisation)", () => {
	it("matches hand-computed values", () => {
		// mel(100) = 1127 ln(8/7) = 150.49; (150.49 - 77.755) x 254 / 986.66 + 1 = 19.72 -> 20
		expect(coarsePitch(100)).toBe(20);
		// mel(440) = 1127 ln(1.62857) = 549.64; (549.64 - 77.755) x 0.257435 + 1 = 122.48 -> 122
		expect(coarsePitch(440)).toBe(122);
		expect(coarsePitch(0)).toBe(1);
		expect(coarsePitch(50)).toBe(1);
		expect(coarsePitch(30)).toBe(1);
		expect(coarsePitch(1100)).toBe(255);
		expect(coarsePitch(4000)).toBe(255);
	});

	it("agrees with the transcribed reference over the whole range", () => {
		const f0 = Array.from({ length: 5000 }, (_, i) => i * 0.3);
		expect(f0.map(coarsePitch)).toEqual(referenceCoarse(f0));
	});

	it("uses every bin from 1 to 255 between 50 and 1100 Hz, monotonically", () => {
		const seen = new Set<number>();
		let previous = 0;
		for (let f = 50; f <= 1100; f += 0.05) {
			const c = coarsePitch(f);
			expect(c).toBeGreaterThanOrEqual(previous);
			previous = c;
			seen.add(c);
		}
		expect(seen.size).toBe(255);
	});

	it("rounds halves to even like numpy.rint", () => {
		expect([0.5, 1.5, 2.5, 3.5, 254.5, 2.4999, 2.5001].map(roundHalfEven)).toEqual([0, 2, 2, 4, 254, 2, 3]);
	});

	it("shifts f0 by 2^(semitones/12) before quantising, and keeps unvoiced frames at 0 / 1", () => {
		const { pitchf, pitch } = shiftAndQuantise(Float32Array.from([200, 0, 150]), 12);
		expect([...pitchf]).toEqual([400, 0, 300]);
		expect([...pitch]).toEqual([BigInt(coarsePitch(400)), 1n, BigInt(coarsePitch(300))]);
		const down = shiftAndQuantise(Float32Array.from([220]), -7);
		expect(down.pitchf[0]).toBeCloseTo(220 * 2 ** (-7 / 12), 3);
	});
});

describe("RMVPE salience decoding", () => {
	const cents = (bin: number) => 1997.3794084376191 + 20 * bin;
	const row = (entries: Record<number, number>) => Array.from({ length: 360 }, (_, b) => entries[b] ?? 0);
	const decode = (rows: number[][], threshold = 0.03) => [
		...decodeSalience(Float32Array.from(rows.flat()), rows.length, threshold),
	];

	it("gives a one-hot bin's own pitch", () => {
		const [f0] = decode([row({ 100: 1 })]);
		expect(f0).toBeCloseTo(10 * 2 ** (cents(100) / 1200), 4);
		// 10 x 2^(3997.379 / 1200) = 80 x 2^0.331149 = 100.641
		expect(f0).toBeCloseTo(100.641, 2);
	});

	it("takes the salience-weighted average of the 9 bins around the peak only", () => {
		// 0.6 at bin 200, 0.4 at 201: 8 cents above bin 200. Bin 210 is outside the window and is ignored.
		const [f0] = decode([row({ 200: 0.6, 201: 0.4, 210: 0.5 })]);
		expect(f0).toBeCloseTo(10 * 2 ** ((cents(200) + 8) / 1200), 4);
	});

	it("treats bins past either end as zero", () => {
		const [low, high] = decode([row({ 0: 0.5, 1: 0.5 }), row({ 359: 0.8, 358: 0.2 })]);
		expect(low).toBeCloseTo(10 * 2 ** ((cents(0) + 10) / 1200), 4);
		expect(high).toBeCloseTo(10 * 2 ** ((cents(359) - 4) / 1200), 4);
	});

	it("marks frames at or below the threshold (compared in float32, as numpy does) unvoiced", () => {
		expect(decode([row({ 50: 0.03 }), row({ 50: 0.0301 }), row({})])).toEqual([0, expect.any(Number), 0]);
		expect(decode([row({ 50: 0.2 })], 0.2)).toEqual([0]);
	});

	it("agrees with the transcribed reference on random salience", () => {
		let seed = 7;
		const random = () => {
			seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
			return seed / 2 ** 32;
		};
		const rows = Array.from({ length: 200 }, (_, t) => {
			const peak = Math.floor(random() * 360);
			const scale = t % 10 === 0 ? 0.02 : 1;
			// Float32 values, as the model returns them.
			return Array.from({ length: 360 }, (_, b) =>
				Math.fround(scale * (random() * 0.1 + Math.exp(-(((b - peak) / 2) ** 2)))),
			);
		});
		const ours = decode(rows);
		const reference = referenceDecode(rows, 0.03);
		for (const [i, f] of ours.entries()) {
			expect(f).toBeCloseTo(reference[i] as number, 2);
		}
		expect(ours.filter((f) => f === 0)).toHaveLength(20);
	});
});
