import { z } from "zod";
import { envelope } from "../../contracts/common.ts";
import { AccountVoice, VoiceListQuery, VoiceModel } from "../../contracts/voices.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { presentVisibleVoice } from "../../voices/present-voice.ts";
import { findVoiceFiles, listVisibleVoices } from "../../voices/voice-store.ts";

export const listVoicesRoute = defineRoute({
	method: "GET",
	path: "/api/v1/voices",
	auth: "base",
	summary: "List voice models: the service's and the caller's own",
	tags: ["Voices"],
	query: VoiceListQuery,
	responses: {
		200: {
			description:
				"Every voice the caller can use or is uploading, by name. Service voices (`owner: service`) carry the spec's " +
				"fields plus `owner` and `status`; the caller's own (`owner: account`) also their settings, files and status.",
			schema: envelope(z.array(z.union([AccountVoice, VoiceModel]))),
		},
	},
	async handler({ env, request, auth, query }) {
		const rows = await listVisibleVoices(env, auth.accountId, query);
		const files = await findVoiceFiles(
			env,
			rows.filter((row) => row.accountId).map((row) => row.id),
		);
		const origin = publicOrigin(env, request.url);
		return ok(await Promise.all(rows.map((row) => presentVisibleVoice(env, origin, row, files))));
	},
});
