/**
 * Admin operations as data: each returns the SQL to run and what to print. The admin CLI runs the SQL with
 * `wrangler d1 execute` (local or remote); tests run the same SQL through the D1 binding.
 */
import {
	BASE_SCOPE,
	generateClientSecret,
	hashClientSecret,
	RUNNER_SCOPE,
} from "../../src/contracts/client-credentials.ts";
import type { BaseModelName } from "../../src/contracts/runner.ts";
import { serviceArtifactKey } from "../../src/contracts/service-model-keys.ts";
import { insertSql, sqlValue, updateSql } from "./sql.ts";

export interface AdminPlan<T> {
	statements: string[];
	output: T;
}

export function createAccount(name: string, now = new Date()): AdminPlan<{ account_id: string; name: string }> {
	if (!name.trim()) throw new Error("Account name must not be empty");
	const id = crypto.randomUUID();
	return {
		statements: [insertSql("accounts", { id, name: name.trim(), created_at: now.toISOString() })],
		output: { account_id: id, name: name.trim() },
	};
}

export async function createClient(
	accountId: string,
	options: { name: string; kind: "api" | "runner" },
	now = new Date(),
): Promise<AdminPlan<{ client_id: string; client_secret: string; account_id: string; scope: string }>> {
	const id = crypto.randomUUID();
	const secret = generateClientSecret();
	const scope = options.kind === "runner" ? RUNNER_SCOPE : BASE_SCOPE;
	return {
		statements: [
			// Fails loudly (no row inserted) when the account does not exist.
			`INSERT INTO api_clients (id, account_id, name, secret_hash, scopes, created_at) SELECT ${sqlValue(id)}, id, ${sqlValue(
				options.name,
			)}, ${sqlValue(await hashClientSecret(secret))}, ${sqlValue(scope)}, ${sqlValue(now.toISOString())} FROM accounts WHERE id = ${sqlValue(accountId)};`,
		],
		output: { client_id: id, client_secret: secret, account_id: accountId, scope },
	};
}

export const revokeClient = (clientId: string, now = new Date()): AdminPlan<{ client_id: string }> => ({
	statements: [updateSql("api_clients", { revoked_at: now.toISOString() }, { column: "id", value: clientId })],
	output: { client_id: clientId },
});

export const VOICE_ENGINES = ["dsp", "rvc"] as const;
export { BASE_MODEL_NAMES, type BaseModelName } from "../../src/contracts/runner.ts";

export interface StoredFile {
	key: string;
	sha256: string;
	size_bytes: number;
}

/**
 * A base model's key, like a voice artifact's, names its checksum: setting a new file never overwrites one that a
 * runner holding an older lease may still be fetching.
 */
export { baseModelKey } from "../../src/contracts/service-model-keys.ts";

/** `file.feature_dim`: a ContentVec's feature width, kept so that voices can be checked against it; null for RMVPE. */
export function setBaseModel(
	name: BaseModelName,
	file: StoredFile & { feature_dim: number | null },
	now = new Date(),
): AdminPlan<StoredFile & { name: BaseModelName; feature_dim: number | null }> {
	const row = {
		name,
		object_key: file.key,
		sha256: file.sha256,
		size_bytes: file.size_bytes,
		feature_dim: file.feature_dim,
	};
	return {
		statements: [
			`${insertSql("base_models", { ...row, updated_at: now.toISOString() }).slice(0, -1)} ON CONFLICT (name) DO UPDATE SET object_key = excluded.object_key, sha256 = excluded.sha256, size_bytes = excluded.size_bytes, feature_dim = excluded.feature_dim, updated_at = excluded.updated_at;`,
		],
		output: { name, ...file },
	};
}

export interface VoiceFields {
	name?: string;
	tags?: string[];
	engine?: (typeof VOICE_ENGINES)[number];
	params?: Record<string, unknown>;
	imageKey?: string;
	sampleKey?: string;
	artifacts?: ({ name: string } & StoredFile)[];
	/** The voice's typical pitch range in Hz, for `pitch_shift: "auto"`. */
	pitchRangeHz?: { low: number; high: number };
	isActive?: boolean;
}

/** Object keys of a voice's files in the bucket. */
export const voiceObjectKeys = (voiceId: string) => ({
	image: (extension: string) => `voices/${voiceId}/image.${extension}`,
	sample: (extension: string) => `voices/${voiceId}/sample.${extension}`,
	artifact: (name: string, sha256: string) => serviceArtifactKey(voiceId, name, sha256),
});

function voiceColumns(fields: VoiceFields): Record<string, string | number | boolean | undefined> {
	if (fields.name !== undefined && !fields.name.trim()) throw new Error("Voice name must not be empty");
	if (fields.engine !== undefined && !VOICE_ENGINES.includes(fields.engine)) {
		throw new Error(`Engine must be one of: ${VOICE_ENGINES.join(", ")}`);
	}
	const columns: Record<string, string | number | boolean | undefined> = {
		name: fields.name?.trim(),
		tags: fields.tags ? JSON.stringify(fields.tags) : undefined,
		engine: fields.engine,
		engine_params: fields.params ? JSON.stringify(fields.params) : undefined,
		image_key: fields.imageKey,
		sample_key: fields.sampleKey,
		artifacts: fields.artifacts ? JSON.stringify(fields.artifacts) : undefined,
		pitch_range_low_hz: fields.pitchRangeHz?.low,
		pitch_range_high_hz: fields.pitchRangeHz?.high,
		is_active: fields.isActive,
	};
	return Object.fromEntries(Object.entries(columns).filter(([, v]) => v !== undefined));
}

export function createVoice(
	id: string,
	fields: VoiceFields & { name: string; engine: (typeof VOICE_ENGINES)[number] },
	now = new Date(),
): AdminPlan<{ voice_id: string; name: string }> {
	const row = {
		id,
		tags: "[]",
		engine_params: "{}",
		artifacts: "[]",
		is_active: true,
		...voiceColumns(fields),
		created_at: now.toISOString(),
		updated_at: now.toISOString(),
	};
	return { statements: [insertSql("voices", row)], output: { voice_id: id, name: fields.name.trim() } };
}

export function updateVoice(id: string, fields: VoiceFields, now = new Date()): AdminPlan<{ voice_id: string }> {
	const set = { ...voiceColumns(fields), updated_at: now.toISOString() };
	return { statements: [updateSql("voices", set, { column: "id", value: id })], output: { voice_id: id } };
}
