import { envelope, IdParams } from "../../contracts/common.ts";
import { VoiceConversion } from "../../contracts/voice-conversions.ts";
import { findAccountConversion } from "../../conversions/conversion-store.ts";
import { presentConversion } from "../../conversions/present-conversion.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";

export const getConversionRoute = defineRoute({
	method: "GET",
	path: "/api/v1/voice-conversions/{id}",
	auth: "base",
	summary: "Get a voice conversion",
	tags: ["Voice conversions"],
	params: IdParams,
	responses: {
		200: {
			description: "The conversion; once completed it carries a fresh output_url valid 12 hours",
			schema: envelope(VoiceConversion),
		},
		404: { description: "No such conversion for this account" },
	},
	async handler({ env, request, auth, params }) {
		const row = await findAccountConversion(env, auth.accountId, params.id);
		if (!row) throw notFound("Voice conversion");
		return ok(await presentConversion(env, publicOrigin(env, request.url), row), {
			headers: { "Cache-Control": "no-store" },
		});
	},
});
