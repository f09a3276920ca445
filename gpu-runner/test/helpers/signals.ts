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
	hop: number;
	window: number;
}

/** McLeod pitch method (pitchy, MIT): an independent tracker, not the engine's code. */
export function trackPitch(samples: Float32Array, sampleRate: number, clarity = 0.9): PitchTrack {
	const window = 2048;
	const hop = Math.round(sampleRate / 100);
	const detector = PitchDetector.forFloat32Array(window);
	const frequencies: number[] = [];
	for (let start = 0; start + window <= samples.length; start += hop) {
		const [pitch, confidence] = detector.findPitch(samples.subarray(start, start + window), sampleRate);
		frequencies.push(confidence >= clarity && pitch > 40 && pitch < 1000 ? pitch : 0);
	}
	return { frequencies, hop, window };
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
