import { envelope, IdParams } from "../../contracts/common.ts";
import { UpdateSubscriptionBody, WebhookSubscription } from "../../contracts/webhooks.ts";
import { nowIso } from "../../db/client.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { findSubscription, presentSubscription, updateSubscription } from "../../webhooks/subscription-store.ts";
import { acceptableWebhookUrl, SUBSCRIPTIONS_PATH, subscriptionLimitReached, TAGS } from "./shared.ts";

export const updateSubscriptionRoute = defineRoute({
	method: "PATCH",
	path: `${SUBSCRIPTIONS_PATH}/{id}`,
	auth: "base",
	summary: "Change url, description, events or is_active; reactivation resets consecutive_failures",
	tags: TAGS,
	params: IdParams,
	body: UpdateSubscriptionBody,
	responses: {
		200: { description: "The updated subscription", schema: envelope(WebhookSubscription) },
		400: { description: "Invalid field" },
		404: { description: "No such subscription for this account" },
		409: { description: "`subscription_limit_reached`: reactivating would exceed 5 active subscriptions" },
	},
	async handler({ env, auth, params, body }) {
		const result = await updateSubscription(
			env,
			auth.accountId,
			params.id,
			{
				url: body.url === undefined ? undefined : acceptableWebhookUrl(env, body.url),
				description: body.description,
				events: body.events,
				isActive: body.is_active,
			},
			nowIso(),
		);
		if (result === "not_found") throw notFound("Webhook subscription");
		if (result === "limit_reached") throw subscriptionLimitReached();
		const row = await findSubscription(env, auth.accountId, params.id);
		if (!row) throw notFound("Webhook subscription");
		return ok(presentSubscription(row));
	},
});
