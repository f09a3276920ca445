/** Test signals generated in code, and the measurements the tests assert on. */
import { PitchDetector } from "pitchy";

/** A harmonic tone (sawtooth-like, 1/h amplitudes) at `f0`, `amplitude` peak-ish. */
export function harmonicTone(f0: number, seconds: number, sampleRate: number, amplitude = 0.3): Float32Array {
	const frames = Math.round(seconds * sampleRate);
	const out = new Float32Array(frames);
	const harmonics = Math.floor(sampleRate / 2 / f0) - 1;
	for (let h = 1; h <= Math.min(harmonics, 30); h++) {
		const step = (2 * Math.PI * f0 * h) / sampleRate;
		for (let i = 0; i < frames; i++) out[i] = (out[i] as number) + (amplitude * Math.sin(step * i)) / h;
	}
	return out;
}

export function sine(frequency: number, seconds: number, sampleRate: number, amplitude = 0.5): Float32Array {
	const frames = Math.round(seconds * sampleRate);
	const out = new Float32Array(frames);
	for (let i = 0; i < frames; i++) out[i] = amplitude * Math.sin((2 * Math.PI * frequency * i) / sampleRate);
	return out;
}

export interface PitchTrack {
	/** Per-frame pitch in Hz, or 0 where the tracker is not confident (unvoiced). */
	frequencies: number[];
	/** Each frame's MPM clarity (0..1: how periodic), whatever the threshold. */
	clarities: number[];
	hop: number;
	window: number;
}

/** McLeod pitch method (pitchy, MIT): an independent tracker, not the engine's code. */
export function trackPitch(samples: Float32Array, sampleRate: number, clarity = 0.9): PitchTrack {
	const window = 2048;
	const hop = Math.round(sampleRate / 100);
	const detector = PitchDetector.forFloat32Array(window);
	const frequencies: number[] = [];
	const clarities: number[] = [];
	for (let start = 0; start + window <= samples.length; start += hop) {
		const [pitch, confidence] = detector.findPitch(samples.subarray(start, start + window), sampleRate);
		frequencies.push(confidence >= clarity && pitch > 40 && pitch < 1000 ? pitch : 0);
		clarities.push(confidence);
	}
	return { frequencies, clarities, hop, window };
}

