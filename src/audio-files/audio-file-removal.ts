/**
 * A deleted audio file's stored bytes: removed right after the deletion is recorded, and, where that failed (R2 or D1
 * unavailable for a moment), by the cron safety net later. Nothing else would ever remove them: files have no
 * expiry, and the row stays (conversions name it).
 */
import { nowIso } from "../db/client.ts";
import { deleteObjectsUnder } from "../storage/staged-uploads.ts";
import { deletedAudioFilesWithObjects, markAudioFileObjectsRemoved } from "./audio-file-store.ts";
import { audioFileObjectKey, UPLOAD_URL_SECONDS } from "./limits.ts";

/**
 * How long after a deletion the safety net first looks: the deleting request removes the objects itself, and an upload
 * still streaming in when the file was deleted removes its own bytes (`upload-hook.ts`), within its address's life.
 */
export const DELETED_AUDIO_SWEEP_AFTER_SECONDS = 2 * UPLOAD_URL_SECONDS;

/** Removes the file's object and any upload the database never took, then records that they are gone. */
export async function removeAudioFileObjects(env: Env, file: { id: string; accountId: string }): Promise<void> {
	await deleteObjectsUnder(env, audioFileObjectKey(file.accountId, file.id));
	await markAudioFileObjectsRemoved(env, file.id, nowIso());
}

/** The safety net's pass: deleted files whose objects a failed removal left. Returns how many it cleared. */
export async function removeObjectsOfDeletedAudioFiles(env: Env, now: Date, limit: number): Promise<number> {
	const before = new Date(now.getTime() - DELETED_AUDIO_SWEEP_AFTER_SECONDS * 1000).toISOString();
	const files = await deletedAudioFilesWithObjects(env, before, limit);
	for (const file of files) await removeAudioFileObjects(env, file);
	return files.length;
}
