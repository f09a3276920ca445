/**
 * Pitch post-processing as RVC does it: RMVPE salience to Hz (`RMVPE.to_local_average_cents` and `decode` in
 * `infer/lib/rmvpe.py`), then the key shift and the coarse quantisation of `Pipeline.get_f0` in
 * `infer/modules/vc/pipeline.py`.
 */

/** RMVPE predicts salience over 360 pitch bins, 20 cents apart. */
export const RMVPE_PITCH_BINS = 360;
/** Cents (relative to 10 Hz) of bin 0: RVC's `cents_mapping = 20 * arange(360) + 1997.3794084376191`. */
export const RMVPE_CENTS_OFFSET = 1997.3794084376191;
export const RMVPE_CENTS_PER_BIN = 20;
/** The voicing threshold RVC's pipeline passes to `infer_from_audio`. */
export const RMVPE_VOICING_THRESHOLD = 0.03;

export const F0_MIN_HZ = 50;
export const F0_MAX_HZ = 1100;
const f0ToMel = (hz: number): number => 1127 * Math.log(1 + hz / 700);
const F0_MEL_MIN = f0ToMel(F0_MIN_HZ);
const F0_MEL_MAX = f0ToMel(F0_MAX_HZ);

/**
 * Decode a `[frames, 360]` salience matrix to f0 in Hz (0 = unvoiced). Per frame: the argmax bin (the first
 * one on ties), the salience-weighted average of the cents of the 9 bins around it (bins past either end count
 * as 0), and 0 where the frame's maximum is at or below `threshold`.
 */
export function decodeSalience(
	salience: Float32Array,
	frames: number,
	threshold = RMVPE_VOICING_THRESHOLD,
): Float32Array {
	if (salience.length < frames * RMVPE_PITCH_BINS) {
		throw new RangeError(
			`salience has ${salience.length} values, fewer than ${frames} frames x ${RMVPE_PITCH_BINS} bins`,
		);
	}
	const f0 = new Float32Array(frames);
	// RVC compares float32 salience with the threshold in float32 (numpy keeps the array's dtype).
	const limit = Math.fround(threshold);
	for (let t = 0; t < frames; t++) {
		const row = t * RMVPE_PITCH_BINS;
		let center = 0;
		let max = salience[row] as number;
		for (let b = 1; b < RMVPE_PITCH_BINS; b++) {
			const v = salience[row + b] as number;
			if (v > max) {
				max = v;
				center = b;
			}
		}
		if (!(max > limit)) continue;
		let weighted = 0;
		let total = 0;
		for (let b = Math.max(0, center - 4); b <= Math.min(RMVPE_PITCH_BINS - 1, center + 4); b++) {
			const v = salience[row + b] as number;
			weighted += v * (RMVPE_CENTS_OFFSET + RMVPE_CENTS_PER_BIN * b);
			total += v;
		}
		const cents = weighted / total;
		// RVC maps exactly 10 Hz (0 cents) to unvoiced as well.
		const hz = 10 * 2 ** (cents / 1200);
		f0[t] = hz === 10 ? 0 : hz;
	}
	return f0;
}

/** numpy.rint: round to the nearest integer, ties to even. */
export function roundHalfEven(x: number): number {
	const floor = Math.floor(x);
	const diff = x - floor;
	if (diff < 0.5) return floor;
	if (diff > 0.5) return floor + 1;
	return floor % 2 === 0 ? floor : floor + 1;
}

/** RVC's coarse pitch for the synthesizer's pitch embedding: 1..255 on a mel scale from 50 to 1100 Hz; 1 = unvoiced. */
export function coarsePitch(f0Hz: number): number {
	let mel = f0ToMel(f0Hz);
	if (mel > 0) mel = ((mel - F0_MEL_MIN) * 254) / (F0_MEL_MAX - F0_MEL_MIN) + 1;
	if (!(mel > 1)) mel = 1;
	if (mel > 255) mel = 255;
	return roundHalfEven(mel);
}

export interface SynthesizerPitch {
	/** `pitchf`: f0 in Hz after the key shift (0 where unvoiced). */
	pitchf: Float32Array;
	/** `pitch`: the coarse 1..255 bins. */
	pitch: BigInt64Array;
}

/** Shift f0 by `semitones` (f0 x 2^(semitones/12)) and quantise it, as `Pipeline.get_f0` does. */
export function shiftAndQuantise(f0: Float32Array, semitones: number): SynthesizerPitch {
	const factor = 2 ** (semitones / 12);
	const pitchf = new Float32Array(f0.length);
	const pitch = new BigInt64Array(f0.length);
	for (let i = 0; i < f0.length; i++) {
		const shifted = (f0[i] as number) * factor;
		pitchf[i] = shifted;
		pitch[i] = BigInt(coarsePitch(shifted));
	}
	return { pitchf, pitch };
}
