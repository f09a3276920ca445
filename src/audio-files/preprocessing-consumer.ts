/**
 * The `audio-uploaded` consumer: probes an uploaded file and records what it is, then tells the preprocessing
 * listeners. Every state change is a guarded UPDATE (`pending → processing → ready | failed`), so a duplicate or late
 * message changes nothing; it only repeats the (idempotent) listener call for an outcome already recorded, which
 * also repairs a run that recorded its outcome but died before notifying.
 *
 * Acked: done, a file that no longer exists or was deleted, a malformed message, a failure of the file itself
 * (recorded on the file). Retried (thrown): R2 or D1 errors, a listener error, a file another consumer is probing.
 */
import { and, eq, lt, or } from "drizzle-orm";
import { AudioUploadedMessage } from "../contracts/audio-files.ts";
import { database } from "../db/client.ts";
import { audioFiles } from "../db/schema.ts";
import { notifyPreprocessingListeners, outcomeOf } from "./preprocessing-listeners.ts";
import { type ProbeResult, type ProbeStats, probeAudio } from "./probe/probe-audio.ts";
import { r2ByteSource } from "./r2-byte-source.ts";
import { STALE_PROCESSING_SECONDS } from "./send-audio-uploaded.ts";

const log = (level: "info" | "warn" | "error", msg: string, fields: Record<string, unknown>) =>
	console[level === "info" ? "log" : level](JSON.stringify({ level, msg, ...fields }));

/** Takes the file from `pending` (or from a `processing` claim abandoned long ago) to `processing`. */
async function claim(env: Env, id: string, now: Date): Promise<boolean> {
	const abandoned = new Date(now.getTime() - STALE_PROCESSING_SECONDS * 1000).toISOString();
	const [claimed] = await database(env)
		.update(audioFiles)
		.set({ preprocessingStatus: "processing", updatedAt: now.toISOString() })
		.where(
			and(
				eq(audioFiles.id, id),
				eq(audioFiles.uploadStatus, "uploaded"),
				or(
					eq(audioFiles.preprocessingStatus, "pending"),
					and(eq(audioFiles.preprocessingStatus, "processing"), lt(audioFiles.updatedAt, abandoned)),
				),
			),
		)
		.returning({ id: audioFiles.id });
	return claimed !== undefined;
}

async function record(env: Env, id: string, result: ProbeResult, sizeBytes: number | null, now: Date) {
	const fields = result.ok
		? {
				preprocessingStatus: "ready" as const,
				format: result.format,
				sampleRate: result.sampleRate,
				channels: result.channels,
				durationSeconds: result.durationSeconds,
				preprocessingErrorCode: null,
				preprocessingError: null,
			}
		: {
				preprocessingStatus: "failed" as const,
				preprocessingErrorCode: result.code,
				preprocessingError: result.message,
			};
	const [row] = await database(env)
		.update(audioFiles)
		.set({ ...fields, ...(sizeBytes === null ? {} : { sizeBytes }), updatedAt: now.toISOString() })
		.where(and(eq(audioFiles.id, id), eq(audioFiles.preprocessingStatus, "processing")))
		.returning();
	return row;
}

/** Gives a claim back after an I/O error so the retried message can claim it again at once. */
async function release(env: Env, id: string, now: Date): Promise<void> {
	await database(env)
		.update(audioFiles)
		.set({ preprocessingStatus: "pending", updatedAt: now.toISOString() })
		.where(and(eq(audioFiles.id, id), eq(audioFiles.preprocessingStatus, "processing")));
}

export async function preprocessAudioFile(env: Env, audioFileId: string, now = () => new Date()): Promise<void> {
	const db = database(env);
	const row = await db.query.audioFiles.findFirst({ where: eq(audioFiles.id, audioFileId) });
	if (!row || row.deletedAt || row.uploadStatus !== "uploaded") {
		log("warn", "audio-uploaded for a file that is gone or not uploaded; ignored", { audio_file_id: audioFileId });
		return;
	}
	const known = outcomeOf(row);
	if (known) return notifyPreprocessingListeners(env, known);
	if (!(await claim(env, audioFileId, now()))) {
		const current = await db.query.audioFiles.findFirst({ where: eq(audioFiles.id, audioFileId) });
		const finished = current && outcomeOf(current);
		if (finished) return notifyPreprocessingListeners(env, finished);
		// Another consumer holds a fresh claim: try again later rather than probing twice at once.
		throw new Error(`audio file ${audioFileId} is being preprocessed by another consumer`);
	}

	let result: ProbeResult;
	let size: number | null = null;
	const stats: ProbeStats = { reads: 0, bytesFetched: 0 };
	try {
		const source = await r2ByteSource(env.BUCKET, row.objectKey);
		size = source?.size ?? null;
		result = source
			? await probeAudio(source, stats)
			: { ok: false, code: "missing_object", message: "The uploaded bytes are missing from storage; upload again" };
	} catch (error) {
		await release(env, audioFileId, now());
		throw error;
	}
	const recorded = await record(env, audioFileId, result, size, now());
	log("info", "audio file preprocessed", {
		audio_file_id: audioFileId,
		outcome: result.ok ? "ready" : "failed",
		...(result.ok ? { codec: result.codec, duration_seconds: result.durationSeconds } : { error_code: result.code }),
		range_reads: stats.reads,
		bytes_read: stats.bytesFetched,
	});
	const outcome = recorded && outcomeOf(recorded);
	if (outcome) await notifyPreprocessingListeners(env, outcome);
}

/**
 * A message that exhausted its retries (R2 or D1 kept failing): the file is failed with `internal_error` so that it and
 * the conversions waiting on it do not stay pending forever.
 */
export async function failUndeliverable(env: Env, audioFileId: string, now = new Date()): Promise<void> {
	const [row] = await database(env)
		.update(audioFiles)
		.set({
			preprocessingStatus: "failed",
			preprocessingErrorCode: "internal_error",
			preprocessingError:
				"The audio file could not be preprocessed because of an internal error; please upload it again",
			updatedAt: now.toISOString(),
		})
		.where(
			and(
				eq(audioFiles.id, audioFileId),
				or(eq(audioFiles.preprocessingStatus, "pending"), eq(audioFiles.preprocessingStatus, "processing")),
			),
		)
		.returning();
	const outcome = row && outcomeOf(row);
	if (outcome) await notifyPreprocessingListeners(env, outcome);
}

/** `audio-uploaded-dlq`: a file whose message kept failing is failed, so that it never stays pending. */
export async function handleDeadAudioUploaded(message: Message<unknown>, env: Env): Promise<void> {
	const parsed = AudioUploadedMessage.safeParse(message.body);
	log("error", "audio-uploaded message dead-lettered", { id: message.id, body: message.body });
	if (parsed.success) await failUndeliverable(env, parsed.data.audio_file_id);
	message.ack();
}

export async function handleAudioUploaded(message: Message<unknown>, env: Env): Promise<void> {
	const parsed = AudioUploadedMessage.safeParse(message.body);
	if (!parsed.success) {
		log("error", "malformed audio-uploaded message; dropped", { id: message.id });
		message.ack();
		return;
	}
	await preprocessAudioFile(env, parsed.data.audio_file_id);
	message.ack();
}
