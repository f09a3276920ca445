import { envelope, IdParams } from "../../contracts/common.ts";
import { CreatedVoice } from "../../contracts/voices.ts";
import { conflict, notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { presentAccountVoice } from "../../voices/present-voice.ts";
import { findOwnVoice, findVoiceFiles } from "../../voices/voice-store.ts";
import { retireUploadAddresses, uploadAddresses } from "../../voices/voice-uploads.ts";

export const regenerateVoiceUploadUrlsRoute = defineRoute({
	method: "POST",
	path: "/api/v1/voices/{id}/upload-urls",
	auth: "base",
	summary: "Fresh upload addresses for the files of your voice still awaiting upload",
	tags: ["Voices"],
	params: IdParams,
	responses: {
		200: {
			description:
				"The voice with `uploads` for each file not uploaded yet, valid another 30 minutes (parts already received " +
				"are kept: send only the missing ones, then complete). Every address handed out before for these files " +
				"stops working at once (403 `upload_url_superseded`)",
			schema: envelope(CreatedVoice),
		},
		404: { description: "No such voice among yours" },
		409: { description: "`already_uploaded`: every file of the voice is in" },
	},
	async handler({ env, request, auth, params }) {
		const voice = await findOwnVoice(env, auth.accountId, params.id);
		if (!voice) throw notFound("Voice model");
		if ((await findVoiceFiles(env, [voice.id])).every((file) => file.uploadStatus === "uploaded")) {
			throw conflict("already_uploaded", "Every file of this voice is already uploaded");
		}
		await retireUploadAddresses(env, voice.id);
		const files = await findVoiceFiles(env, [voice.id]);
		const origin = publicOrigin(env, request.url);
		return ok({
			...(await presentAccountVoice(env, origin, voice, files)),
			uploads: await uploadAddresses(env, origin, files),
		});
	},
});
