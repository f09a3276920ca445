import { z } from "zod";
import { envelope } from "../../contracts/common.ts";
import { WebhookSubscription } from "../../contracts/webhooks.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { listSubscriptions, presentSubscription } from "../../webhooks/subscription-store.ts";
import { SUBSCRIPTIONS_PATH, TAGS } from "./shared.ts";

export const listSubscriptionsRoute = defineRoute({
	method: "GET",
	path: SUBSCRIPTIONS_PATH,
	auth: "base",
	summary: "List the account's webhook subscriptions (newest first)",
	tags: TAGS,
	responses: { 200: { description: "Subscriptions, without secrets", schema: envelope(z.array(WebhookSubscription)) } },
	async handler({ env, auth }) {
		return ok((await listSubscriptions(env, auth.accountId)).map(presentSubscription));
	},
});
