/**
 * D1 access for voices. A client sees the service's active voices and its own account's voices that are not
 * deleted; any other voice does not exist for it (404, exactly like another account's audio file).
 */
import { and, asc, count, eq, inArray, isNotNull, isNull, lte, or, type SQL, sql } from "drizzle-orm";
import { RVC_MODEL_FACTS } from "../contracts/rvc-setting-needs.ts";
import type { VoiceSettings } from "../contracts/voice-conversions.ts";
import { database } from "../db/client.ts";
import { rowWhere } from "../db/row-where.ts";
import {
	type VoiceFileRole,
	type VoiceStatus,
	voiceConversions,
	voiceFileParts,
	voiceFiles,
	voices,
} from "../db/schema.ts";

export type VoiceRow = typeof voices.$inferSelect;
export type VoiceFileRow = typeof voiceFiles.$inferSelect;

/** The voices `accountId` may use: the service's active ones and its own that are not deleted. */
const visibleTo = (accountId: string): SQL =>
	or(
		and(isNull(voices.accountId), eq(voices.isActive, true)),
		and(eq(voices.accountId, accountId), isNull(voices.deletedAt)),
	) as SQL;

export function listVisibleVoices(
	env: Pick<Env, "DB">,
	accountId: string,
	filter: { owner?: "service" | "account"; status?: VoiceStatus } = {},
): Promise<VoiceRow[]> {
	return database(env)
		.select()
		.from(voices)
		.where(
			and(
				visibleTo(accountId),
				filter.owner === "service" ? isNull(voices.accountId) : undefined,
				filter.owner === "account" ? isNotNull(voices.accountId) : undefined,
				filter.status ? eq(voices.status, filter.status) : undefined,
			),
		)
		.orderBy(asc(voices.name), asc(voices.id));
}

export async function findVisibleVoice(env: Pick<Env, "DB">, accountId: string, id: string): Promise<VoiceRow | null> {
	const row = await database(env).query.voices.findFirst({ where: and(eq(voices.id, id), visibleTo(accountId)) });
	return row ?? null;
}

/** One of the account's own voices (not deleted), or null. */
export async function findOwnVoice(env: Pick<Env, "DB">, accountId: string, id: string): Promise<VoiceRow | null> {
	const row = await database(env).query.voices.findFirst({
		where: and(eq(voices.id, id), eq(voices.accountId, accountId), isNull(voices.deletedAt)),
	});
	return row ?? null;
}

/**
 * Whether another of the account's voices has `name` (given in NFC) in any Unicode form. Names are stored NFC, and
 * the unique index holds that; this also catches one stored, before they were, in the form it was typed (an
 * account holds at most `VOICE_LIMITS.voicesPerAccount` voices, so their names are few).
 */
export async function accountVoiceNameTaken(
	env: Pick<Env, "DB">,
	accountId: string,
	name: string,
	exceptId?: string,
): Promise<boolean> {
	const rows = await database(env)
		.select({ id: voices.id, name: voices.name })
		.from(voices)
		.where(and(eq(voices.accountId, accountId), isNull(voices.deletedAt)));
	return rows.some((row) => row.id !== exceptId && row.name.normalize("NFC") === name);
}

export async function findVoiceById(env: Pick<Env, "DB">, id: string): Promise<VoiceRow | null> {
	return (await database(env).query.voices.findFirst({ where: eq(voices.id, id) })) ?? null;
}

export async function findVoiceFiles(env: Pick<Env, "DB">, voiceIds: string[]): Promise<VoiceFileRow[]> {
	if (voiceIds.length === 0) return [];
	return database(env).select().from(voiceFiles).where(inArray(voiceFiles.voiceId, voiceIds));
}

export async function findVoiceFile(
	env: Pick<Env, "DB">,
	voiceId: string,
	role: VoiceFileRole,
): Promise<VoiceFileRow | null> {
	const row = await database(env).query.voiceFiles.findFirst({
		where: and(eq(voiceFiles.voiceId, voiceId), eq(voiceFiles.role, role)),
	});
	return row ?? null;
}

/** The voice's settings as stored in its engine parameters (where the admin tool keeps a service voice's defaults). */
export function voiceSettingsOf(voice: Pick<VoiceRow, "engineParams">): VoiceSettings {
	const params = voice.engineParams;
	const settings: Record<string, unknown> = {};
	for (const key of ["index_rate", "protect", "rms_mix_rate", "formant_shift", "f0_method"] as const) {
		if (params[key] !== undefined) settings[key] = params[key];
	}
	return settings as VoiceSettings;
}

