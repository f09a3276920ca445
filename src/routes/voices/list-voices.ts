import { z } from "zod";
import { envelope } from "../../contracts/common.ts";
import { VoiceModel } from "../../contracts/voices.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { presentVoice } from "../../voices/present-voice.ts";
import { listActiveVoices } from "../../voices/voice-store.ts";

export const listVoicesRoute = defineRoute({
	method: "GET",
	path: "/api/v1/voices",
	auth: "base",
	summary: "List voice models",
	tags: ["Voices"],
	responses: { 200: { description: "All available voice models", schema: envelope(z.array(VoiceModel)) } },
	async handler({ env, request }) {
		const rows = await listActiveVoices(env);
		const origin = publicOrigin(env, request.url);
		return ok(await Promise.all(rows.map((row) => presentVoice(env, origin, row))));
	},
});
