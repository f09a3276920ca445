/**
 * Audio files: the spec's fields (section 2) plus what preprocessing learns. `upload_status` keeps the spec's values;
 * preprocessing has its own status so clients can see a file become usable (or why it cannot be).
 */
import { z } from "zod";
import { Id, Timestamp } from "./common.ts";

/**
 * Limit of source audio. The spec says "under 100 MB"; we read MB as 10^6 bytes (the stricter reading, so a file we
 * accept is under 100 MB in either sense): an upload must be at most 99,999,999 bytes.
 */
export const MAX_AUDIO_FILE_BYTES = 100_000_000;

/** Accepted `mime_type` values (compared case-insensitively): WAV, MP3 and FLAC types and their common aliases. */
export const ACCEPTED_MIME_TYPES = [
	"audio/wav",
	"audio/x-wav",
	"audio/wave",
	"audio/vnd.wave",
	"audio/x-pn-wav",
	"audio/mpeg",
	"audio/mp3",
	"audio/x-mp3",
	"audio/mpeg3",
	"audio/x-mpeg",
	"audio/x-mpeg-3",
	"audio/mpg",
	"audio/flac",
	"audio/x-flac",
] as const;

export const isAcceptedMimeType = (value: string) =>
	(ACCEPTED_MIME_TYPES as readonly string[]).includes(value.trim().toLowerCase());

// biome-ignore lint/suspicious/noControlCharactersInRegex: the point is to refuse control characters
export const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

export const RegisterAudioFileBody = z.object({
	file_name: z
		.string()
		.min(1, "must be 1 to 255 characters")
		.max(255, "must be 1 to 255 characters")
		.refine((name) => name.trim().length > 0, "must not be blank")
		.refine((name) => !CONTROL_CHARACTERS.test(name), "must not contain control characters"),
	mime_type: z.string().refine(isAcceptedMimeType, {
		message: `must be a WAV, MP3 or FLAC type: one of ${ACCEPTED_MIME_TYPES.join(", ")}`,
	}),
});
export type RegisterAudioFileBody = z.infer<typeof RegisterAudioFileBody>;

export const UploadStatus = z.enum(["awaiting_upload", "uploaded"]);
export const PreprocessingStatus = z.enum(["pending", "processing", "ready", "failed"]);

export const AudioFile = z.object({
	id: Id,
	file_name: z.string(),
	mime_type: z.string(),
	upload_status: UploadStatus,
	/** Signed PUT address while the file awaits its upload; null once uploaded, or once an upload was refused. */
	upload_url: z.url().nullable(),
	upload_url_expires_at: Timestamp,
	created_at: Timestamp,
	uploaded_at: Timestamp.nullable(),
	/** Size of the uploaded bytes. */
	size_bytes: z.number().int().nonnegative().nullable(),
	/**
	 * `pending` until the upload is preprocessed; then `processing`, and `ready` or `failed`. Also `failed` (code
	 * `too_large`) when an upload of 100 MB or more was refused: that ends the file, which accepts no further upload.
	 */
	preprocessing_status: PreprocessingStatus,
	/** Stable reason code when preprocessing failed: empty_file, truncated, corrupted, unsupported_format, zero_duration, too_large, missing_object, internal_error. */
	preprocessing_error_code: z.string().nullable().meta({
		description:
			"Why preprocessing refused the file: empty_file, truncated (cut short), corrupted (contradictory header values such as 0 channels), unsupported_format (not WAV, MP3 or FLAC, or a sample rate outside 4,000 to 768,000 Hz, or more than 32 channels), zero_duration, too_large, missing_object, internal_error. Null unless failed.",
	}),
	/** Why preprocessing failed, in words. */
	preprocessing_error: z.string().nullable(),
	/** Format found from the bytes (not the claimed type). */
	format: z.enum(["wav", "flac", "mp3"]).nullable(),
	sample_rate: z.number().int().positive().nullable(),
	channels: z.number().int().positive().nullable(),
	duration_seconds: z.number().positive().nullable().meta({
		description:
			"The audio the file holds, as a decoder finds it (an MP3 cut short reports the frames it still has); a completed full conversion lasts exactly this long.",
	}),
});
export type AudioFile = z.infer<typeof AudioFile>;

export const AudioFileList = z.object({
	success: z.literal(true),
	data: z.array(AudioFile),
	/** Pass as `cursor` to get the next page; null on the last page. */
	next_cursor: z.string().nullable(),
});

export const DeletedAudioFile = z.object({ id: Id, deleted: z.literal(true) });

/** Body of an `audio-uploaded` queue message. */
export const AudioUploadedMessage = z.object({ audio_file_id: Id });
export type AudioUploadedMessage = z.infer<typeof AudioUploadedMessage>;
