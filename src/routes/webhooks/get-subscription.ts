import { envelope, IdParams } from "../../contracts/common.ts";
import { WebhookSubscription } from "../../contracts/webhooks.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { findSubscription, presentSubscription } from "../../webhooks/subscription-store.ts";
import { SUBSCRIPTIONS_PATH, TAGS } from "./shared.ts";

export const getSubscriptionRoute = defineRoute({
	method: "GET",
	path: `${SUBSCRIPTIONS_PATH}/{id}`,
	auth: "base",
	summary: "Get one webhook subscription",
	tags: TAGS,
	params: IdParams,
	responses: {
		200: { description: "The subscription", schema: envelope(WebhookSubscription) },
		404: { description: "No such subscription for this account" },
	},
	async handler({ env, auth, params }) {
		const row = await findSubscription(env, auth.accountId, params.id);
		if (!row) throw notFound("Webhook subscription");
		return ok(presentSubscription(row));
	},
});
