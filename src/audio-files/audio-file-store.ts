/**
 * D1 access for audio files. Every read and write is scoped to the owning account and skips deleted files, so another
 * account's file (or a deleted one) simply does not exist for the caller. State changes are guarded `UPDATE … WHERE`
 * statements: a race or a replayed request can never apply a change twice or to the wrong state.
 */
import { and, desc, eq, inArray, isNotNull, isNull, lte, notExists, sql } from "drizzle-orm";
import { database } from "../db/client.ts";
import { newestFirstPage, olderThan } from "../db/newest-first-page.ts";
import { audioFiles, voiceConversions } from "../db/schema.ts";
import type { PageCursor } from "../http/page-cursor.ts";
import { audioFileObjectKey, UPLOAD_URL_SECONDS } from "./limits.ts";
import type { AudioFileRow } from "./present-audio-file.ts";
import { timeOrderedId } from "./time-ordered-id.ts";

/** Conversion states in which the source file is still needed. */
const ACTIVE_CONVERSION_STATUSES = ["pending_preprocessing", "queued", "processing"] as const;

const owned = (accountId: string, id: string) =>
	and(eq(audioFiles.id, id), eq(audioFiles.accountId, accountId), isNull(audioFiles.deletedAt));

export async function insertAudioFile(
	env: Env,
	accountId: string,
	input: { fileName: string; mimeType: string },
	now = new Date(),
): Promise<AudioFileRow> {
	// Whole seconds: the signed address carries its expiry in seconds, so `upload_url_expires_at` is then exact.
	const created = new Date(Math.floor(now.getTime() / 1000) * 1000);
	const id = timeOrderedId(now.getTime());
	const row: AudioFileRow = {
		id,
		accountId,
		fileName: input.fileName,
		mimeType: input.mimeType.trim(),
		objectKey: audioFileObjectKey(accountId, id),
		uploadStatus: "awaiting_upload",
		uploadUrlExpiresAt: new Date(created.getTime() + UPLOAD_URL_SECONDS * 1000).toISOString(),
		uploadGeneration: 0,
		uploadedAt: null,
		sizeBytes: null,
		preprocessingStatus: "pending",
		preprocessingErrorCode: null,
		preprocessingError: null,
		format: null,
		sampleRate: null,
		channels: null,
		durationSeconds: null,
		createdAt: created.toISOString(),
		updatedAt: created.toISOString(),
		deletedAt: null,
		objectsRemovedAt: null,
	};
	await database(env).insert(audioFiles).values(row);
	return row;
}

export async function findAudioFile(env: Env, accountId: string, id: string): Promise<AudioFileRow | undefined> {
	return database(env).query.audioFiles.findFirst({ where: owned(accountId, id) });
}

/** One page, newest first; `next` is where the following page starts, or null on the last page. */
export async function listAudioFiles(
	env: Env,
	accountId: string,
	limit: number,
	after: PageCursor | null,
): Promise<{ rows: AudioFileRow[]; next: PageCursor | null }> {
	const rows = await database(env)
		.select()
		.from(audioFiles)
		.where(and(eq(audioFiles.accountId, accountId), isNull(audioFiles.deletedAt), olderThan(audioFiles, after)))
		.orderBy(desc(audioFiles.createdAt), desc(audioFiles.id))
		.limit(limit + 1);
	return newestFirstPage(rows, limit);
}

/** Soft-deletes the file unless a conversion still needs it. Returns the deleted row, or why nothing was deleted. */
export async function deleteAudioFile(
	env: Env,
	accountId: string,
	id: string,
	now = new Date(),
): Promise<{ deleted: AudioFileRow } | { refused: "not_found" | "in_use" }> {
	const db = database(env);
	// One statement: a conversion created between a check and the delete cannot slip through.
	const [deleted] = await db
		.update(audioFiles)
		.set({ deletedAt: now.toISOString(), updatedAt: now.toISOString() })
		.where(
			and(
				owned(accountId, id),
				notExists(
					db
						.select({ id: voiceConversions.id })
						.from(voiceConversions)
						.where(
							and(
								eq(voiceConversions.audioFileId, audioFiles.id),
								inArray(voiceConversions.status, [...ACTIVE_CONVERSION_STATUSES]),
							),
						),
				),
			),
		)
		.returning();
	if (deleted) return { deleted };
	return (await findAudioFile(env, accountId, id)) ? { refused: "in_use" } : { refused: "not_found" };
}

/** Deleted files deleted at or before `before` whose stored objects may remain (oldest first). */
export async function deletedAudioFilesWithObjects(
	env: Pick<Env, "DB">,
	before: string,
	limit: number,
): Promise<Pick<AudioFileRow, "id" | "accountId">[]> {
	return database(env)
		.select({ id: audioFiles.id, accountId: audioFiles.accountId })
		.from(audioFiles)
		.where(and(isNotNull(audioFiles.deletedAt), isNull(audioFiles.objectsRemovedAt), lte(audioFiles.deletedAt, before)))
		.orderBy(audioFiles.deletedAt)
		.limit(limit);
}

export async function markAudioFileObjectsRemoved(env: Pick<Env, "DB">, id: string, now: string): Promise<void> {
	await database(env).update(audioFiles).set({ objectsRemovedAt: now }).where(eq(audioFiles.id, id));
}

/**
 * Starts a new 30-minute upload window, only while the file still awaits its upload (and was not refused). The new
 * generation retires every address handed out before, even one signed in the same second, so a leaked address can
 * be shut at once.
 */
export async function renewUploadWindow(
	env: Env,
	accountId: string,
	id: string,
	now = new Date(),
): Promise<{ renewed: AudioFileRow } | { refused: "not_found" | "already_uploaded" | "upload_refused" }> {
	const start = Math.floor(now.getTime() / 1000) * 1000;
	const [renewed] = await database(env)
		.update(audioFiles)
		.set({
			uploadUrlExpiresAt: new Date(start + UPLOAD_URL_SECONDS * 1000).toISOString(),
			uploadGeneration: sql`${audioFiles.uploadGeneration} + 1`,
			updatedAt: now.toISOString(),
		})
		.where(
			and(
				owned(accountId, id),
				eq(audioFiles.uploadStatus, "awaiting_upload"),
				eq(audioFiles.preprocessingStatus, "pending"),
			),
		)
		.returning();
	if (renewed) return { renewed };
	const file = await findAudioFile(env, accountId, id);
	if (!file) return { refused: "not_found" };
	return { refused: file.uploadStatus === "awaiting_upload" ? "upload_refused" : "already_uploaded" };
}
