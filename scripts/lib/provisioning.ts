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

export interface VoiceFields {
	name?: string;
	tags?: string[];
	engine?: (typeof VOICE_ENGINES)[number];
	params?: Record<string, unknown>;
	imageKey?: string;
	sampleKey?: string;
	artifacts?: { name: string; key: string; sha256: string; size_bytes: number }[];
	isActive?: boolean;
}

/** Object keys of a voice's files in the bucket. */
export const voiceObjectKeys = (voiceId: string) => ({
	image: (extension: string) => `voices/${voiceId}/image.${extension}`,
	sample: (extension: string) => `voices/${voiceId}/sample.${extension}`,
	artifact: (name: string) => `models/${voiceId}/${name}`,
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
