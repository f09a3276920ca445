/**
 * The `yin` f0 method: YIN (de Cheveigné & Kawahara, 2002), built in so a voice can run without an RMVPE model.
 * One estimate per 10 ms (hop 160 at 16 kHz), frame t centred on sample 160·t like RMVPE's centred STFT, so it
 * yields the same frame count and alignment as `decodeSalience`.
 *
 * Per frame: the difference function d(τ) over a 32 ms window for lags up to the 50 Hz period, its cumulative
 * mean normalised form d'(τ), the first lag in the 50..1100 Hz range (RVC's f0 range) where d' dips below
 * YIN_THRESHOLD followed down to its local minimum, refined by parabolic interpolation. Frames with no such dip,
 * or quieter than SILENCE_RMS, are unvoiced (0).
 */
import { F0_MAX_HZ, F0_MIN_HZ } from "./pitch.ts";

/** Absolute threshold on d' (the paper suggests 0.1–0.2; higher accepts breathier voicing). */
export const YIN_THRESHOLD = 0.15;
/** Frames whose RMS is below this (about −60 dBFS) are unvoiced. */
const SILENCE_RMS = 1e-3;
const WINDOW = 512;

/** f0 in Hz (0 = unvoiced) for `frames` frames of `samples` at `sampleRate`, one every `hop` samples. */
export function trackPitchYin(samples: Float32Array, frames: number, sampleRate = 16_000, hop = 160): Float32Array {
	const minLag = Math.max(2, Math.floor(sampleRate / F0_MAX_HZ));
	const maxLag = Math.ceil(sampleRate / F0_MIN_HZ);
	const span = WINDOW + maxLag + 1;
	const frame = new Float64Array(span);
	const difference = new Float64Array(maxLag + 2);
	const f0 = new Float32Array(frames);
	for (let t = 0; t < frames; t++) {
		const start = t * hop - Math.floor(span / 2);
		let energy = 0;
		for (let i = 0; i < span; i++) {
			const j = start + i;
			const value = j >= 0 && j < samples.length ? (samples[j] as number) : 0;
			frame[i] = value;
			energy += value * value;
		}
		if (Math.sqrt(energy / span) < SILENCE_RMS) continue;

		for (let lag = 1; lag <= maxLag + 1; lag++) {
			let sum = 0;
			for (let i = 0; i < WINDOW; i++) {
				const delta = (frame[i] as number) - (frame[i + lag] as number);
				sum += delta * delta;
			}
			difference[lag] = sum;
		}
		// Cumulative mean normalised difference, in place: d'(τ) = d(τ) · τ / Σ_{j ≤ τ} d(j).
		let running = 0;
		for (let lag = 1; lag <= maxLag + 1; lag++) {
			running += difference[lag] as number;
			difference[lag] = running > 0 ? ((difference[lag] as number) * lag) / running : 1;
		}
		let lag = minLag;
		while (lag <= maxLag && (difference[lag] as number) >= YIN_THRESHOLD) lag++;
		if (lag > maxLag) continue;
		while (lag < maxLag && (difference[lag + 1] as number) < (difference[lag] as number)) lag++;

		const before = difference[lag - 1] as number;
		const at = difference[lag] as number;
		const after = difference[lag + 1] as number;
		const curvature = before - 2 * at + after;
		const shift = curvature > 0 ? Math.max(-1, Math.min(1, (before - after) / (2 * curvature))) : 0;
		const hz = sampleRate / (lag + shift);
		if (hz >= F0_MIN_HZ && hz <= F0_MAX_HZ) f0[t] = hz;
	}
	return f0;
}
