import { z } from "zod";
import { envelope, IdParams } from "../../contracts/common.ts";
import { AccountVoice, VoiceModel } from "../../contracts/voices.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { presentVisibleVoice } from "../../voices/present-voice.ts";
import { findVisibleVoice, findVoiceFiles } from "../../voices/voice-store.ts";

export const getVoiceRoute = defineRoute({
	method: "GET",
	path: "/api/v1/voices/{id}",
	auth: "base",
	summary: "Get one voice model",
	tags: ["Voices"],
	params: IdParams,
	responses: {
		200: { description: "The voice model", schema: envelope(z.union([AccountVoice, VoiceModel])) },
		404: { description: "No such voice (another account's voices do not exist for the caller)" },
	},
	async handler({ env, request, auth, params }) {
		const voice = await findVisibleVoice(env, auth.accountId, params.id);
		if (!voice) throw notFound("Voice model");
		const files = voice.accountId ? await findVoiceFiles(env, [voice.id]) : [];
		return ok(await presentVisibleVoice(env, publicOrigin(env, request.url), voice, files));
	},
});
