import type { VoiceModel } from "../contracts/voices.ts";
import { signStorageUrl } from "../storage/signed-url.ts";
import type { VoiceRow } from "./voice-store.ts";

/** How long `image_url` and `song_url` stay valid. */
export const VOICE_ASSET_URL_SECONDS = 12 * 3600;

export async function presentVoice(env: Env, origin: string, voice: VoiceRow): Promise<VoiceModel> {
	const expiresAt = new Date(Date.now() + VOICE_ASSET_URL_SECONDS * 1000);
	const sign = (key: string | null) => (key ? signStorageUrl(env, origin, { method: "GET", key, expiresAt }) : null);
	return {
		id: voice.id,
		name: voice.name,
		tags: voice.tags,
		image_url: await sign(voice.imageKey),
		song_url: await sign(voice.sampleKey),
	};
}
