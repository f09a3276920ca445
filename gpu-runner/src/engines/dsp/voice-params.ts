/**
 * Per-voice timbre parameters of the `dsp` engine, read from `voice.params`. They are what makes each demo
 * voice sound like a different speaker: the pitch is the job's `semitones`, these shape the rest.
 *
 * | param              | unit      | range     | default | effect                                                   |
 * |--------------------|-----------|-----------|---------|----------------------------------------------------------|
 * | formant_shift      | semitones | -12..12   | 0       | moves the vocal-tract resonances: + smaller/younger, - larger/deeper speaker |
 * | brightness         | dB        | -12..12   | 0       | spectral tilt above ~2 kHz: + crisper, - darker/softer   |
 * | formant_base_hz    | Hz        | 0, 40..1000 | 0     | rough fundamental of the source for formant analysis; 0 = track it |
 * | tonality_limit_hz  | Hz        | 2000..20000 | 8000  | partials above this are treated as noise (keeps sibilants natural) |
 * | pitch_method       | -         | transpose, exact | transpose | how the pitch moves: the library transposing, or time-stretch and resample (exact; README) |
 *
 * Unknown keys are ignored so the catalogue can carry params for other engines or later versions.
 */
import { z } from "zod";

export const DspVoiceParams = z.object({
	formant_shift: z.number().min(-12).max(12).default(0),
	brightness: z.number().min(-12).max(12).default(0),
	formant_base_hz: z.union([z.literal(0), z.number().min(40).max(1000)]).default(0),
	tonality_limit_hz: z.number().min(2000).max(20000).default(8000),
	/**
	 * `transpose`: Signalsmith Stretch transposes (a lone low partial up to 26 cents off); `exact`: the library only
	 * stretches time, then resampling and our envelope stage (`ExactPitchShifter`): exact in pitch, formants kept
	 * closer at most shifts, about 4x slower and less periodic an octave up (README, dsp section).
	 */
	pitch_method: z.enum(["transpose", "exact"]).default("transpose"),
});
export type DspVoiceParams = z.infer<typeof DspVoiceParams>;
