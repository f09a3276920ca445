/** Limits of source audio and where it is stored. The size limit is part of the contract (the SDK checks it too). */
export { MAX_AUDIO_FILE_BYTES } from "../contracts/audio-files.ts";

/** How long an upload address stays valid after registration (or after it is regenerated). */
export const UPLOAD_URL_SECONDS = 30 * 60;

/** Object keys of source uploads: `audio-files/{account id}/{audio file id}`. */
export const AUDIO_FILE_KEY_PREFIX = "audio-files/";

export const audioFileObjectKey = (accountId: string, audioFileId: string) =>
	`${AUDIO_FILE_KEY_PREFIX}${accountId}/${audioFileId}`;

/** The audio file id from an object key, or null when the key is not an audio file's. */
export function audioFileIdFromKey(key: string): string | null {
	if (!key.startsWith(AUDIO_FILE_KEY_PREFIX)) return null;
	const parts = key.slice(AUDIO_FILE_KEY_PREFIX.length).split("/");
	return parts.length === 2 && parts[1] ? parts[1] : null;
}
