/** Voice conversion resource: request, response and list shapes (spec sections 2 and 4). */
import { z } from "zod";
import { Id, Timestamp } from "./common.ts";

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
	pitch_shift: z.enum(PITCH_SHIFTS, { error: () => `must be one of: ${listOf(PITCH_SHIFTS)}` }).default("same_octave"),
	use_preview: z.boolean({ error: () => "must be true or false" }).default(false),
});
export type CreateConversionBody = z.infer<typeof CreateConversionBody>;

export const VoiceConversion = z.object({
	id: Id,
	audio_file_id: Id,
	audio_file_name: z.string(),
	voice_model_id: Id,
	voice_model_name: z.string(),
	pitch_shift: z.enum(PITCH_SHIFTS),
	use_preview: z.boolean(),
	status: z.enum(CONVERSION_STATUS_VALUES),
	/** Null until `completed`; then a fresh pre-signed GET valid 12 hours on every read. */
	output_url: z.url().nullable(),
	created_at: Timestamp,
	queued_at: Timestamp.nullable(),
	processing_started_at: Timestamp.nullable(),
	completed_at: Timestamp.nullable(),
	/** Set when the conversion failed, in words meant for the client. */
	error_message: z.string().nullable().meta({
		description:
			"Why the conversion failed, naming one cause: corrupted source audio (undecodable or cut-short data, contradictory header values, NaN or infinite samples in a float WAV, or audio that decodes to another length than the file states), unsupported format (not WAV, MP3 or FLAC, another WAV encoding, a sample rate outside 4,000 to 768,000 Hz or more than 32 channels), a file over 100 MB or empty, or an internal error; or the source never arrived (deleted, missing from storage, not uploaded before its upload address expired), or the conversion waited past the deployment's time limit with no worker on it (see the API description). Null unless failed.",
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
	"use_preview",
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
	limit: z.coerce
		.number({ error: () => "must be an integer from 1 to 100" })
		.int("must be an integer from 1 to 100")
		.min(1, "must be an integer from 1 to 100")
		.max(100, "must be an integer from 1 to 100")
		.default(20),
	cursor: z.string().max(200).optional(),
});

export const ConversionPage = z.object({
	success: z.literal(true),
	data: z.array(VoiceConversion),
	/** Pass as `cursor` to get the next (older) page; null on the last page. */
	next_cursor: z.string().nullable(),
});
