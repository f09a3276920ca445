/**
 * `pitch_shift: "auto"`: measure the source's median pitch, then pick, among the pitch table's seven values, the
 * shift that brings it closest to the voice's typical range. "Closest" is the distance in semitones from the
 * shifted median to the range's centre (its geometric mean), so a shift that lands inside the range always beats
 * one that lands outside it; a tie goes to the smaller shift.
 *
 * The measurement decodes the source a second time, at 16 kHz mono, through the YIN tracker the rvc engine uses
 * for `f0_method: yin` (pure TypeScript, no model file), over at most the first `PITCH_ANALYSIS_SECONDS`: a
 * song's or a speaker's register shows well within that, and a long source costs no more than that to measure.
 */
import type { VoiceDescriptor } from "../../../src/contracts/runner.ts";
import { PITCH_SHIFT_SEMITONES, PITCH_SHIFTS, type PitchShift } from "../../../src/contracts/voice-conversions.ts";
import { convertToFormat } from "../audio/format-conversion.ts";
import { type AudioBlock, framesFor, joinSamples, takeFrames } from "../audio/pcm.ts";
import { trackPitchYin } from "../engines/rvc/yin-pitch.ts";

export const PITCH_ANALYSIS_SECONDS = 120;
const ANALYSIS_RATE = 16_000;
const HOP = 160;

export interface PitchProfile {
	medianHz: number;
	/** The 10th and 90th percentiles: the typical range, leaving out stray frames at either end. */
	lowHz: number;
	highHz: number;
}

/** f0 statistics over the voiced 10 ms frames of the first `maxSeconds`, or null when no frame is voiced. */
export async function measurePitch(
	blocks: AsyncIterable<AudioBlock>,
	maxSeconds = PITCH_ANALYSIS_SECONDS,
): Promise<PitchProfile | null> {
	const mono = takeFrames(
		convertToFormat(blocks, { sampleRate: ANALYSIS_RATE, channels: 1 }),
		framesFor(maxSeconds, ANALYSIS_RATE),
	);
	const parts: Float32Array[] = [];
	for await (const block of mono) parts.push(block.channels[0] ?? new Float32Array(0));
	const samples = joinSamples(parts);
	const f0 = trackPitchYin(samples, Math.floor(samples.length / HOP), ANALYSIS_RATE, HOP);
	const voiced = Float32Array.from(f0.filter((hz) => hz > 0)).sort();
	if (voiced.length === 0) return null;
	return { medianHz: quantile(voiced, 0.5), lowHz: quantile(voiced, 0.1), highHz: quantile(voiced, 0.9) };
}

/** Linear interpolation between the closest ranks of sorted `values`. */
function quantile(values: Float32Array, q: number): number {
	const position = q * (values.length - 1);
	const below = Math.floor(position);
	const above = Math.min(values.length - 1, below + 1);
	const weight = position - below;
	return (values[below] as number) * (1 - weight) + (values[above] as number) * weight;
}

/**
 * The pitch table value for `auto`. `offsetSemitones` is what the engine adds to every shift for this voice (an rvc
 * voice's `transpose_semitones`), so the choice is made on the pitch that comes out. Without a measured pitch or a
 * range there is nothing to aim at: `same_octave`.
 */
export function chooseAutoPitchShift(
	medianHz: number | null,
	range: VoiceDescriptor["pitch_range_hz"],
	offsetSemitones = 0,
): PitchShift {
	if (medianHz === null || !range) return "same_octave";
	const centreHz = Math.sqrt(range.low * range.high);
	const distance = (shift: PitchShift) =>
		Math.abs(Math.log2(medianHz / centreHz) * 12 + PITCH_SHIFT_SEMITONES[shift] + offsetSemitones);
	let best: PitchShift = "same_octave";
	for (const shift of PITCH_SHIFTS) {
		const closer = distance(shift) < distance(best) - 1e-9;
		const asCloseAndSmaller =
			Math.abs(distance(shift) - distance(best)) <= 1e-9 &&
			Math.abs(PITCH_SHIFT_SEMITONES[shift]) < Math.abs(PITCH_SHIFT_SEMITONES[best]);
		if (closer || asCloseAndSmaller) best = shift;
	}
	return best;
}
