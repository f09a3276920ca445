/**
 * The `webhook-events` consumer: loads the outbox event named by the message, hands it to the
 * `WebhookSubscription` object of every active subscription of its account that subscribed to it, and marks the
 * row sent. Queues deliver at least once and the cron re-sends unsent rows, so this runs more than once per event
 * at times; each object remembers the event ids it accepted and ignores repeats.
 */
import type { EnqueueRequest, OutboxEvent } from "../contracts/webhook-delivery.ts";
import { WebhookEventMessage } from "../contracts/webhooks.ts";
import { findOutboxEvent, markEventSent } from "./event-outbox.ts";
import { subscriptionNameOf } from "./payloads.ts";
import { subscribersOf } from "./subscription-store.ts";

export function subscriptionStub(env: Env, subscriptionId: string) {
	return env.WEBHOOK_SUBSCRIPTION.get(env.WEBHOOK_SUBSCRIPTION.idFromName(subscriptionId));
}

/** Hands an outbox event to its subscribers; returns how many accepted it (repeats not counted). */
export async function fanOutEvent(env: Env, eventId: string): Promise<{ delivered: number; skipped?: string }> {
	const row = await findOutboxEvent(env, eventId);
	if (!row) return { delivered: 0, skipped: "no such event" };
	const name = subscriptionNameOf(row.type);
	if (!name) return { delivered: 0, skipped: `event type ${row.type} is not delivered by webhooks` };

	const event: OutboxEvent = { id: row.id, type: row.type, createdAt: row.createdAt, payload: row.payload };
	const subscribers = await subscribersOf(env, row.accountId, name);
	const results = await Promise.allSettled(
		subscribers.map((subscription) => {
			const request: EnqueueRequest = { subscriptionId: subscription.id, accountId: row.accountId, event };
			return subscriptionStub(env, subscription.id).enqueue(request);
		}),
	);
	const failed = results.filter((r) => r.status === "rejected");
	if (failed.length > 0) {
		// Retry the whole message: objects that already accepted the event will ignore it the second time.
		throw new Error(`${failed.length} of ${results.length} subscriptions did not accept event ${eventId}`);
	}
	await markEventSent(env, row.id);
	return { delivered: results.filter((r) => r.status === "fulfilled" && r.value.status === "accepted").length };
}

export async function handleWebhookEvent(message: Message<unknown>, env: Env): Promise<void> {
	const parsed = WebhookEventMessage.safeParse(message.body);
	if (!parsed.success) {
		// Permanent: retrying a malformed message cannot help. Recorded, then acknowledged.
		console.error(JSON.stringify({ level: "error", msg: "malformed webhook-events message", id: message.id }));
		message.ack();
		return;
	}
	const result = await fanOutEvent(env, parsed.data.event_id);
	if (result.skipped) {
		console.warn(
			JSON.stringify({
				level: "warn",
				msg: "webhook event skipped",
				event_id: parsed.data.event_id,
				why: result.skipped,
			}),
		);
	}
	message.ack();
}
