/**
 * TypeScript SDK for the voice conversion API. Runs wherever `fetch`, web streams and WebCrypto exist: Node 20+,
 * Cloudflare Workers, Deno, Bun, browsers.
 *
 * @example
 * ```ts
 * import { VoiceConversionClient } from "./sdk/index.ts";
 * import { openAsBlob } from "node:fs";
 *
 * const client = new VoiceConversionClient({ baseUrl, clientId, clientSecret });
 * const [voice] = await client.voices.list();
 * const file = await client.uploadAudio(await openAsBlob("take.wav"), { fileName: "take.wav" });
 * const created = await client.conversions.create({ audio_file_id: file.id, voice_model_id: voice.id, pitch_shift: "third_up" });
 * // Or let the service pick the key and tune an RVC voice for this conversion:
 * // client.conversions.create({ ..., pitch_shift: "auto", voice_settings: { index_rate: 0.5, protect: 0.33 } })
 * const done = await client.waitForConversion(created.id);
 * if (done.status === "completed") await writeFile("out.wav", Buffer.from(await (await client.downloadConversion(done)).arrayBuffer()));
 *
 * // Your own RVC voice: upload (progress per file), wait for validation, convert with it.
 * const mine = await client.voices.create(
 *   { name: "My voice", files: { model: { source: await openAsBlob("voice.pth") }, index: { source: await openAsBlob("voice.index") } } },
 *   { onProgress: (role, { loaded, total }) => console.log(role, loaded, total) },
 * );
 * const checked = await client.waitForVoice(mine.id); // status "ready", or "failed" with error_message
 * // A voice published as a zip of its .pth and .index:
 * // client.voices.create({ name: "Theirs", files: await readVoiceArchive(await openAsBlob("voice.zip")) })
 * ```
 */

export type { ApiErrorCode } from "../src/contracts/errors.ts";
export {
	CONVERSION_STATUS_VALUES,
	F0_METHODS,
	PITCH_SHIFT_SEMITONES,
	PITCH_SHIFTS,
	PREVIEW_SECONDS,
	REQUESTED_PITCH_SHIFTS,
} from "../src/contracts/voice-conversions.ts";
export { VOICE_FILE_ROLE_VALUES, VOICE_LIMITS, VOICE_STATUS_VALUES } from "../src/contracts/voices.ts";
export { SUBSCRIBABLE_EVENTS } from "../src/contracts/webhooks.ts";
export {
	type CreateVoiceInput,
	type CreateVoiceOptions,
	defaultTokenUrl,
	type IdempotentRequestOptions,
	type ListConversionsOptions,
	mimeTypeForFileName,
	type RequestOptions,
	type RetryNotice,
	type UploadAudioOptions,
	VOICE_UPLOAD_TRIES,
	VoiceConversionClient,
	type VoiceConversionClientOptions,
	type WaitForVoiceOptions,
	type WaitOptions,
} from "./client.ts";
export { type FieldError, SDK_ERROR_CODES, type SdkErrorCode, VoiceConversionError } from "./errors.ts";
export { type CachedToken, DEFAULT_SCOPE, TokenSource, type TokenStore } from "./token.ts";
export type * from "./types.ts";
export type { ProgressListener, UploadProgress, UploadSource } from "./upload.ts";
export {
	DEFAULT_TOLERANCE_SECONDS,
	type VerifyWebhookInput,
	type VerifyWebhookResult,
	verifyWebhook,
} from "./verify-webhook.ts";
export {
	type ReadVoiceArchiveOptions,
	readVoiceArchive,
	type VoiceArchive,
	type VoiceArchiveFile,
} from "./voice-archive.ts";
