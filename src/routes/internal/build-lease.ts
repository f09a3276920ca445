/** Turns a broker grant into the runner contract's `Lease`: everything a runner needs, with fresh signed addresses. */
import { type GrantedLease, HEARTBEAT_INTERVAL_SECONDS } from "../../contracts/broker.ts";
import { type Lease, sharedModelsFor } from "../../contracts/runner.ts";
import { withPitchTracker } from "../../contracts/rvc-setting-needs.ts";
import { PITCH_SHIFT_SEMITONES, PREVIEW_SECONDS } from "../../contracts/voice-conversions.ts";
import type { LeaseSource } from "../../conversions/conversion-store.ts";
import { MAX_OUTPUT_BYTES, OUTPUT_CONTENT_TYPE, outputObjectKey, outputPartBytes } from "../../conversions/outputs.ts";
import type { VoiceArtifact } from "../../db/schema.ts";
import { signStorageUrl } from "../../storage/signed-url.ts";
import type { BaseModelRow } from "../../voices/base-model-store.ts";
import { leaseVoiceParams } from "../../voices/voice-store.ts";

/** Addresses in a lease outlive it comfortably: a long conversion heartbeats for hours before it uploads. */
export const LEASE_URL_SECONDS = 6 * 3600;

/**
 * The files a voice's engine reads: an `rvc` voice's own, then each base model it does not carry itself (a voice
 * may bring its own ContentVec, for instance; a v1 voice gets the deployment's `contentvec_v1` as its ContentVec).
 * `dsp` voices need no models.
 */
export function voiceArtifacts(voice: LeaseSource["voice"], bases: readonly BaseModelRow[]): VoiceArtifact[] {
	if (voice.engine !== "rvc") return voice.artifacts;
	const shared = sharedModelsFor(bases, {
		featureDim: voice.engineParams.feature_dim,
		own: new Set(voice.artifacts.map((artifact) => artifact.name)),
	}).map(({ name, base }) => ({ name, key: base.objectKey, sha256: base.sha256, size_bytes: base.sizeBytes }));
	return [...voice.artifacts, ...shared];
}

/** Null when the source lacks what preprocessing should have recorded (the job cannot run). */
export async function buildLease(
	env: Env,
	origin: string,
	grant: GrantedLease,
	source: LeaseSource,
	bases: readonly BaseModelRow[],
	now = new Date(),
): Promise<Lease | null> {
	const { file, voice } = source;
	const { format, sampleRate, channels, durationSeconds, sizeBytes } = file;
	if (!format || !sampleRate || !channels || durationSeconds === null || sizeBytes === null) return null;
	const expiresAt = new Date(now.getTime() + LEASE_URL_SECONDS * 1000);
	const artifacts = voiceArtifacts(voice, bases);
	// The settings the conversion was accepted with, whatever its voice's owner changed since.
	const params = leaseVoiceParams(voice, source.voiceParams);
	return {
		lease_id: grant.leaseId,
		conversion_id: grant.job.conversionId,
		attempt: grant.attempt,
		lease_expires_at: new Date(grant.expiresAt).toISOString(),
		heartbeat_interval_seconds: HEARTBEAT_INTERVAL_SECONDS,
		voice: {
			id: voice.id,
			name: voice.name,
			engine: voice.engine,
			params:
				voice.engine === "rvc"
					? withPitchTracker(
							params,
							source.voiceSettings,
							artifacts.some((artifact) => artifact.name === "rmvpe"),
						)
					: params,
			pitch_range_hz:
				voice.pitchRangeLowHz !== null && voice.pitchRangeHighHz !== null
					? { low: voice.pitchRangeLowHz, high: voice.pitchRangeHighHz }
					: null,
			account_voice: voice.accountId !== null,
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
			url: await signStorageUrl(env, origin, { method: "GET", key: file.objectKey, expiresAt }),
			mime_type: file.mimeType,
			format,
			sample_rate: sampleRate,
			channels,
			duration_seconds: durationSeconds,
			size_bytes: sizeBytes,
		},
		output: {
			url: await signStorageUrl(env, origin, {
				method: "PUT",
				key: outputObjectKey(grant.job.accountId, grant.job.conversionId, grant.leaseId),
				expiresAt,
				contentType: OUTPUT_CONTENT_TYPE,
				maxBytes: MAX_OUTPUT_BYTES,
			}),
			content_type: OUTPUT_CONTENT_TYPE,
			part_size_bytes: outputPartBytes(env),
		},
		// For `auto` the runner picks the shift; 0 is what a runner that does not know `auto` applies.
		semitones: source.pitchShift === "auto" ? 0 : PITCH_SHIFT_SEMITONES[source.pitchShift],
		pitch_shift: source.pitchShift,
		voice_settings: source.voiceSettings,
		use_preview: grant.job.usePreview,
		preview_seconds: PREVIEW_SECONDS,
	};
}