/**
 * The voice's params less its model's facts: its default settings (`index_rate`, `protect`, `rms_mix_rate`,
 * `f0_method`, `formant_shift`, `transpose_semitones`, ...) as a conversion accepted now was checked against, and
 * is run with whatever the voice's owner changes later.
 */
export function acceptedVoiceParams(voice: Pick<VoiceRow, "engineParams">): Record<string, unknown> {
	return Object.fromEntries(Object.entries(voice.engineParams).filter(([key]) => !RVC_MODEL_FACTS.includes(key)));
}

/**
 * What a lease of a conversion hands the runner as the voice's params: those it was accepted with, and the facts of
 * the voice's model as it is now (the model the lease carries). A conversion accepted before its params were
 * recorded (`accepted` null) gets the voice's params as they are.
 */
export function leaseVoiceParams(
	voice: Pick<VoiceRow, "engineParams">,
	accepted: Record<string, unknown> | null,
): Record<string, unknown> {
	if (accepted === null) return voice.engineParams;
	const facts = Object.entries(voice.engineParams).filter(([key]) => RVC_MODEL_FACTS.includes(key));
	return { ...accepted, ...Object.fromEntries(facts) };
}

export interface NewAccountVoice {
	id: string;
	accountId: string;
	name: string;
	tags: string[];
	description: string | null;
	voiceSettings: VoiceSettings;
	files: Omit<
		VoiceFileRow,
		"voiceId" | "kind" | "sizeBytes" | "sha256" | "uploadedAt" | "createdAt" | "uploadGeneration"
	>[];
}

/**
 * Inserts the voice and its declared files in one batch, only while the account holds fewer than `limit` voices:
 * the count and the insert are one statement, so concurrent creations cannot pass the limit together. Null when the
 * limit is reached (nothing inserted). Throws D1's unique-constraint error for a taken name.
 */
export async function insertAccountVoice(
	env: Pick<Env, "DB">,
	voice: NewAccountVoice,
	now: string,
	limit: number,
): Promise<VoiceRow | null> {
	const db = database(env);
	const row: VoiceRow = {
		id: voice.id,
		accountId: voice.accountId,
		name: voice.name,
		tags: voice.tags,
		description: voice.description,
		engine: "rvc",
		engineParams: { ...voice.voiceSettings },
		imageKey: null,
		sampleKey: null,
		artifacts: [],
		pitchRangeLowHz: null,
		pitchRangeHighHz: null,
		isActive: true,
		status: "awaiting_upload",
		errorMessage: null,
		validationStartedAt: null,
		createdAt: now,
		updatedAt: now,
		deletedAt: null,
		filesRemovedAt: null,
	};
	const held = db
		.select({ n: count() })
		.from(voices)
		.where(and(eq(voices.accountId, voice.accountId), isNull(voices.deletedAt)));
	const inserted = sql`exists (select 1 from ${voices} where ${eq(voices.id, voice.id)})`;
	const [made] = await db.batch([
		db
			.insert(voices)
			.select(rowWhere(voices, row, sql`(${held}) < ${limit}`))
			.returning({ id: voices.id }),
		...voice.files.map((file) =>
			db.insert(voiceFiles).select(rowWhere(voiceFiles, { ...file, voiceId: voice.id, createdAt: now }, inserted)),
		),
	]);
	return made.length > 0 ? row : null;
}

/**
 * How often a write guarded by a voice's `updated_at` (`updateVoiceFields`, the end of a validation) is decided
 * again from a fresh read after another write landed in between, before giving up.
 */
export const VOICE_WRITE_ROUNDS = 5;

/**
 * Changes the fields of `voice` as it was read: only while it is still that version (its `updated_at`) and not
 * deleted, since the new fields were decided from it (the engine parameters are written whole, and the checks a
 * change needs depend on the status). False when it changed meanwhile: nothing is written.
 */
