import type { AccountVoice, VoiceModel } from "../contracts/voices.ts";
import { signStorageUrl } from "../storage/signed-url.ts";
import { type VoiceFileRow, type VoiceRow, voiceSettingsOf } from "./voice-store.ts";

/** How long `image_url` and `song_url` stay valid. */
export const VOICE_ASSET_URL_SECONDS = 12 * 3600;

/** The spec's fields plus `owner` and `status`: what every voice shows. */
export async function presentVoice(env: Env, origin: string, voice: VoiceRow): Promise<VoiceModel> {
	const expiresAt = new Date(Date.now() + VOICE_ASSET_URL_SECONDS * 1000);
	const sign = (key: string | null) => (key ? signStorageUrl(env, origin, { method: "GET", key, expiresAt }) : null);
	return {
		id: voice.id,
		name: voice.name,
		tags: voice.tags,
		image_url: await sign(voice.imageKey),
		song_url: await sign(voice.sampleKey),
		owner: voice.accountId ? "account" : "service",
		status: voice.status,
	};
}

/** An account's own voice, shown to that account: also its settings, files and validation outcome. */
export async function presentAccountVoice(
	env: Env,
	origin: string,
	voice: VoiceRow,
	files: readonly VoiceFileRow[],
): Promise<AccountVoice> {
	return {
		...(await presentVoice(env, origin, voice)),
		description: voice.description,
		voice_settings: voiceSettingsOf(voice),
		error_message: voice.errorMessage,
		pitch_range_hz:
			voice.pitchRangeLowHz !== null && voice.pitchRangeHighHz !== null
				? { low: voice.pitchRangeLowHz, high: voice.pitchRangeHighHz }
				: null,
		files: Object.fromEntries(
			files
				.filter((file) => file.voiceId === voice.id)
				.map((file) => [
					file.role,
					{
						file_name: file.fileName,
						size_bytes: file.sizeBytes ?? file.declaredSizeBytes,
						upload_status: file.uploadStatus,
						kind: file.kind,
						sha256: file.sha256,
					},
				]),
		),
		created_at: voice.createdAt,
		updated_at: voice.updatedAt,
	};
}

/** Either shape, by owner: service voices keep the spec's fields (plus owner and status). */
export async function presentVisibleVoice(
	env: Env,
	origin: string,
	voice: VoiceRow,
	files: readonly VoiceFileRow[],
): Promise<VoiceModel | AccountVoice> {
	return voice.accountId ? presentAccountVoice(env, origin, voice, files) : presentVoice(env, origin, voice);
}
