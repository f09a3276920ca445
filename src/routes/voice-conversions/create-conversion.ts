import { findAudioFile } from "../../audio-files/audio-file-store.ts";
import { envelope } from "../../contracts/common.ts";
import { CreateConversionBody, VoiceConversion } from "../../contracts/voice-conversions.ts";
import { insertConversion, type SourcePreprocessing } from "../../conversions/conversion-store.ts";
import { preprocessingFailure } from "../../conversions/failure-messages.ts";
import { presentConversion } from "../../conversions/present-conversion.ts";
import { promoteIfReady } from "../../conversions/promotion.ts";
import { failConversion } from "../../conversions/state-machine.ts";
import { ApiError, notFound } from "../../http/errors.ts";
import { IdempotencyHeaders } from "../../http/idempotency.ts";
import { created } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { findActiveVoice } from "../../voices/voice-store.ts";

const audioFileFailed = (file: SourcePreprocessing) =>
	new ApiError(
		400,
		"audio_file_failed",
		`The audio file cannot be converted: ${preprocessingFailure(file.preprocessingErrorCode, file.preprocessingError).message}`,
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
		201: { description: "The conversion, in status pending_preprocessing", schema: envelope(VoiceConversion) },
		400: { description: "Invalid request, or an audio file whose preprocessing failed" },
		404: { description: "No such audio file (for this account) or voice model" },
		409: { description: "Idempotency-Key reused with another body, or still in progress" },
	},
	async handler({ env, request, auth, body }) {
		const file = await findAudioFile(env, auth.accountId, body.audio_file_id);
		if (!file) throw notFound("Audio file");
		if (file.preprocessingStatus === "failed") throw audioFileFailed(file);
		const voice = await findActiveVoice(env, body.voice_model_id);
		if (!voice) throw notFound("Voice model");

		const { conversion, source } = await insertConversion(env, auth.accountId, {
			...body,
			audioFileName: file.fileName,
			voiceModelName: voice.name,
		});
		// Preprocessing that ended between the check above and the insert notified no listener about this
		// conversion, so it is handled here, from the file's state read right after the insert.
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
