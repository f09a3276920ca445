/** Voice conversion resource: request, response and list shapes (spec sections 2 and 4). */
import { z } from "zod";
import { Id, PageLimit, Timestamp } from "./common.ts";

/** The spec's pitch table: value → semitones. */
export const PITCH_SHIFT_SEMITONES = {
	same_octave: 0,
	third_down: -4,
	third_up: 4,
	fifth_down: -7,
	fifth_up: 7,
	lower_octave: -12,
	higher_octave: 12,
} as const;
export type PitchShift = keyof typeof PITCH_SHIFT_SEMITONES;
export const PITCH_SHIFTS = Object.keys(PITCH_SHIFT_SEMITONES) as [PitchShift, ...PitchShift[]];

/**
 * What a conversion may ask for: a value of the pitch table, or `auto`, which lets the runner pick among them the
 * shift that brings the source's median pitch closest to the voice's pitch range.
 */
export const REQUESTED_PITCH_SHIFTS = [...PITCH_SHIFTS, "auto"] as const;
export type RequestedPitchShift = (typeof REQUESTED_PITCH_SHIFTS)[number];

export const F0_METHODS = ["rmvpe", "yin"] as const;

const numberIn = (min: number, max: number) =>
	z
		.number({ error: () => `must be a number from ${min} to ${max}` })
		.min(min, `must be a number from ${min} to ${max}`)
		.max(max, `must be a number from ${min} to ${max}`);

/**
 * Per-conversion overrides of the voice's defaults. Each one must be a setting the voice's engine can honour
 * (checked against the voice when the conversion is created): `formant_shift` for `dsp` voices (any value) and
 * `rvc` voices (0 only); the others for `rvc` voices only, `index_rate` and `protect` only with a feature index,
 * `protect` and `f0_method` only on a model that takes pitch.
 */
export const VoiceSettings = z
	.strictObject(
		{
			index_rate: numberIn(0, 1)
				.optional()
				.meta({
					description:
						"rvc voices with a feature index: share of each frame's features replaced by the index's nearest " +
						"training features (0 keeps them, 1 replaces them). Voice default, else 0.75.",
				}),
			protect: numberIn(0, 0.5)
				.optional()
				.meta({
					description:
						"rvc voices with a feature index and a model that takes pitch: where the source is unvoiced " +
						"(consonants, breaths), the share of the index blend kept; 0.5 turns protection off. Voice default, else 0.33.",
				}),
			rms_mix_rate: numberIn(0, 1).optional().meta({
				description:
					"rvc voices: 1 keeps the converted loudness envelope, 0 imposes the source's. Voice default, else 0.25.",
			}),
			formant_shift: numberIn(-12, 12)
				.optional()
				.meta({
					description:
						"Semitones to move the vocal-tract resonances (+ smaller, - larger speaker). dsp voices: any value " +
						"(replaces the voice's own); rvc voices: 0 only.",
				}),
			f0_method: z
				.enum(F0_METHODS, { error: () => `must be one of: ${F0_METHODS.join(", ")}` })
				.optional()
				.meta({
					description:
						"rvc voices: pitch tracker, `rmvpe` (RVC's model, the default) or `yin` (built in, no model file).",
				}),
		},
		{
			error: (issue) => (issue.code === "unrecognized_keys" ? `unknown setting: ${issue.keys.join(", ")}` : undefined),
		},
	)
	.meta({
		description:
			"Overrides of the voice's defaults for this conversion. A setting the voice's engine cannot honour is " +
			"refused with 400 `unsupported_voice_setting`.",
	});
export type VoiceSettings = z.infer<typeof VoiceSettings>;

export const CONVERSION_STATUS_VALUES = [
	"pending_preprocessing",
	"queued",
	"processing",
	"completed",
	"failed",
] as const;

/** Preview mode converts only this many seconds from the start. */
export const PREVIEW_SECONDS = 10;

/** How long a GET of a completed conversion keeps its `output_url` valid. */
export const OUTPUT_URL_SECONDS = 12 * 3600;

const listOf = (values: readonly string[]) => values.join(", ");

