import { and, eq } from "drizzle-orm";
import { envelope, IdParams } from "../../contracts/common.ts";
import { VoiceModel } from "../../contracts/voices.ts";
import { database } from "../../db/client.ts";
import { voices } from "../../db/schema.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { presentVoice } from "../../voices/present-voice.ts";

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
		const voice = await database(env).query.voices.findFirst({
			where: and(eq(voices.id, params.id), eq(voices.isActive, true)),
		});
		if (!voice) throw notFound("Voice model");
		return ok(await presentVoice(env, publicOrigin(env, request.url), voice));
	},
});
