/** Turns a broker grant of a `validate_voice` job into the runner contract's `VoiceValidationLease`. */
import { type GrantedLease, HEARTBEAT_INTERVAL_SECONDS } from "../../contracts/broker.ts";
import type { VoiceValidationLease } from "../../contracts/runner.ts";
import { signStorageUrl } from "../../storage/signed-url.ts";
import type { BaseModelRow } from "../../voices/base-model-store.ts";
import { findVoiceById, findVoiceFiles, voiceSettingsOf } from "../../voices/voice-store.ts";

/** Validation reads a few files once; an hour covers the largest index on a slow link. */
export const VALIDATION_URL_SECONDS = 3600;

/** Null when the voice no longer waits for validation (deleted, or ended another way): the job is dropped. */
export async function buildValidationLease(
	env: Env,
	origin: string,
	grant: GrantedLease,
	bases: readonly BaseModelRow[],
	now = new Date(),
): Promise<VoiceValidationLease | null> {
	const voice = await findVoiceById(env, grant.job.voiceId);
	if (voice?.status !== "validating" || voice.deletedAt) return null;
	const expiresAt = new Date(now.getTime() + VALIDATION_URL_SECONDS * 1000);
	const sign = (key: string) => signStorageUrl(env, origin, { method: "GET", key, expiresAt });
	const files = await findVoiceFiles(env, [voice.id]);
	return {
		lease_id: grant.leaseId,
		voice_id: voice.id,
		attempt: grant.attempt,
		lease_expires_at: new Date(grant.expiresAt).toISOString(),
		heartbeat_interval_seconds: HEARTBEAT_INTERVAL_SECONDS,
		voice_name: voice.name,
		voice_settings: voiceSettingsOf(voice),
		files: await Promise.all(
			files.map(async (file) => ({
				role: file.role,
				url: await sign(file.objectKey),
				size_bytes: file.sizeBytes ?? file.declaredSizeBytes,
				kind: file.kind ?? "unknown",
			})),
		),
		base_models: await Promise.all(
			bases.map(async (base) => ({
				name: base.name,
				url: await sign(base.objectKey),
				sha256: base.sha256,
				size_bytes: base.sizeBytes,
			})),
		),
	};
}
