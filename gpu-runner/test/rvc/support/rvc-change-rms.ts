/**
 * RVC's `change_rms` (`infer/modules/vc/pipeline.py`) transcribed for a whole file at once, as the reference the
 * engine's streaming `StreamingLoudnessMix` is checked against (see `loudness-mix.ts` for the definition).
 */

/** RMS per frame of `frameLength` samples every `hop`, frames centred on multiples of `hop` (zero padded). */
function rmsFrames(samples: Float32Array, sampleRate: number): Float64Array {
	const frameLength = Math.floor(sampleRate / 2) * 2;
	const hop = Math.floor(sampleRate / 2);
	const count = 1 + Math.floor(samples.length / hop);
	// Prefix sums of squares make each frame O(1).
	const prefix = new Float64Array(samples.length + 1);
	for (let i = 0; i < samples.length; i++) prefix[i + 1] = (prefix[i] as number) + (samples[i] as number) ** 2;
	const rms = new Float64Array(count);
	const half = frameLength / 2;
	for (let t = 0; t < count; t++) {
		const start = Math.max(0, t * hop - half);
		const end = Math.min(samples.length, t * hop - half + frameLength);
		const energy = end > start ? (prefix[end] as number) - (prefix[start] as number) : 0;
		rms[t] = Math.sqrt(Math.max(0, energy) / frameLength);
	}
	return rms;
}

/** `values` linearly interpolated to `length` points as torch's `F.interpolate(mode="linear")` does. */
function interpolate(values: Float64Array, length: number): Float64Array {
	const out = new Float64Array(length);
	const scale = values.length / length;
	const last = values.length - 1;
	for (let i = 0; i < length; i++) {
		const position = Math.max(0, (i + 0.5) * scale - 0.5);
		const i0 = Math.min(Math.floor(position), last);
		const i1 = Math.min(i0 + 1, last);
		const lambda = position - i0;
		out[i] = (values[i0] as number) * (1 - lambda) + (values[i1] as number) * lambda;
	}
	return out;
}

/** Applies `rms_mix_rate` to `output` in place; `source` is the same stretch of audio at `sourceRate`. */
export function changeRms(
	source: Float32Array,
	sourceRate: number,
	output: Float32Array,
	outputRate: number,
	rate: number,
): void {
	if (rate === 1 || output.length === 0) return;
	const sourceEnvelope = interpolate(rmsFrames(source, sourceRate), output.length);
	const outputEnvelope = interpolate(rmsFrames(output, outputRate), output.length);
	for (let i = 0; i < output.length; i++) {
		const gain =
			(sourceEnvelope[i] as number) ** (1 - rate) * Math.max(outputEnvelope[i] as number, 1e-6) ** (rate - 1);
		output[i] = (output[i] as number) * gain;
	}
}
