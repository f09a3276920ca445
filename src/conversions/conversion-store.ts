/**
 * D1 access for voice conversions. Reads join the names the API shows (file name, voice name), so presenters and
 * event payloads see the same fields. Status changes are not here: they belong to `state-machine.ts`, the only code
 * that writes `status`.
 */
import { and, asc, desc, eq, exists, inArray, isNotNull, isNull, lte, or, type SQL, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { ConversionJob } from "../contracts/broker.ts";
import type { CreateConversionBody } from "../contracts/voice-conversions.ts";
import { database } from "../db/client.ts";
import { newestFirstPage, olderThan } from "../db/newest-first-page.ts";
import { rowWhere } from "../db/row-where.ts";
import { audioFiles, type ConversionStatus, voiceConversions, voices } from "../db/schema.ts";
import type { PageCursor } from "../http/page-cursor.ts";

export type ConversionRow = typeof voiceConversions.$inferSelect;
/** A conversion with the names the API shows beside the ids. */
export type Conversion = ConversionRow & { audioFileName: string; voiceModelName: string };

const withNames = (db: ReturnType<typeof database>) =>
	db
		.select({ conversion: voiceConversions, audioFileName: audioFiles.fileName, voiceModelName: voices.name })
		.from(voiceConversions)
		.innerJoin(audioFiles, eq(audioFiles.id, voiceConversions.audioFileId))
		.innerJoin(voices, eq(voices.id, voiceConversions.voiceModelId));

const flatten = (row: { conversion: ConversionRow; audioFileName: string; voiceModelName: string }): Conversion => ({
	...row.conversion,
	audioFileName: row.audioFileName,
	voiceModelName: row.voiceModelName,
});

/**
 * `column IN (ids)` with the ids bound as one JSON array: D1 binds at most 100 parameters per statement, and the
 * safety net and dispatch pass up to that many ids at once.
 */
const inIds = (column: SQLiteColumn, ids: string[]) =>
	sql`${column} IN (SELECT value FROM json_each(${JSON.stringify(ids)}))`;

async function findOne(env: Pick<Env, "DB">, where: SQL | undefined): Promise<Conversion | null> {
	const [row] = await withNames(database(env)).where(where).limit(1);
	return row ? flatten(row) : null;
}

export function findConversion(env: Pick<Env, "DB">, id: string): Promise<Conversion | null> {
	return findOne(env, eq(voiceConversions.id, id));
}

/** Tenant-scoped read: another account's conversion is indistinguishable from a missing one. */
export function findAccountConversion(env: Pick<Env, "DB">, accountId: string, id: string): Promise<Conversion | null> {
	return findOne(env, and(eq(voiceConversions.id, id), eq(voiceConversions.accountId, accountId)));
}

/** One page, newest first; `next` is where the following page starts, or null on the last page. */
export async function listConversions(
	env: Pick<Env, "DB">,
	accountId: string,
	options: { status?: ConversionStatus | undefined; limit: number; after: PageCursor | null },
): Promise<{ rows: Conversion[]; next: PageCursor | null }> {
	const { status, limit, after } = options;
	const rows = await withNames(database(env))
		.where(
			and(
				eq(voiceConversions.accountId, accountId),
				status ? eq(voiceConversions.status, status) : undefined,
				olderThan(voiceConversions, after),
			),
		)
		.orderBy(desc(voiceConversions.createdAt), desc(voiceConversions.id))
		.limit(limit + 1);
	return newestFirstPage(rows.map(flatten), limit);
}

export type SourcePreprocessing = Pick<
	typeof audioFiles.$inferSelect,
	"preprocessingStatus" | "preprocessingErrorCode" | "preprocessingError"
>;

/**
 * Inserts a conversion in `pending_preprocessing`, and reads its source file's preprocessing state in the same
 * batch, after the insert: preprocessing that ended between the caller's check and the insert notified nobody
 * about this conversion, so the caller acts on what this read finds.
 *
 * Null, inserting nothing, when the source file or the voice was deleted after the caller found them: the insert
 * reads both in its own statement. A deletion then either comes first (no conversion) or sees the conversion (the
 * file's delete is refused while it is in use; a voice keeps its files until its conversions end), so no conversion
 * is accepted with a source or voice files already gone.
 */
export async function insertConversion(
	env: Pick<Env, "DB">,
	accountId: string,
	input: CreateConversionBody & {
		audioFileName: string;
		voiceModelName: string;
		/** The voice's params this conversion runs with (`acceptedVoiceParams` of the voice its settings were checked against). */
		voiceParams?: Record<string, unknown> | null;
	},
	now = new Date(),
): Promise<{ conversion: Conversion; source: SourcePreprocessing | undefined } | null> {
	const at = now.toISOString();
	const row: ConversionRow = {
		id: crypto.randomUUID(),
		accountId,
		audioFileId: input.audio_file_id,
		voiceModelId: input.voice_model_id,
		pitchShift: input.pitch_shift,
		pitchShiftApplied: input.pitch_shift === "auto" ? null : input.pitch_shift,
		usePreview: input.use_preview,
		// An empty object asks for nothing: stored as no settings, so the conversion reads as the spec's.
		voiceSettings: input.voice_settings && Object.keys(input.voice_settings).length > 0 ? input.voice_settings : null,
		voiceParams: input.voiceParams ?? null,
		status: "pending_preprocessing",
		errorCode: null,
		errorMessage: null,
		attempts: 0,
		outputKey: null,
		outputSizeBytes: null,
		outputDurationSeconds: null,
		dispatchedAt: null,
		createdAt: at,
		queuedAt: null,
		processingStartedAt: null,
		completedAt: null,
		failedAt: null,
		updatedAt: at,
	};
	const db = database(env);
	const stillThere = and(
		exists(
			db
				.select({ id: audioFiles.id })
				.from(audioFiles)
				.where(
					and(eq(audioFiles.id, row.audioFileId), eq(audioFiles.accountId, accountId), isNull(audioFiles.deletedAt)),
				),
		),
		exists(
			db
				.select({ id: voices.id })
				.from(voices)
				.where(and(eq(voices.id, row.voiceModelId), isNull(voices.deletedAt))),
		),
	) as SQL;
	const [inserted, [source]] = await db.batch([
		db
			.insert(voiceConversions)
			.select(rowWhere(voiceConversions, row, stillThere))
			.returning({ id: voiceConversions.id }),
		db
			.select({
				preprocessingStatus: audioFiles.preprocessingStatus,
				preprocessingErrorCode: audioFiles.preprocessingErrorCode,
				preprocessingError: audioFiles.preprocessingError,
			})
			.from(audioFiles)
			.where(eq(audioFiles.id, input.audio_file_id)),
	]);
	if (inserted.length === 0) return null;
	return {
		conversion: { ...row, audioFileName: input.audioFileName, voiceModelName: input.voiceModelName },
		source,
	};
}

/** Ids of the conversions still waiting for this file's preprocessing. */
export async function conversionsWaitingOnFile(env: Pick<Env, "DB">, audioFileId: string): Promise<string[]> {
	const rows = await database(env)
		.select({ id: voiceConversions.id })
		.from(voiceConversions)
		.where(and(eq(voiceConversions.audioFileId, audioFileId), eq(voiceConversions.status, "pending_preprocessing")));
	return rows.map((row) => row.id);
}

/** The jobs of these conversions that should have one: `queued` ones, and `processing` ones being retried. */
export async function findDispatchableJobs(env: Pick<Env, "DB">, ids: string[]): Promise<ConversionJob[]> {
	if (ids.length === 0) return [];
	return database(env)
		.select({
			conversionId: voiceConversions.id,
			accountId: voiceConversions.accountId,
			voiceId: voiceConversions.voiceModelId,
			engine: voices.engine,
			usePreview: voiceConversions.usePreview,
		})
		.from(voiceConversions)
		.innerJoin(voices, eq(voices.id, voiceConversions.voiceModelId))
		.where(and(inIds(voiceConversions.id, ids), inArray(voiceConversions.status, ["queued", "processing"])));
}

/**
 * What a lease tells a runner beyond the job itself (`ConversionJob`, carried by the broker): the pitch, the voice
 * settings, the source file's facts and the voice, for conversions still `processing`.
 */
export async function findLeaseSources(env: Pick<Env, "DB">, ids: string[]) {
	if (ids.length === 0) return [];
	return database(env)
		.select({
			id: voiceConversions.id,
			pitchShift: voiceConversions.pitchShift,
			voiceSettings: voiceConversions.voiceSettings,
			voiceParams: voiceConversions.voiceParams,
			file: {
				objectKey: audioFiles.objectKey,
				mimeType: audioFiles.mimeType,
				format: audioFiles.format,
				sampleRate: audioFiles.sampleRate,
				channels: audioFiles.channels,
				durationSeconds: audioFiles.durationSeconds,
				sizeBytes: audioFiles.sizeBytes,
			},
			voice: {
				id: voices.id,
				accountId: voices.accountId,
				name: voices.name,
				engine: voices.engine,
				engineParams: voices.engineParams,
				artifacts: voices.artifacts,
				pitchRangeLowHz: voices.pitchRangeLowHz,
				pitchRangeHighHz: voices.pitchRangeHighHz,
			},
		})
		.from(voiceConversions)
		.innerJoin(audioFiles, eq(audioFiles.id, voiceConversions.audioFileId))
		.innerJoin(voices, eq(voices.id, voiceConversions.voiceModelId))
		.where(and(inIds(voiceConversions.id, ids), eq(voiceConversions.status, "processing")));
}
export type LeaseSource = Awaited<ReturnType<typeof findLeaseSources>>[number];

/** `queued` conversions whose job was last sent at or before `cutoff`, oldest first (the safety net's candidates). */
export async function queuedDispatchedBefore(env: Pick<Env, "DB">, cutoff: string, limit: number): Promise<string[]> {
	const rows = await database(env)
		.select({ id: voiceConversions.id })
		.from(voiceConversions)
		.where(
			and(
				eq(voiceConversions.status, "queued"),
				sql`COALESCE(${voiceConversions.dispatchedAt}, ${voiceConversions.queuedAt}) <= ${cutoff}`,
			),
		)
		.orderBy(asc(voiceConversions.queuedAt))
		.limit(limit);
	return rows.map((row) => row.id);
}

/** Records that these `queued` conversions' jobs were sent again (not a status change). */
export async function markDispatched(env: Pick<Env, "DB">, ids: string[], now: Date): Promise<void> {
	if (ids.length === 0) return;
	await database(env)
		.update(voiceConversions)
		.set({ dispatchedAt: now.toISOString() })
		.where(and(inIds(voiceConversions.id, ids), eq(voiceConversions.status, "queued")));
}

/**
 * `pending_preprocessing` conversions whose source can no longer arrive: the file was deleted, or it still awaits its
 * upload and its upload window closed at or before `windowClosedBefore` (a regenerated window moves that time on).
 */
export async function conversionsWithLostSource(
	env: Pick<Env, "DB">,
	windowClosedBefore: string,
	limit: number,
): Promise<{ id: string; sourceDeleted: boolean }[]> {
	const rows = await database(env)
		.select({ id: voiceConversions.id, deletedAt: audioFiles.deletedAt })
		.from(voiceConversions)
		.innerJoin(audioFiles, eq(audioFiles.id, voiceConversions.audioFileId))
		.where(
			and(
				eq(voiceConversions.status, "pending_preprocessing"),
				or(
					isNotNull(audioFiles.deletedAt),
					and(
						eq(audioFiles.uploadStatus, "awaiting_upload"),
						eq(audioFiles.preprocessingStatus, "pending"),
						lte(audioFiles.uploadUrlExpiresAt, windowClosedBefore),
					),
				),
			),
		)
		.orderBy(asc(voiceConversions.createdAt))
		.limit(limit);
	return rows.map((row) => ({ id: row.id, sourceDeleted: row.deletedAt !== null }));
}

/**
 * Files whose preprocessing ended at or before `endedBefore` while conversions still wait on them: the notification
 * that should have moved those conversions was lost.
 */
export function filesSettledUnderWaitingConversions(env: Pick<Env, "DB">, endedBefore: string, limit: number) {
	return database(env)
		.selectDistinct({
			id: audioFiles.id,
			accountId: audioFiles.accountId,
			preprocessingStatus: audioFiles.preprocessingStatus,
			preprocessingErrorCode: audioFiles.preprocessingErrorCode,
			preprocessingError: audioFiles.preprocessingError,
		})
		.from(voiceConversions)
		.innerJoin(audioFiles, eq(audioFiles.id, voiceConversions.audioFileId))
		.where(
			and(
				eq(voiceConversions.status, "pending_preprocessing"),
				isNull(audioFiles.deletedAt),
				inArray(audioFiles.preprocessingStatus, ["ready", "failed"]),
				lte(audioFiles.updatedAt, endedBefore),
			),
		)
		.limit(limit);
}

/**
 * Conversions not finished and unchanged since `cutoff` (no transition: not promoted, leased or retried), oldest
 * first, with their file's upload state. Whether a runner still works on them is the broker's to say.
 */
export function conversionsUnchangedSince(
	env: Pick<Env, "DB">,
	statuses: readonly ConversionStatus[],
	cutoff: string,
	limit: number,
) {
	return database(env)
		.select({ id: voiceConversions.id, status: voiceConversions.status, uploadStatus: audioFiles.uploadStatus })
		.from(voiceConversions)
		.innerJoin(audioFiles, eq(audioFiles.id, voiceConversions.audioFileId))
		.where(and(inArray(voiceConversions.status, [...statuses]), lte(voiceConversions.updatedAt, cutoff)))
		.orderBy(asc(voiceConversions.updatedAt))
		.limit(limit);
}
