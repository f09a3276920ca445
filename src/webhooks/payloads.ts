/** Delivery payloads (spec section 6) and the names events go by. Pure. */

import { VOICE_EVENT_FIELDS } from "../contracts/voices.ts";
import type { OutboxEvent } from "../contracts/webhook-delivery.ts";
import {
	CONVERSION_EVENT_FIELDS,
	type PayloadEvent,
	type SubscribableEvent,
	type WebhookPayload,
} from "../contracts/webhooks.ts";
import { sha256Hex } from "../lib/encoding.ts";

const SUBSCRIPTION_NAMES: Record<string, SubscribableEvent> = {
	"conversion.completed": "conversion_completed",
	"conversion.failed": "conversion_failed",
	"voice.ready": "voice_ready",
	"voice.failed": "voice_failed",
};

/** The subscribe-with name of an outbox event type (`conversion.completed` → `conversion_completed`), or null. */
export const subscriptionNameOf = (type: string): SubscribableEvent | null => SUBSCRIPTION_NAMES[type] ?? null;

/** The `X-Webhook-Event` value: the underscore form of the payload event. */
export const headerEventName = (event: PayloadEvent): string => event.replaceAll(".", "_");

/**
 * The payload `id` (= `X-Webhook-Id`) of an event delivered to one subscription: derived, not random, so every
 * attempt, duplicate queue message and redelivery of that event to that subscription carries the same id, while
 * two subscriptions never share one. Formatted as a UUID (version 8, RFC 9562 custom) from SHA-256.
 */
export async function webhookIdFor(subscriptionId: string, eventId: string): Promise<string> {
	const hex = (await sha256Hex(`webhook-delivery:${subscriptionId}:${eventId}`)).slice(0, 32).split("");
	hex[12] = "8";
	hex[16] = ((Number.parseInt(hex[16] as string, 16) & 0x3) | 0x8).toString(16);
	const s = hex.join("");
	return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`;
}

/**
 * `data.conversion` holds exactly the section 6 fields, whatever else the outbox row carries: the allow-list is
 * what guarantees `output_url` never leaves in a webhook. `error_message` is added for failures.
 */
export function conversionEventData(type: string, payload: Record<string, unknown>): Record<string, unknown> {
	const source = (payload.conversion ?? {}) as Record<string, unknown>;
	const conversion: Record<string, unknown> = {};
	for (const field of CONVERSION_EVENT_FIELDS) {
		if (field in source) conversion[field] = source[field];
	}
	if (type === "conversion.failed") conversion.error_message = source.error_message ?? null;
	return { conversion };
}

/** `data.voice` for `voice.ready` / `voice.failed`: exactly the listed fields of the account's voice. */
export function voiceEventData(payload: Record<string, unknown>): Record<string, unknown> {
	const source = (payload.voice ?? {}) as Record<string, unknown>;
	return { voice: Object.fromEntries(VOICE_EVENT_FIELDS.filter((f) => f in source).map((f) => [f, source[f]])) };
}

export async function buildEventPayload(event: OutboxEvent, subscriptionId: string): Promise<WebhookPayload> {
	return {
		event: event.type as PayloadEvent,
		id: await webhookIdFor(subscriptionId, event.id),
		timestamp: event.createdAt,
		data: event.type.startsWith("voice.")
			? voiceEventData(event.payload)
			: conversionEventData(event.type, event.payload),
	};
}

export function buildTestPayload(subscriptionId: string, now = new Date()): WebhookPayload {
	return {
		event: "webhook.test",
		id: crypto.randomUUID(),
		timestamp: now.toISOString(),
		data: {
			message: "This is a test delivery from the voice conversion service.",
			subscription_id: subscriptionId,
		},
	};
}
