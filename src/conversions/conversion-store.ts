/**
 * A conversion as read from D1 with the names the API shows (file name, voice name). Every reader of a
 * conversion goes through `loadConversion(s)` so that presenters and event payloads see the same columns.
 */
import type { ConversionStatus } from "../db/schema.ts";

export interface ConversionRow {
	id: string;
	account_id: string;
	audio_file_id: string;
	audio_file_name: string;
	voice_model_id: string;
	voice_model_name: string;
	pitch_shift: string;
	use_preview: number;
	status: ConversionStatus;
	error_code: string | null;
	error_message: string | null;
	attempts: number;
	output_key: string | null;
	output_size_bytes: number | null;
	output_duration_seconds: number | null;
	dispatched_at: string | null;
	created_at: string;
	queued_at: string | null;
	processing_started_at: string | null;
	completed_at: string | null;
	failed_at: string | null;
	updated_at: string;
}

export const CONVERSION_SELECT = `SELECT c.id, c.account_id, c.audio_file_id, a.file_name AS audio_file_name, c.voice_model_id,
	v.name AS voice_model_name, c.pitch_shift, c.use_preview, c.status, c.error_code, c.error_message, c.attempts,
	c.output_key, c.output_size_bytes, c.output_duration_seconds, c.dispatched_at, c.created_at, c.queued_at,
	c.processing_started_at, c.completed_at, c.failed_at, c.updated_at
FROM voice_conversions c
JOIN audio_files a ON a.id = c.audio_file_id
JOIN voices v ON v.id = c.voice_model_id`;

export async function loadConversion(env: Pick<Env, "DB">, id: string): Promise<ConversionRow | null> {
	return env.DB.prepare(`${CONVERSION_SELECT} WHERE c.id = ?`).bind(id).first<ConversionRow>();
}

/** Tenant-scoped read: another account's conversion is indistinguishable from a missing one. */
export async function loadAccountConversion(
	env: Pick<Env, "DB">,
	accountId: string,
	id: string,
): Promise<ConversionRow | null> {
	return env.DB.prepare(`${CONVERSION_SELECT} WHERE c.id = ? AND c.account_id = ?`)
		.bind(id, accountId)
		.first<ConversionRow>();
}
