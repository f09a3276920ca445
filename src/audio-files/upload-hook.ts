/**
 * What a signed PUT of an audio file does around the bytes. Before: refuse a second upload, an upload to a deleted
 * file or to one whose upload was refused, or one through an address that `regenerate-upload-url` has replaced, before
 * a byte is stored. After: the bytes are in an object of their own (`stagedUploadKey`); make it the file's object and
 * mark the file uploaded (guarded, so of two racing uploads exactly one wins, and the other's object is deleted), and
 * send `audio-uploaded`, which starts preprocessing. Refused for its size: record the refusal on the file as its
 * preprocessing outcome, so the conversions waiting on it fail at once with that reason.
 */
import { and, eq, isNull } from "drizzle-orm";
import { database } from "../db/client.ts";
import { audioFiles } from "../db/schema.ts";
import { ApiError, conflict, forbidden } from "../http/errors.ts";
import type { StorageGrant } from "../storage/signed-url.ts";
import { audioFileIdFromKey, audioFileObjectKey } from "./limits.ts";
import { notifyPreprocessingListeners, outcomeOf } from "./preprocessing-listeners.ts";
import { sendAudioUploaded } from "./send-audio-uploaded.ts";

const alreadyUploaded = () =>
	conflict(
		"already_uploaded",
		"This audio file has already been uploaded; its bytes cannot be replaced. Register a new audio file to upload other audio.",
	);
const deletedFile = () => new ApiError(410, "audio_file_deleted", "This audio file was deleted; register a new one");
const supersededAddress = () =>
	forbidden(
		"upload_url_superseded",
		"This upload address was replaced by a newer one (regenerate-upload-url); upload to the file's current upload_url",
	);
const refusedFile = (reason: string | null) =>
	conflict(
		"upload_refused",
		`This audio file's upload was refused (${reason ?? "see the audio file"}); register a new audio file to upload other audio.`,
	);

/** The file a signed upload key names (its key at registration; once uploaded, its object is another key). */
async function rowForKey(env: Env, key: string) {
	const id = audioFileIdFromKey(key);
	if (!id) return undefined;
	const row = await database(env).query.audioFiles.findFirst({ where: eq(audioFiles.id, id) });
	return row && audioFileObjectKey(row.accountId, row.id) === key ? row : undefined;
}

export async function beforeAudioUpload(env: Env, grant: StorageGrant): Promise<void> {
	const row = await rowForKey(env, grant.key);
	if (!row) throw new ApiError(404, "not_found", "No audio file is registered for this upload address");
	if (row.deletedAt) throw deletedFile();
	if (row.uploadStatus !== "awaiting_upload") throw alreadyUploaded();
	if (row.preprocessingStatus === "failed") throw refusedFile(row.preprocessingError);
	if (grant.generation !== row.uploadGeneration) throw supersededAddress();
}

/**
 * An upload refused for its size (413) ends the file: it can never hold that audio, and a client that waits on it
 * (a conversion created before the upload) learns why now instead of when the upload window closes. Guarded, so only
 * a file still awaiting its first upload is marked, once, and only through its current address.
 */
export async function refuseOversizedAudio(env: Env, grant: StorageGrant, declaredBytes: number, now = new Date()) {
	const key = grant.key;
	const [refused] = await database(env)
		.update(audioFiles)
		.set({
			preprocessingStatus: "failed",
			preprocessingErrorCode: "too_large",
			preprocessingError: `File over 100 MB: the upload declared ${declaredBytes} bytes, and files must be under 100 MB`,
			updatedAt: now.toISOString(),
		})
		.where(
			and(
				eq(audioFiles.id, audioFileIdFromKey(key) ?? ""),
				eq(audioFiles.objectKey, key),
				eq(audioFiles.uploadStatus, "awaiting_upload"),
				eq(audioFiles.preprocessingStatus, "pending"),
				eq(audioFiles.uploadGeneration, grant.generation ?? 0),
				isNull(audioFiles.deletedAt),
			),
		)
		.returning();
	const outcome = refused && outcomeOf(refused);
	if (outcome) await notifyPreprocessingListeners(env, outcome);
}

export async function afterAudioUpload(
	env: Env,
	grant: StorageGrant,
	object: R2Object,
	now = new Date(),
): Promise<void> {
	const key = grant.key;
	const id = audioFileIdFromKey(key) ?? "";
	const [marked] = await database(env)
		.update(audioFiles)
		.set({
			objectKey: object.key,
			uploadStatus: "uploaded",
			uploadedAt: now.toISOString(),
			sizeBytes: object.size,
			preprocessingStatus: "pending",
			updatedAt: now.toISOString(),
		})
		.where(
			and(
				eq(audioFiles.id, id),
				eq(audioFiles.objectKey, key),
				eq(audioFiles.uploadStatus, "awaiting_upload"),
				eq(audioFiles.uploadGeneration, grant.generation ?? 0),
				isNull(audioFiles.deletedAt),
			),
		)
		.returning({ id: audioFiles.id });
	if (!marked) {
		// Not the file's: these bytes go, whatever kept them out.
		await env.BUCKET.delete(object.key);
		const row = await rowForKey(env, key);
		// Deleted while the bytes were streaming in.
		if (row?.deletedAt) throw deletedFile();
		// Regenerated while these bytes streamed in: the newest address uploads.
		if (row?.uploadStatus === "awaiting_upload") throw supersededAddress();
		// Another upload to the same address finished first; its bytes are the file's.
		throw alreadyUploaded();
	}
	await sendAudioUploaded(env, id);
}
