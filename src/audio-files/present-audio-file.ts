import type { AudioFile } from "../contracts/audio-files.ts";
import type { audioFiles } from "../db/schema.ts";
import { signStorageUrl } from "../storage/signed-url.ts";
import { MAX_AUDIO_FILE_BYTES } from "./limits.ts";

export type AudioFileRow = typeof audioFiles.$inferSelect;

/**
 * The upload address of a file still awaiting its bytes. It is signed for the stored expiry, so every read of the
 * file returns the same address until it is regenerated: the exact registered type, the size limit and the address's
 * generation (which makes every earlier address of the file useless once it is regenerated) are signed in.
 */
export function signUploadUrl(env: Env, origin: string, row: AudioFileRow): Promise<string> {
	return signStorageUrl(env, origin, {
		method: "PUT",
		key: row.objectKey,
		expiresAt: new Date(row.uploadUrlExpiresAt),
		contentType: row.mimeType,
		maxBytes: MAX_AUDIO_FILE_BYTES,
		generation: row.uploadGeneration,
	});
}

/** Awaiting its bytes, and not refused already (an upload over the size limit ends the file). */
const acceptsUpload = (row: AudioFileRow) =>
	row.uploadStatus === "awaiting_upload" && row.preprocessingStatus === "pending";

export async function presentAudioFile(env: Env, origin: string, row: AudioFileRow): Promise<AudioFile> {
	return {
		id: row.id,
		file_name: row.fileName,
		mime_type: row.mimeType,
		upload_status: row.uploadStatus,
		upload_url: acceptsUpload(row) ? await signUploadUrl(env, origin, row) : null,
		upload_url_expires_at: row.uploadUrlExpiresAt,
		created_at: row.createdAt,
		uploaded_at: row.uploadedAt,
		size_bytes: row.sizeBytes,
		preprocessing_status: row.preprocessingStatus,
		preprocessing_error_code: row.preprocessingErrorCode,
		preprocessing_error: row.preprocessingError,
		format: row.format,
		sample_rate: row.sampleRate,
		channels: row.channels,
		duration_seconds: row.durationSeconds,
	};
}
