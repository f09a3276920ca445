/**
 * RMVPE's log-mel front end against references computed here without the production code: a direct DFT of
 * each frame, the librosa filterbank written out from its definition, and closed-form spectra of
 * bin-centred sines under a periodic Hann window.
 */
import { describe, expect, it } from "vitest";
import { LogMelSpectrogram, melFilterbank } from "../../src/engines/rvc/mel.ts";

const SR = 16000;
const N_FFT = 1024;
const HOP = 160;
const N_MELS = 128;
const BINS = N_FFT / 2 + 1;

/** librosa.filters.mel(sr=16000, n_fft=1024, n_mels=128, fmin=30, fmax=8000, htk=True) with slaney norm. */
function referenceFilterbank(): number[][] {
	const toMel = (f: number) => (2595 * Math.log(1 + f / 700)) / Math.LN10;
	const toHz = (m: number) => 700 * (Math.exp((m * Math.LN10) / 2595) - 1);
	const step = (toMel(8000) - toMel(30)) / (N_MELS + 1);
	const edges = Array.from({ length: N_MELS + 2 }, (_, i) => toHz(toMel(30) + i * step));
	return Array.from({ length: N_MELS }, (_, m) => {
		const [lo, mid, hi] = [edges[m] as number, edges[m + 1] as number, edges[m + 2] as number];
		return Array.from({ length: BINS }, (_, k) => {
			const f = (k * SR) / N_FFT;
			let w = 0;
			if (f > lo && f <= mid) w = (f - lo) / (mid - lo);
			else if (f > mid && f < hi) w = (hi - f) / (hi - mid);
			return (w * 2) / (hi - lo);
		});
	});
}

/** log(max(mel, 1e-5)) of frame `frame`, by a direct DFT of the reflect-padded, sin^2-windowed samples. */
function referenceLogMelFrame(audio: Float32Array, frame: number, bank: number[][]): number[] {
	const n = audio.length;
	const at = (i: number) => (i < 0 ? audio[-i] : i >= n ? audio[2 * (n - 1) - i] : audio[i]) as number;
	const x = Array.from(
		{ length: N_FFT },
		(_, i) => at(frame * HOP - N_FFT / 2 + i) * Math.sin((Math.PI * i) / N_FFT) ** 2,
	);
	const magnitude = Array.from({ length: BINS }, (_, k) => {
		let re = 0;
		let im = 0;
		for (let i = 0; i < N_FFT; i++) {
			re += (x[i] as number) * Math.cos((2 * Math.PI * k * i) / N_FFT);
			im -= (x[i] as number) * Math.sin((2 * Math.PI * k * i) / N_FFT);
		}
		return Math.sqrt(re * re + im * im);
	});
	return bank.map((row) =>
		Math.log(
			Math.max(
				1e-5,
				row.reduce((s, w, k) => s + w * (magnitude[k] as number), 0),
			),
		),
	);
}

function melColumn(data: Float32Array, paddedFrames: number, frame: number): number[] {
	return Array.from({ length: N_MELS }, (_, m) => data[m * paddedFrames + frame] as number);
}

describe("mel filterbank", () => {
	const ours = melFilterbank(SR, N_FFT, N_MELS, 30, 8000);
	const reference = referenceFilterbank();

	it("matches librosa's definition (htk mel scale, slaney area normalisation)", () => {
		for (let m = 0; m < N_MELS; m++) {
			for (let k = 0; k < BINS; k++) expect(ours[m * BINS + k]).toBeCloseTo(reference[m]?.[k] as number, 6);
		}
	});

	it("gives the wide bands unit area in Hz, which is what slaney normalisation means", () => {
		for (let m = 100; m < N_MELS; m++) {
			let area = 0;
			for (let k = 0; k < BINS; k++) area += (ours[m * BINS + k] as number) * (SR / N_FFT);
			expect(area).toBeGreaterThan(0.97);
			expect(area).toBeLessThan(1.03);
		}
	});
});

describe("log-mel spectrogram", () => {
	const spectrogram = new LogMelSpectrogram();
	const bank = referenceFilterbank();

	it("has 1 + floor(samples / 160) frames, padded with zeros to a multiple of 32", () => {
		const { frames, paddedFrames, data } = spectrogram.compute(new Float32Array(16000).fill(0.1));
		expect(frames).toBe(101);
		expect(paddedFrames).toBe(128);
		expect(data.length).toBe(128 * 128);
		for (let m = 0; m < N_MELS; m++) expect(data[m * paddedFrames + 101]).toBe(0);
	});

	it("matches a direct DFT of each frame, edges included", () => {
		let seed = 3;
		const audio = Float32Array.from({ length: 4000 }, (_, i) => {
			seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
			return (
				0.4 * Math.sin(2 * Math.PI * 233 * (i / SR)) +
				0.2 * Math.sin(2 * Math.PI * 1870 * (i / SR)) +
				0.05 * (seed / 2 ** 32 - 0.5)
			);
		});
		const { data, frames, paddedFrames } = spectrogram.compute(audio);
		expect(frames).toBe(26);
		for (const frame of [0, 1, 2, 13, 24, 25]) {
			const ours = melColumn(data, paddedFrames, frame);
			for (const [m, v] of referenceLogMelFrame(audio, frame, bank).entries()) {
				expect(ours[m]).toBeCloseTo(v, 3);
			}
		}
	});

	it("puts a bin-centred sine where the closed form says: A N/4 in its bin, A N/8 in each neighbour", () => {
		const amplitude = 0.5;
		const bin = 64; // 1000 Hz
		const audio = Float32Array.from({ length: 8000 }, (_, i) => amplitude * Math.cos((2 * Math.PI * bin * i) / N_FFT));
		const { data, paddedFrames } = spectrogram.compute(audio);
		const ours = melColumn(data, paddedFrames, 20);
		// With a periodic Hann window, a sine on bin k0 has exactly three non-zero magnitudes.
		const magnitude = new Map([
			[bin - 1, (amplitude * N_FFT) / 8],
			[bin, (amplitude * N_FFT) / 4],
			[bin + 1, (amplitude * N_FFT) / 8],
		]);
		bank.forEach((row, m) => {
			const energy = [...magnitude].reduce((s, [k, a]) => s + (row[k] as number) * a, 0);
			expect(ours[m]).toBeCloseTo(Math.log(Math.max(1e-5, energy)), 3);
		});
		const loudest = ours.indexOf(Math.max(...ours));
		const row = bank[loudest] as number[];
		expect(row[bin]).toBeGreaterThan(0);
	});

	it("is log(1e-5) everywhere for silence", () => {
		const { data, frames, paddedFrames } = spectrogram.compute(new Float32Array(3200));
		for (let f = 0; f < frames; f++) {
			for (const v of melColumn(data, paddedFrames, f)) {
				expect(v).toBeCloseTo(Math.log(1e-5), 6);
			}
		}
	});
});