export const CreateConversionBody = z.object({
	audio_file_id: Id,
	voice_model_id: Id,
	pitch_shift: z
		.enum(REQUESTED_PITCH_SHIFTS, { error: () => `must be one of: ${listOf(REQUESTED_PITCH_SHIFTS)}` })
		.default("same_octave")
		.meta({
			description:
				"A pitch table value, or `auto`: the runner picks, among the table's seven values, the shift that brings " +
				"the source's median pitch closest to the voice's pitch range (voices without a range refuse it with 400); " +
				"the choice is reported as `pitch_shift_applied`.",
		}),
	use_preview: z.boolean({ error: () => "must be true or false" }).default(false),
	voice_settings: VoiceSettings.nullable().optional(),
});
export type CreateConversionBody = z.infer<typeof CreateConversionBody>;

export const VoiceConversion = z.object({
	id: Id,
	audio_file_id: Id,
	audio_file_name: z.string(),
	voice_model_id: Id,
	voice_model_name: z.string(),
	pitch_shift: z.enum(REQUESTED_PITCH_SHIFTS),
	/**
	 * The pitch table value applied: equal to `pitch_shift`, except for `auto`, where it is null until the
	 * conversion completes and then the value the runner chose.
	 */
	pitch_shift_applied: z.enum(PITCH_SHIFTS).nullable().meta({
		description:
			"The pitch table value applied: `pitch_shift` itself, or for `auto` null until completed, then the value chosen.",
	}),
	use_preview: z.boolean(),
	/** The overrides given at creation; null when none were. */
	voice_settings: VoiceSettings.nullable(),
	status: z.enum(CONVERSION_STATUS_VALUES),
	/** Null until `completed`; then a fresh pre-signed GET valid 12 hours on every read. */
	output_url: z.url().nullable().meta({
		description:
			"Null until completed; then a fresh pre-signed GET of the WAV, valid 12 hours, on every read. It supports Range requests, and a browser saves it as `<conversion id>.wav`.",
	}),
	created_at: Timestamp,
	queued_at: Timestamp.nullable(),
	processing_started_at: Timestamp.nullable(),
	completed_at: Timestamp.nullable(),
	/** Set when the conversion failed, in words meant for the client. */
	error_message: z.string().nullable().meta({
		description:
			"Why the conversion failed, naming one cause: corrupted source audio (undecodable or cut-short data, contradictory header values, NaN or infinite samples in a float WAV, or audio that decodes to another length than the file states), unsupported format (not WAV, MP3 or FLAC, another WAV encoding, a sample rate outside 4,000 to 768,000 Hz or more than 32 channels), a file over 100 MB or empty, an output that would be over 2 GiB as a WAV (about 3 h 22 min of 44.1 kHz stereo), or an internal error (the worker stopped responding on every attempt among them); or the source never arrived (deleted, missing from storage, not uploaded before its upload address expired), or the conversion waited past the deployment's time limit with no worker on it (see the API description). Null unless failed.",
	}),
});
export type VoiceConversion = z.infer<typeof VoiceConversion>;

/** Section 6 `data.conversion`: exactly these fields of the conversion (an allow-list: never `output_url`). */
export const CONVERSION_EVENT_FIELDS = [
	"id",
	"status",
	"audio_file_id",
	"audio_file_name",
	"voice_model_id",
	"voice_model_name",
	"pitch_shift",
	"pitch_shift_applied",
	"use_preview",
	"voice_settings",
	"queued_at",
	"processing_started_at",
	"completed_at",
] as const;

const pickMask = <K extends string>(keys: readonly K[]) =>
	Object.fromEntries(keys.map((key) => [key, true])) as { [P in K]: true };

/** `data.conversion` of the `conversion.completed` / `conversion.failed` events, plus `error_message` on failure. */
export const ConversionEventData = VoiceConversion.pick(pickMask(CONVERSION_EVENT_FIELDS)).extend({
	status: z.enum(["completed", "failed"]),
	error_message: z.string().optional(),
});
export type ConversionEventData = z.infer<typeof ConversionEventData>;

export const ListConversionsQuery = z.object({
	status: z
		.enum(CONVERSION_STATUS_VALUES, { error: () => `must be one of: ${listOf(CONVERSION_STATUS_VALUES)}` })
		.optional(),
	limit: PageLimit,
	cursor: z.string().max(200).optional(),
});

export const ConversionPage = z.object({
	success: z.literal(true),
	data: z.array(VoiceConversion),
	/** Pass as `cursor` to get the next (older) page; null on the last page. */
	next_cursor: z.string().nullable(),
});