export async function updateVoiceFields(
	env: Pick<Env, "DB">,
	voice: Pick<VoiceRow, "id" | "updatedAt">,
	fields: Partial<Pick<VoiceRow, "name" | "tags" | "description" | "engineParams">>,
	now: string,
): Promise<boolean> {
	const rows = await database(env)
		.update(voices)
		.set({ ...fields, updatedAt: now })
		.where(and(eq(voices.id, voice.id), eq(voices.updatedAt, voice.updatedAt), isNull(voices.deletedAt)))
		.returning({ id: voices.id });
	return rows.length > 0;
}

export async function markVoiceDeleted(env: Pick<Env, "DB">, id: string, now: string): Promise<boolean> {
	const rows = await database(env)
		.update(voices)
		.set({ deletedAt: now, updatedAt: now })
		.where(and(eq(voices.id, id), isNull(voices.deletedAt)))
		.returning({ id: voices.id });
	return rows.length > 0;
}

/**
 * Which of these voice ids were deleted, or are not known at all: a runner that still holds their files removes
 * them (`forget_voice_ids` in the lease response).
 */
export async function deletedVoiceIds(env: Pick<Env, "DB">, ids: readonly string[]): Promise<string[]> {
	if (ids.length === 0) return [];
	const rows = await database(env)
		.select({ id: voices.id, deletedAt: voices.deletedAt })
		.from(voices)
		.where(inArray(voices.id, [...ids]));
	const live = new Set(rows.filter((row) => row.deletedAt === null).map((row) => row.id));
	return ids.filter((id) => !live.has(id));
}

/** Whether any conversion of this voice has not ended yet (its files must stay until it does). */
export async function voiceHasRunningConversions(env: Pick<Env, "DB">, voiceId: string): Promise<boolean> {
	const row = await database(env).query.voiceConversions.findFirst({
		columns: { id: true },
		where: and(
			eq(voiceConversions.voiceModelId, voiceId),
			inArray(voiceConversions.status, ["pending_preprocessing", "queued", "processing"]),
		),
	});
	return row !== undefined;
}

/**
 * Voices `validating` since at or before `cutoff` (the safety net checks that the broker holds their job): since
 * their validation started, however recently their name or settings were changed. A voice moved on by code older
 * than `validation_started_at` counts from its last change, as before.
 */
export async function validatingVoicesBefore(env: Pick<Env, "DB">, cutoff: string, limit: number): Promise<string[]> {
	const rows = await database(env)
		.select({ id: voices.id })
		.from(voices)
		.where(
			and(
				eq(voices.status, "validating"),
				isNull(voices.deletedAt),
				lte(sql`coalesce(${voices.validationStartedAt}, ${voices.updatedAt})`, cutoff),
			),
		)
		.limit(limit);
	return rows.map((row) => row.id);
}

/**
 * Account voices still `awaiting_upload` although every declared file is in, the last since at or before `cutoff`:
 * the request that took the last file stopped before it moved the voice on (the safety net starts their validation).
 */
export async function uploadedVoicesNotValidating(
	env: Pick<Env, "DB">,
	cutoff: string,
	limit: number,
): Promise<string[]> {
	const { results } = await env.DB.prepare(
		`SELECT v.id FROM voices v
		 WHERE v.status = 'awaiting_upload' AND v.deleted_at IS NULL AND v.account_id IS NOT NULL
		   AND EXISTS (SELECT 1 FROM voice_files f WHERE f.voice_id = v.id)
		   AND NOT EXISTS (
		     SELECT 1 FROM voice_files f WHERE f.voice_id = v.id AND (f.upload_status <> 'uploaded' OR f.uploaded_at > ?)
		   )
		 LIMIT ?`,
	)
		.bind(cutoff, limit)
		.all<{ id: string }>();
	return results.map((row) => row.id);
}

/** Deleted account voices whose files are still stored. */
export async function deletedVoicesWithFiles(env: Pick<Env, "DB">, limit: number): Promise<string[]> {
	const rows = await database(env)
		.select({ id: voices.id })
		.from(voices)
		.where(and(isNotNull(voices.accountId), isNotNull(voices.deletedAt), isNull(voices.filesRemovedAt)))
		.limit(limit);
	return rows.map((row) => row.id);
}

export async function markVoiceFilesRemoved(env: Pick<Env, "DB">, id: string, now: string): Promise<void> {
	const db = database(env);
	await db.batch([
		db.update(voices).set({ filesRemovedAt: now }).where(eq(voices.id, id)),
		db.delete(voiceFileParts).where(eq(voiceFileParts.voiceId, id)),
	]);
}