export function median(values: number[]): number {
	if (values.length === 0) return Number.NaN;
	const sorted = [...values].sort((a, b) => a - b);
	const middle = sorted.length >> 1;
	return sorted.length % 2
		? (sorted[middle] as number)
		: ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

export function medianPitch(track: PitchTrack): number {
	return median(track.frequencies.filter((f) => f > 0));
}

export function cents(measured: number, expected: number): number {
	return 1200 * Math.log2(measured / expected);
}

/** RMS level in dBFS over the analysis frames that the given track marks voiced. */
export function voicedRmsDb(samples: Float32Array, track: PitchTrack): number {
	let energy = 0;
	let count = 0;
	track.frequencies.forEach((f, frame) => {
		if (f <= 0) return;
		const start = frame * track.hop;
		for (let i = start; i < Math.min(start + track.hop, samples.length); i++) energy += (samples[i] as number) ** 2;
		count += Math.min(track.hop, samples.length - start);
	});
	return 10 * Math.log10(energy / count);
}

export function peak(samples: Float32Array): number {
	let max = 0;
	for (const v of samples) max = Math.max(max, Math.abs(v));
	return max;
}

/**
 * A steady vowel-like tone: harmonics of `f0` up to 0.45 × the sample rate, each with the amplitude of a cascade of
 * two-pole resonances (`[centre Hz, bandwidth Hz]`) at its frequency, so the spectral envelope has peaks exactly there.
 * Scaled to `amplitude` peak.
 */
export function formantTone(
	f0: number,
	seconds: number,
	sampleRate: number,
	formants: [number, number][],
	amplitude = 0.3,
): Float32Array {
	const frames = Math.round(seconds * sampleRate);
	const out = new Float32Array(frames);
	for (let h = 1; h * f0 < 0.45 * sampleRate; h++) {
		const f = h * f0;
		let gain = 1;
		for (const [centre, bandwidth] of formants) {
			// |H(f)| of a resonance normalised to 1 at 0 Hz: centre² / |centre² - f² + i f bandwidth|.
			gain *= (centre * centre) / Math.hypot(centre * centre - f * f, f * bandwidth);
		}
		const step = (2 * Math.PI * f) / sampleRate;
		for (let i = 0; i < frames; i++) out[i] = (out[i] as number) + gain * Math.sin(step * i);
	}
	const scale = amplitude / peak(out);
	for (let i = 0; i < frames; i++) out[i] = (out[i] as number) * scale;
	return out;
}

/**
 * Formant frequencies of one frame by linear prediction (autocorrelation method, pre-emphasis, Hamming window):
 * the peaks of the all-pole envelope 1/|A(f)| between 150 Hz and `maxHz`, lowest first.
 */
export function lpcFormants(frame: Float32Array, sampleRate: number, maxHz = 4000): number[] {
	const n = frame.length;
	const order = Math.round(sampleRate / 1000) + 2;
	const x = new Float64Array(n);
	for (let i = 0; i < n; i++) {
		const emphasised = (frame[i] as number) - 0.97 * (i > 0 ? (frame[i - 1] as number) : 0);
		x[i] = emphasised * (0.54 - 0.46 * Math.cos((2 * Math.PI * i) / (n - 1)));
	}
	const r = new Float64Array(order + 1);
	for (let lag = 0; lag <= order; lag++) {
		for (let i = lag; i < n; i++) r[lag] = (r[lag] as number) + (x[i] as number) * (x[i - lag] as number);
	}
	if (!((r[0] as number) > 0)) return [];
	r[0] = (r[0] as number) * (1 + 1e-9);
	// Levinson-Durbin.
	let a = new Float64Array(order + 1);
	a[0] = 1;
	let error = r[0] as number;
	for (let i = 1; i <= order; i++) {
		let acc = r[i] as number;
		for (let j = 1; j < i; j++) acc += (a[j] as number) * (r[i - j] as number);
		const k = -acc / error;
		const next = Float64Array.from(a);
		for (let j = 1; j < i; j++) next[j] = (a[j] as number) + k * (a[i - j] as number);
		next[i] = k;
		a = next;
		error *= 1 - k * k;
	}
	const step = 5;
	const response: number[] = [];
	for (let f = 0; f <= maxHz + step; f += step) {
		const w = (2 * Math.PI * f) / sampleRate;
		let re = 0;
		let im = 0;
		for (let j = 0; j <= order; j++) {
			re += (a[j] as number) * Math.cos(w * j);
			im -= (a[j] as number) * Math.sin(w * j);
		}
		response.push(-Math.log(re * re + im * im));
	}
	const peaks: number[] = [];
	for (let i = 1; i < response.length - 1; i++) {
		const f = i * step;
		if (
			f >= 150 &&
			f <= maxHz &&
			(response[i] as number) > (response[i - 1] as number) &&
			(response[i] as number) >= (response[i + 1] as number)
		) {
			peaks.push(f);
		}
	}
	return peaks;
}

/** Median F1 and F2 (`lpcFormants`) over frames of 30 ms every 10 ms, those `use(frame index)` accepts. */
export function medianFormants(
	samples: Float32Array,
	sampleRate: number,
	use: (frame: number) => boolean = () => true,
): { f1: number; f2: number } {
	const window = Math.round(0.03 * sampleRate);
	const hop = Math.round(sampleRate / 100);
	const f1: number[] = [];
	const f2: number[] = [];
	for (let frame = 0, start = 0; start + window <= samples.length; frame++, start += hop) {
		if (!use(frame)) continue;
		const peaks = lpcFormants(samples.subarray(start, start + window), sampleRate);
		if (peaks.length >= 2) {
			f1.push(peaks[0] as number);
			f2.push(peaks[1] as number);
		}
	}
	return { f1: median(f1), f2: median(f2) };
}

/** Median MPM clarity (pitchy's confidence, 0..1: how periodic) over the frames `use(frame index)` accepts. */
export function medianClarity(
	samples: Float32Array,
	sampleRate: number,
	use: (frame: number) => boolean = () => true,
): number {
	return median(trackPitch(samples, sampleRate).clarities.filter((_, frame) => use(frame)));
}
