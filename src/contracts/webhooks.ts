/** Webhook subscriptions, the delivery log and delivery payloads (spec sections 2, 4 and 6). */
import { z } from "zod";
import { Id, integerText, Timestamp } from "./common.ts";

/** Names a client subscribes with, also sent as `X-Webhook-Event` (underscore form). */
export const SUBSCRIBABLE_EVENTS = [
	"conversion_completed",
	"conversion_failed",
	"voice_ready",
	"voice_failed",
] as const;
export type SubscribableEvent = (typeof SUBSCRIBABLE_EVENTS)[number];

/** Payload `event` names (dot form), as written to the `events` outbox by conversions. */
export const PAYLOAD_EVENTS = [
	"conversion.completed",
	"conversion.failed",
	"voice.ready",
	"voice.failed",
	"webhook.test",
] as const;
export type PayloadEvent = (typeof PAYLOAD_EVENTS)[number];

export const MAX_ACTIVE_SUBSCRIPTIONS = 5;
export const MAX_WEBHOOK_URL_LENGTH = 2048;
export const MAX_DESCRIPTION_LENGTH = 500;

/** Non-empty, only known names; repeated names are accepted and kept once. */
const EventList = z
	.array(z.enum(SUBSCRIBABLE_EVENTS, { error: `must be one of ${SUBSCRIBABLE_EVENTS.join(", ")}` }))
	.min(1, { error: "must name at least one event" })
	.transform((names) => [...new Set(names)]);

// The URL's form is checked here; whether it is public and HTTPS depends on configuration and is checked by
// `checkWebhookUrl` in the handler, so that `ALLOW_LOCAL_WEBHOOK_URLS` can widen it in local development.
const WebhookUrl = z.string().trim().min(1).max(MAX_WEBHOOK_URL_LENGTH);

export const CreateSubscriptionBody = z.strictObject({
	url: WebhookUrl,
	events: EventList,
	description: z.string().max(MAX_DESCRIPTION_LENGTH).optional(),
});

export const UpdateSubscriptionBody = z
	.strictObject({
		url: WebhookUrl.optional(),
		events: EventList.optional(),
		description: z.string().max(MAX_DESCRIPTION_LENGTH).nullable().optional(),
		is_active: z.boolean().optional(),
	})
	.refine((body) => Object.values(body).some((value) => value !== undefined), {
		error: "name at least one of url, events, description, is_active",
	});

export const WebhookSubscription = z.object({
	id: Id,
	url: z.string(),
	description: z.string().nullable(),
	events: z.array(z.enum(SUBSCRIBABLE_EVENTS)),
	is_active: z.boolean(),
	last_success_at: Timestamp.nullable(),
	last_failure_at: Timestamp.nullable(),
	consecutive_failures: z.number().int(),
	created_at: Timestamp,
	updated_at: Timestamp,
});
export type WebhookSubscription = z.infer<typeof WebhookSubscription>;

/** Only the creation response carries the secret. */
export const CreatedWebhookSubscription = WebhookSubscription.extend({ secret: z.string() });

export const RegeneratedSecret = z.object({ new_secret: z.string(), message: z.string() });

export const DeletedSubscription = z.object({ id: Id, deleted: z.literal(true) });

export const TestDeliveryResult = z.object({
	message: z.string(),
	url: z.string(),
	test_payload: z.object({ event: z.literal("webhook.test"), id: Id, timestamp: Timestamp }),
});

export const DELIVERY_LOG_DEFAULT_LIMIT = 50;
export const DELIVERY_LOG_MAX_LIMIT = 100;

export const DeliveryLogQuery = z.object({
	limit: z.preprocess(
		integerText,
		z
			.number({ error: "must be an integer" })
			.int({ error: "must be an integer" })
			.min(1, { error: "must be at least 1" })
			.max(DELIVERY_LOG_MAX_LIMIT, { error: `must be at most ${DELIVERY_LOG_MAX_LIMIT}` })
			.default(DELIVERY_LOG_DEFAULT_LIMIT),
	),
});

export const DeliveryParams = z.object({ id: Id, delivery_id: Id });

export const DELIVERY_STATUS_VALUES = ["pending", "delivered", "failed", "abandoned"] as const;

/**
 * One delivery attempt. `pending`: in flight. `delivered`: 2xx. `failed`: failed, `next_retry_at` says when the
 * next attempt runs. `abandoned`: failed and no attempt follows (fifth attempt, or the subscription was disabled).
 */
export const DeliveryLogEntry = z.object({
	id: Id,
	subscription_id: Id,
	event: z.string(),
	/** The outbox event this delivery carries. */
	event_id: Id,
	/** The payload `id` and `X-Webhook-Id` the receiver saw: the same for every attempt and redelivery of the event. */
	webhook_id: Id,
	attempt: z.number().int(),
	status: z.enum(DELIVERY_STATUS_VALUES),
	response_code: z.number().int().nullable(),
	error: z.string().nullable(),
	duration_ms: z.number().int().nullable(),
	created_at: Timestamp,
	completed_at: Timestamp.nullable(),
	next_retry_at: Timestamp.nullable(),
});

export const RedeliveryAccepted = z.object({
	message: z.string(),
	event_id: Id,
	webhook_id: Id,
});

export { CONVERSION_EVENT_FIELDS } from "./voice-conversions.ts";

/** The body every delivery carries. */
export interface WebhookPayload {
	event: PayloadEvent;
	id: string;
	timestamp: string;
	data: Record<string, unknown>;
}

/** The message on `webhook-events`: ids only (the outbox row holds the rest). */
export const WebhookEventMessage = z.object({ event_id: z.string().min(1) });
