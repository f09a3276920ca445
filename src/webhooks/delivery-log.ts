/**
 * The delivery log: one `webhook_deliveries` row per attempt, written by the `WebhookSubscription` Durable Object
 * (`pending` when the attempt starts, then `delivered`, `failed` with `next_retry_at`, or `abandoned`) and read by
 * the API. Test deliveries are never written here.
 */
import { and, desc, eq, inArray, isNull, sql } from "drizzle-orm";
import type { z } from "zod";
import type { DeliveryLogEntry } from "../contracts/webhooks.ts";
import { database } from "../db/client.ts";
import { webhookDeliveries } from "../db/schema.ts";
import { webhookIdFor } from "./payloads.ts";

export type DeliveryRow = typeof webhookDeliveries.$inferSelect;
export type DeliveryStatus = DeliveryRow["status"];

export interface AttemptStart {
	id: string;
	subscriptionId: string;
	accountId: string;
	eventId: string;
	eventType: string;
	attempt: number;
	startedAt: string;
}

export async function logAttemptStarted(env: Env, attempt: AttemptStart): Promise<void> {
	await database(env)
		.insert(webhookDeliveries)
		.values({
			id: attempt.id,
			subscriptionId: attempt.subscriptionId,
			accountId: attempt.accountId,
			eventId: attempt.eventId,
			eventType: attempt.eventType,
			attempt: attempt.attempt,
			status: "pending",
			createdAt: attempt.startedAt,
		})
		// The same attempt row may be written twice when an alarm is re-run after a crash.
		.onConflictDoNothing()
		.run();
}

export interface AttemptResult {
	status: Exclude<DeliveryStatus, "pending">;
	responseCode: number | null;
	error: string | null;
	durationMs: number;
	completedAt: string;
	nextRetryAt: string | null;
}

export async function logAttemptFinished(env: Env, id: string, result: AttemptResult): Promise<void> {
	await database(env)
		.update(webhookDeliveries)
		.set({
			status: result.status,
			responseCode: result.responseCode,
			error: result.error,
			durationMs: result.durationMs,
			completedAt: result.completedAt,
			nextRetryAt: result.nextRetryAt,
		})
		.where(eq(webhookDeliveries.id, id))
		.run();
}

/** An attempt that never reported back (its object was evicted or a write failed): closed with what is known. */
export async function logAttemptInterrupted(env: Env, id: string, status: "failed" | "abandoned"): Promise<void> {
	await database(env)
		.update(webhookDeliveries)
		.set({
			status,
			error: "Attempt interrupted before the outcome was recorded",
			completedAt: new Date().toISOString(),
		})
		.where(and(eq(webhookDeliveries.id, id), eq(webhookDeliveries.status, "pending")))
		.run();
}

/** Deliveries dropped before their next attempt (subscription disabled or deleted): their last attempt becomes final. */
export async function logRetriesDropped(env: Env, attemptIds: string[], reason: string): Promise<void> {
	if (attemptIds.length === 0) return;
	await database(env)
		.update(webhookDeliveries)
		.set({
			status: "abandoned",
			nextRetryAt: null,
			error: sql`coalesce(${webhookDeliveries.error} || '; ', '') || ${reason}`,
		})
		.where(and(inArray(webhookDeliveries.id, attemptIds), eq(webhookDeliveries.status, "failed")))
		.run();
}

export async function listDeliveries(env: Env, subscriptionId: string, limit: number): Promise<DeliveryRow[]> {
	return database(env)
		.select()
		.from(webhookDeliveries)
		.where(and(eq(webhookDeliveries.subscriptionId, subscriptionId), isNull(webhookDeliveries.deletedAt)))
		.orderBy(desc(webhookDeliveries.createdAt), desc(sql`rowid`))
		.limit(limit);
}

export async function findDelivery(env: Env, subscriptionId: string, deliveryId: string): Promise<DeliveryRow | null> {
	const row = await database(env).query.webhookDeliveries.findFirst({
		where: and(
			eq(webhookDeliveries.id, deliveryId),
			eq(webhookDeliveries.subscriptionId, subscriptionId),
			isNull(webhookDeliveries.deletedAt),
		),
	});
	return row ?? null;
}

export async function presentDelivery(row: DeliveryRow): Promise<z.infer<typeof DeliveryLogEntry>> {
	return {
		id: row.id,
		subscription_id: row.subscriptionId,
		event: row.eventType,
		event_id: row.eventId,
		webhook_id: await webhookIdFor(row.subscriptionId, row.eventId),
		attempt: row.attempt,
		status: row.status,
		response_code: row.responseCode,
		error: row.error,
		duration_ms: row.durationMs,
		created_at: row.createdAt,
		completed_at: row.completedAt,
		next_retry_at: row.nextRetryAt,
	};
}
