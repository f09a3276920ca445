import { envelope, IdParams } from "../../contracts/common.ts";
import { TestDeliveryResult } from "../../contracts/webhooks.ts";
import { notFound } from "../../http/errors.ts";
import { enforceRateLimit } from "../../http/rate-limits.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { buildTestPayload } from "../../webhooks/payloads.ts";
import { openSecret } from "../../webhooks/secret-box.ts";
import { sendSignedDelivery } from "../../webhooks/send-delivery.ts";
import { findSubscription, sealedSecretOf } from "../../webhooks/subscription-store.ts";
import { SUBSCRIPTIONS_PATH, TAGS, WEBHOOK_SENDS_LIMITED, webhookSendsKey } from "./shared.ts";

export const testSubscriptionRoute = defineRoute({
	method: "POST",
	path: `${SUBSCRIPTIONS_PATH}/{id}/test`,
	auth: "base",
	summary: "Send a signed webhook.test delivery now (not logged, not counted toward auto-disable)",
	tags: TAGS,
	params: IdParams,
	responses: {
		200: { description: "What was sent, and how the receiver answered", schema: envelope(TestDeliveryResult) },
		404: { description: "No such subscription for this account" },
		429: { description: WEBHOOK_SENDS_LIMITED },
	},
	async handler({ env, auth, params }) {
		const subscription = await findSubscription(env, auth.accountId, params.id);
		if (!subscription) throw notFound("Webhook subscription");
		await enforceRateLimit(env, "WEBHOOK_SEND_RATE_LIMIT", webhookSendsKey(subscription));
		// Sent directly, not through the subscription's object: a test has no retries, no log row and no count.
		const payload = buildTestPayload(subscription.id);
		const outcome = await sendSignedDelivery({
			url: subscription.url,
			secret: await openSecret(env, subscription.id, sealedSecretOf(subscription)),
			payload,
			body: JSON.stringify(payload),
		});
		const message = outcome.delivered
			? `Test webhook delivered: the receiver answered HTTP ${outcome.responseCode}`
			: `Test webhook sent, but it was not accepted: ${outcome.error}`;
		return ok({
			message,
			url: subscription.url,
			test_payload: { event: payload.event, id: payload.id, timestamp: payload.timestamp },
		});
	},
});
