/**
 * A voice's typical pitch range, measured from its sample with the runner's own decoder and pitch tracker (the
 * same measurement `pitch_shift: "auto"` makes of a source): the 10th to 90th percentile of the voiced frames.
 */
import { decodeSource } from "../../gpu-runner/src/audio/decode-source.ts";
import { measurePitch } from "../../gpu-runner/src/pipeline/auto-pitch.ts";

/** Null when the sample has no voiced frame to measure. */
export async function samplePitchRange(bytes: Uint8Array): Promise<{ low: number; high: number } | null> {
	const profile = await measurePitch(
		decodeSource(
			(async function* () {
				yield bytes;
			})(),
		),
	);
	if (!profile) return null;
	const tenth = (hz: number) => Math.round(hz * 10) / 10;
	return { low: tenth(profile.lowHz), high: tenth(profile.highHz) };
}
