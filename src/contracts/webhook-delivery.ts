/**
 * The contract between the Worker and the `WebhookSubscription` Durable Object: what the fan-out hands each
 * subscription's object, and the delivery constant the subscription store shares with it. Types and constants
 * only, so that the Worker and the object import it and neither imports the other.
 */

/** Failed attempts in a row (of any event) after which a subscription is deactivated (spec section 6). */
export const AUTO_DISABLE_AFTER_FAILURES = 10;

/** An outbox row (`events`), as handed to a subscription's object. */
export interface OutboxEvent {
	id: string;
	type: string;
	createdAt: string;
	payload: Record<string, unknown>;
}

export interface EnqueueRequest {
	subscriptionId: string;
	accountId: string;
	event: OutboxEvent;
	/** An explicit redelivery from the API: delivered again even though the event id was seen before. */
	redelivery?: boolean;
}

export type EnqueueResult = { status: "accepted"; webhookId: string } | { status: "duplicate" };
