/**
 * What happens around a signed PUT, by object-key prefix. A hook may refuse an upload before any byte is
 * stored (`beforePut`, e.g. a second upload of the same audio file, or one through a superseded address),
 * reacts once the object is in R2 (`afterPut`, e.g. mark the file uploaded and start preprocessing), and hears of
 * a body refused for its size (`tooLarge`, e.g. fail the audio file), or takes the body itself (`store`, e.g. a
 * voice file's part). Keys under no prefix here have no hook.
 *
 * With `staged`, each PUT streams into an object of its own (`stagedUploadKey` in `staged-uploads.ts`: the
 * signed key and a suffix per request), and `afterPut` makes it the file's object in one guarded database update,
 * or deletes it when the upload is refused. Two uploads through one address (racing, or one aborted beside one that
 * finished) then never overwrite or delete each other's bytes: the one the database took is the file's, whichever
 * finished last.
 */
import { AUDIO_FILE_KEY_PREFIX } from "../audio-files/limits.ts";
import { afterAudioUpload, beforeAudioUpload, refuseOversizedAudio } from "../audio-files/upload-hook.ts";
import { dropIfLeaseEnded, OUTPUT_KEY_PREFIX, refuseEndedLease } from "../conversions/output-upload-hook.ts";
import {
	afterVoiceFileUpload,
	beforeVoiceFileUpload,
	storeVoiceFilePart,
	VOICE_FILE_KEY_PREFIX,
	VOICE_PART_KEY_PREFIX,
	voiceFileTooLarge,
} from "../voices/voice-uploads.ts";
import type { StorageGrant } from "./signed-url.ts";

export interface UploadHook {
	prefix: string;
	/** Each PUT stores its body under `stagedUploadKey(grant.key)`, for `afterPut` to make it the file's (above). */
	staged?: boolean;
	/** `length`: the body's Content-Length, under the address's limit (a voice file must be its declared size). */
	beforePut?(env: Env, grant: StorageGrant, length: number): Promise<void>;
	/**
	 * The body is stored, as `object` (under `stagedUploadKey(grant.key)` when `staged`): make it the file's, or
	 * delete it and throw the refusal. Once it is the file's, it must not be deleted whatever fails after.
	 * `startedAt`: when the request began (`Date.now()`), before `beforePut`.
	 */
	afterPut?(env: Env, grant: StorageGrant, object: R2Object, startedAt: number): Promise<void>;
	tooLarge?(env: Env, grant: StorageGrant, declaredBytes: number): Promise<void>;
	/** The 413's message for a body over the address's limit, where the plain one would not say what to do. */
	tooLargeMessage?(grant: StorageGrant, declaredBytes: number): string;
	/**
	 * Takes the body instead of the plain R2 put and answers the request itself (a part of a multipart voice file
	 * goes into its upload, not to an object of its own key).
	 */
	store?(env: Env, grant: StorageGrant, request: Request, length: number): Promise<Response>;
}

const UPLOAD_HOOKS: readonly UploadHook[] = [
	{
		prefix: AUDIO_FILE_KEY_PREFIX,
		staged: true,
		beforePut: beforeAudioUpload,
		afterPut: (env, grant, object) => afterAudioUpload(env, grant, object),
		tooLarge: refuseOversizedAudio,
	},
	{
		prefix: VOICE_FILE_KEY_PREFIX,
		staged: true,
		beforePut: beforeVoiceFileUpload,
		afterPut: afterVoiceFileUpload,
		tooLargeMessage: voiceFileTooLarge,
	},
	{ prefix: VOICE_PART_KEY_PREFIX, store: storeVoiceFilePart },
	// The key is the lease's own: no staging, only the lease's state before and after the body.
	{ prefix: OUTPUT_KEY_PREFIX, beforePut: refuseEndedLease, afterPut: dropIfLeaseEnded },
];

export const uploadHookFor = (key: string) => UPLOAD_HOOKS.find((h) => key.startsWith(h.prefix));
