import { and, eq, isNull, lt, or } from "drizzle-orm";
import type { AudioUploadedMessage } from "../contracts/audio-files.ts";
import { database } from "../db/client.ts";
import { audioFiles } from "../db/schema.ts";

/**
 * Sends the message that starts preprocessing. A failed send is logged, not thrown: the upload itself succeeded and
 * the file is recorded as uploaded and `pending`, which `resendStalePreprocessing` (cron) picks up again.
 */
export async function sendAudioUploaded(env: Env, audioFileId: string): Promise<boolean> {
	const body: AudioUploadedMessage = { audio_file_id: audioFileId };
	try {
		await env.AUDIO_UPLOADED_QUEUE.send(body, { contentType: "json" });
		return true;
	} catch (error) {
		console.error(
			JSON.stringify({
				level: "error",
				msg: "could not send audio-uploaded; the cron sweep will resend it",
				audio_file_id: audioFileId,
				error: error instanceof Error ? error.message : String(error),
			}),
		);
		return false;
	}
}

/** Files still `pending` this long after their upload are assumed to have lost their message. */
export const STALE_PENDING_SECONDS = 60;
/**
 * A file `processing` this long was claimed by a consumer that died; it may be claimed again. Probing takes a few
 * range reads (seconds at most), and this is shorter than the ~62 s a message spends in its retries (2+4+8+16+32 s),
 * so a redelivered message takes over an abandoned claim before it could be dead-lettered.
 */
export const STALE_PROCESSING_SECONDS = 45;

/**
 * Safety net for the cron: re-sends `audio-uploaded` for uploaded files still `pending` after a minute (the send
 * failed, or the message was lost) or stuck in `processing` (the consumer died). Duplicates are harmless: the
 * consumer's guarded claim lets only one through.
 */
export async function resendStalePreprocessing(env: Env, now = new Date(), limit = 100): Promise<number> {
	const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000).toISOString();
	const stale = await database(env)
		.select({ id: audioFiles.id })
		.from(audioFiles)
		.where(
			and(
				eq(audioFiles.uploadStatus, "uploaded"),
				isNull(audioFiles.deletedAt),
				or(
					and(eq(audioFiles.preprocessingStatus, "pending"), lt(audioFiles.updatedAt, ago(STALE_PENDING_SECONDS))),
					and(
						eq(audioFiles.preprocessingStatus, "processing"),
						lt(audioFiles.updatedAt, ago(STALE_PROCESSING_SECONDS)),
					),
				),
			),
		)
		.limit(limit);
	let sent = 0;
	for (const { id } of stale) if (await sendAudioUploaded(env, id)) sent++;
	return sent;
}
