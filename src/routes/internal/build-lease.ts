/** Turns a broker grant into the runner contract's `Lease`: everything a runner needs, with fresh signed addresses. */
import { type GrantedLease, HEARTBEAT_INTERVAL_SECONDS } from "../../contracts/broker.ts";
import type { EngineName, Lease } from "../../contracts/runner.ts";
import { PITCH_SHIFT_SEMITONES, type PitchShift, PREVIEW_SECONDS } from "../../contracts/voice-conversions.ts";
import { MAX_OUTPUT_BYTES, OUTPUT_CONTENT_TYPE, outputObjectKey, outputPartBytes } from "../../conversions/outputs.ts";
import type { VoiceArtifact } from "../../db/schema.ts";
import { signStorageUrl } from "../../storage/signed-url.ts";

/** Addresses in a lease outlive it comfortably: a long conversion heartbeats for hours before it uploads. */
const LEASE_URL_SECONDS = 6 * 3600;

export interface LeaseSourceRow {
	id: string;
	account_id: string;
	pitch_shift: string;
	use_preview: number;
	object_key: string;
	mime_type: string;
	format: "wav" | "flac" | "mp3" | null;
	sample_rate: number | null;
	channels: number | null;
	duration_seconds: number | null;
	size_bytes: number | null;
	voice_id: string;
	voice_name: string;
	engine: EngineName;
	engine_params: string;
	artifacts: string;
}

export const LEASE_SOURCE_SELECT = `SELECT c.id, c.account_id, c.pitch_shift, c.use_preview,
	a.object_key, a.mime_type, a.format, a.sample_rate, a.channels, a.duration_seconds, a.size_bytes,
	v.id AS voice_id, v.name AS voice_name, v.engine, v.engine_params, v.artifacts
FROM voice_conversions c
JOIN audio_files a ON a.id = c.audio_file_id
JOIN voices v ON v.id = c.voice_model_id
WHERE c.id IN (SELECT value FROM json_each(?)) AND c.status = 'processing'`;

/** Null when the source lacks what preprocessing should have recorded (the job cannot run). */
export async function buildLease(
	env: Env,
	origin: string,
	grant: GrantedLease,
	row: LeaseSourceRow,
	now = new Date(),
): Promise<Lease | null> {
	const { format, sample_rate, channels, duration_seconds, size_bytes } = row;
	if (!format || !sample_rate || !channels || duration_seconds === null || size_bytes === null) return null;
	const expiresAt = new Date(now.getTime() + LEASE_URL_SECONDS * 1000);
	const artifacts = JSON.parse(row.artifacts) as VoiceArtifact[];
	return {
		lease_id: grant.leaseId,
		conversion_id: row.id,
		attempt: grant.attempt,
		lease_expires_at: new Date(grant.expiresAt).toISOString(),
		heartbeat_interval_seconds: HEARTBEAT_INTERVAL_SECONDS,
		voice: {
			id: row.voice_id,
			name: row.voice_name,
			engine: row.engine,
			params: JSON.parse(row.engine_params) as Record<string, unknown>,
			artifacts: await Promise.all(
				artifacts.map(async (artifact) => ({
					name: artifact.name,
					url: await signStorageUrl(env, origin, { method: "GET", key: artifact.key, expiresAt }),
					sha256: artifact.sha256,
					size_bytes: artifact.size_bytes,
				})),
			),
		},
		source: {
			url: await signStorageUrl(env, origin, { method: "GET", key: row.object_key, expiresAt }),
			mime_type: row.mime_type,
			format,
			sample_rate,
			channels,
			duration_seconds,
			size_bytes,
		},
		output: {
			url: await signStorageUrl(env, origin, {
				method: "PUT",
				key: outputObjectKey(row.account_id, row.id, grant.leaseId),
				expiresAt,
				contentType: OUTPUT_CONTENT_TYPE,
				maxBytes: MAX_OUTPUT_BYTES,
			}),
			content_type: OUTPUT_CONTENT_TYPE,
			part_size_bytes: outputPartBytes(env),
		},
		semitones: PITCH_SHIFT_SEMITONES[row.pitch_shift as PitchShift] ?? 0,
		use_preview: row.use_preview === 1,
		preview_seconds: PREVIEW_SECONDS,
	};
}
