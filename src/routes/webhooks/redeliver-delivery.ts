import { envelope } from "../../contracts/common.ts";
import { DeliveryParams, RedeliveryAccepted } from "../../contracts/webhooks.ts";
import { conflict, notFound } from "../../http/errors.ts";
import { enforceRateLimit } from "../../http/rate-limits.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { findDelivery } from "../../webhooks/delivery-log.ts";
import { findOutboxEvent } from "../../webhooks/event-outbox.ts";
import { subscriptionStub } from "../../webhooks/fan-out-consumer.ts";
import { findSubscription } from "../../webhooks/subscription-store.ts";
import { SUBSCRIPTIONS_PATH, TAGS, WEBHOOK_SENDS_LIMITED, webhookSendsKey } from "./shared.ts";

export const redeliverDeliveryRoute = defineRoute({
	method: "POST",
	path: `${SUBSCRIPTIONS_PATH}/{id}/deliveries/{delivery_id}/redeliver`,
	auth: "base",
	summary: "Deliver the event of a logged attempt again (same payload id; new attempts and retries are logged)",
	tags: TAGS,
	params: DeliveryParams,
	responses: {
		202: { description: "Redelivery scheduled", schema: envelope(RedeliveryAccepted) },
		404: { description: "No such subscription or delivery for this account" },
		409: { description: "`subscription_inactive`: reactivate the subscription first" },
		429: { description: WEBHOOK_SENDS_LIMITED },
	},
	async handler({ env, auth, params }) {
		const subscription = await findSubscription(env, auth.accountId, params.id);
		if (!subscription) throw notFound("Webhook subscription");
		const delivery = await findDelivery(env, subscription.id, params.delivery_id);
		if (!delivery) throw notFound("Delivery");
		if (!subscription.isActive) {
			throw conflict("subscription_inactive", "The subscription is inactive; reactivate it before redelivering");
		}
		const event = await findOutboxEvent(env, delivery.eventId);
		if (!event) throw notFound("Event");
		await enforceRateLimit(env, "WEBHOOK_SEND_RATE_LIMIT", webhookSendsKey(subscription));
		const result = await subscriptionStub(env, subscription.id).enqueue({
			subscriptionId: subscription.id,
			accountId: subscription.accountId,
			event: { id: event.id, type: event.type, createdAt: event.createdAt, payload: event.payload },
			redelivery: true,
		});
		if (result.status !== "accepted") throw new Error("redelivery was not accepted");
		return ok(
			{
				message: "Redelivery scheduled: the event is sent again at once, with retries, under the same id",
				event_id: event.id,
				webhook_id: result.webhookId,
			},
			{ status: 202 },
		);
	},
});
