import { envelope, IdParams } from "../../contracts/common.ts";
import { RegeneratedSecret } from "../../contracts/webhooks.ts";
import { nowIso } from "../../db/client.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { generateWebhookSecret, sealSecret } from "../../webhooks/secret-box.ts";
import { replaceSecret } from "../../webhooks/subscription-store.ts";
import { SUBSCRIPTIONS_PATH, TAGS } from "./shared.ts";

export const regenerateSecretRoute = defineRoute({
	method: "POST",
	path: `${SUBSCRIPTIONS_PATH}/{id}/regenerate-secret`,
	auth: "base",
	summary: "Replace the signing secret; the old one stops signing at once",
	tags: TAGS,
	params: IdParams,
	responses: {
		200: { description: "The new secret (shown only here)", schema: envelope(RegeneratedSecret) },
		404: { description: "No such subscription for this account" },
	},
	async handler({ env, auth, params }) {
		const secret = generateWebhookSecret();
		const sealed = await sealSecret(env, params.id, secret);
		// Every attempt reads the sealed secret from D1, so the next one (retries included) signs with this.
		if (!(await replaceSecret(env, auth.accountId, params.id, sealed, nowIso()))) {
			throw notFound("Webhook subscription");
		}
		return ok({
			new_secret: secret,
			message:
				"Secret regenerated. The previous secret no longer signs deliveries; store this one now, it is not shown again.",
		});
	},
});
