import { envelope, IdParams } from "../../contracts/common.ts";
import { VoiceModel } from "../../contracts/voices.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { presentVoice } from "../../voices/present-voice.ts";
import { findActiveVoice } from "../../voices/voice-store.ts";

export const getVoiceRoute = defineRoute({
	method: "GET",
	path: "/api/v1/voices/{id}",
	auth: "base",
	summary: "Get one voice model",
	tags: ["Voices"],
	params: IdParams,
	responses: {
		200: { description: "The voice model", schema: envelope(VoiceModel) },
		404: { description: "No such voice" },
	},
	async handler({ env, request, params }) {
		const voice = await findActiveVoice(env, params.id);
		if (!voice) throw notFound("Voice model");
		return ok(await presentVoice(env, publicOrigin(env, request.url), voice));
	},
});
