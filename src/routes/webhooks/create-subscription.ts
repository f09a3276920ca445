import { envelope } from "../../contracts/common.ts";
import { CreatedWebhookSubscription, CreateSubscriptionBody } from "../../contracts/webhooks.ts";
import { nowIso } from "../../db/client.ts";
import { created } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { generateWebhookSecret, sealSecret } from "../../webhooks/secret-box.ts";
import {
	findSubscription,
	insertSubscriptionWithinLimit,
	presentSubscription,
} from "../../webhooks/subscription-store.ts";
import { acceptableWebhookUrl, SUBSCRIPTIONS_PATH, subscriptionLimitReached, TAGS } from "./shared.ts";

export const createSubscriptionRoute = defineRoute({
	method: "POST",
	path: SUBSCRIPTIONS_PATH,
	auth: "base",
	summary: "Create a webhook subscription (the response is the only one that shows its signing secret)",
	tags: TAGS,
	body: CreateSubscriptionBody,
	responses: {
		201: { description: "The subscription, with its secret", schema: envelope(CreatedWebhookSubscription) },
		400: { description: "Invalid url or events" },
		409: { description: "`subscription_limit_reached`: 5 active subscriptions already" },
	},
	async handler({ env, auth, body }) {
		const url = acceptableWebhookUrl(env, body.url);
		const id = crypto.randomUUID();
		const secret = generateWebhookSecret();
		const inserted = await insertSubscriptionWithinLimit(env, {
			id,
			accountId: auth.accountId,
			url,
			description: body.description ?? null,
			events: body.events,
			sealed: await sealSecret(env, id, secret),
			now: nowIso(),
		});
		if (!inserted) throw subscriptionLimitReached();
		const row = await findSubscription(env, auth.accountId, id);
		if (!row) throw new Error("subscription vanished right after insert");
		return created({ ...presentSubscription(row), secret });
	},
});
