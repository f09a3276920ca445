import { findAudioFile } from "../../audio-files/audio-file-store.ts";
import { envelope } from "../../contracts/common.ts";
import { CreateConversionBody, VoiceConversion } from "../../contracts/voice-conversions.ts";
import { insertConversion } from "../../conversions/conversion-store.ts";
import { preprocessingFailure } from "../../conversions/failure-messages.ts";
import { presentConversion } from "../../conversions/present-conversion.ts";
import { promoteIfReady } from "../../conversions/promotion.ts";
import { failConversion } from "../../conversions/state-machine.ts";
import { ApiError, notFound } from "../../http/errors.ts";
import { IdempotencyHeaders } from "../../http/idempotency.ts";
import { created } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { checkVoiceCanHonour } from "../../voices/voice-capabilities.ts";
import { acceptedVoiceParams, findVisibleVoice, type VoiceRow } from "../../voices/voice-store.ts";

const voiceNotReady = (voice: VoiceRow) =>
	new ApiError(
		409,
		"voice_not_ready",
		voice.status === "failed"
			? `Voice "${voice.name}" failed validation and cannot convert: ${voice.errorMessage ?? "no reason recorded"}`
			: `Voice "${voice.name}" is not ready yet (status ${voice.status}): ${
					voice.status === "awaiting_upload" ? "upload its files, then wait" : "wait"
				} for validation to make it ready`,
	);

export const createConversionRoute = defineRoute({
	method: "POST",
	path: "/api/v1/voice-conversions",
	auth: "base",
	summary: "Create a voice conversion",
	tags: ["Voice conversions"],
	body: CreateConversionBody,
	headers: IdempotencyHeaders,
	idempotent: true,
	responses: {
		201: {
			description:
				"The conversion, in status pending_preprocessing. A source whose preprocessing already failed (or whose upload was refused) is accepted too: the conversion then fails at once with the file's reason, and a `conversion.failed` event is sent, as when preprocessing fails later",
			schema: envelope(VoiceConversion),
		},
		400: {
			description:
				"Invalid request (`invalid_request`, naming the field), or a `voice_settings` entry or `pitch_shift: auto` " +
				"the voice cannot honour (`unsupported_voice_setting`, naming the field)",
		},
		404: { description: "No such audio file (for this account) or voice model (service voices and your own)" },
		409: {
			description:
				"Idempotency-Key reused with another body, or still in progress; `voice_not_ready`: your voice is not " +
				"`ready` yet (awaiting upload, validating) or failed validation",
		},
	},
	async handler({ env, request, auth, body }) {
		const file = await findAudioFile(env, auth.accountId, body.audio_file_id);
		if (!file) throw notFound("Audio file");
		const voice = await findVisibleVoice(env, auth.accountId, body.voice_model_id);
		if (!voice) throw notFound("Voice model");
		if (voice.status !== "ready") throw voiceNotReady(voice);
		await checkVoiceCanHonour(env, voice, body);

		const inserted = await insertConversion(env, auth.accountId, {
			...body,
			audioFileName: file.fileName,
			voiceModelName: voice.name,
			// The defaults `voice_settings` was checked against are the ones it runs with: a later change of the voice
			// (PATCH, or an operator's update) applies to conversions accepted after it.
			voiceParams: acceptedVoiceParams(voice),
		});
		// Deleted since they were found above (the insert checks both in its own statement).
		if (!inserted) throw notFound((await findAudioFile(env, auth.accountId, file.id)) ? "Voice model" : "Audio file");
		const { conversion, source } = inserted;
		// No listener will hear of this conversion for preprocessing that ended before the insert (or failed long
		// ago), so it is handled here from the file's state read right after the insert: a failed source fails the
		// conversion through the state machine and the outbox, exactly as a failure reported later would.
		if (source?.preprocessingStatus === "ready") {
			await promoteIfReady(env, conversion.id);
		} else if (source?.preprocessingStatus === "failed") {
			await failConversion(
				env,
				conversion.id,
				preprocessingFailure(source.preprocessingErrorCode, source.preprocessingError),
			);
		}
		// The response is the conversion as created (spec: `pending_preprocessing`, null timestamps); a GET
		// right after shows where it went from there.
		return created(await presentConversion(env, publicOrigin(env, request.url), conversion));
	},
});
