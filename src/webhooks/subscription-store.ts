/**
 * D1 access for webhook subscriptions. The 5-active limit is enforced inside single statements
 * (`INSERT … SELECT … WHERE (count) < 5`, `UPDATE … WHERE … (count) < 5`), so two concurrent requests cannot both
 * slip past it. Failure counting is an atomic increment that also deactivates at the threshold, so the count stays
 * right whether it races with a PATCH that reactivates or with another attempt.
 */
import { and, desc, eq, isNull } from "drizzle-orm";
import { AUTO_DISABLE_AFTER_FAILURES } from "../contracts/webhook-delivery.ts";
import { MAX_ACTIVE_SUBSCRIPTIONS, type WebhookSubscription } from "../contracts/webhooks.ts";
import { database } from "../db/client.ts";
import { webhookSubscriptions } from "../db/schema.ts";
import type { SealedSecret } from "./secret-box.ts";

export type SubscriptionRow = typeof webhookSubscriptions.$inferSelect;

export function presentSubscription(row: SubscriptionRow): WebhookSubscription {
	return {
		id: row.id,
		url: row.url,
		description: row.description,
		events: row.events as WebhookSubscription["events"],
		is_active: row.isActive,
		last_success_at: row.lastSuccessAt,
		last_failure_at: row.lastFailureAt,
		consecutive_failures: row.consecutiveFailures,
		created_at: row.createdAt,
		updated_at: row.updatedAt,
	};
}

export const sealedSecretOf = (row: SubscriptionRow): SealedSecret => ({
	ciphertext: row.secretCiphertext,
	iv: row.secretIv,
	keyVersion: row.secretKeyVersion,
});

/** An account's subscription; deleted ones and other accounts' are invisible (null). */
export async function findSubscription(env: Env, accountId: string, id: string): Promise<SubscriptionRow | null> {
	const row = await database(env).query.webhookSubscriptions.findFirst({
		where: and(
			eq(webhookSubscriptions.id, id),
			eq(webhookSubscriptions.accountId, accountId),
			isNull(webhookSubscriptions.deletedAt),
		),
	});
	return row ?? null;
}

/** What a delivery needs to know right now: current URL, secret and state (deleted rows included, to notice deletion). */
export async function loadSubscriptionForDelivery(env: Env, id: string): Promise<SubscriptionRow | null> {
	const row = await database(env).query.webhookSubscriptions.findFirst({ where: eq(webhookSubscriptions.id, id) });
	return row ?? null;
}

export function listSubscriptions(env: Env, accountId: string): Promise<SubscriptionRow[]> {
	return database(env)
		.select()
		.from(webhookSubscriptions)
		.where(and(eq(webhookSubscriptions.accountId, accountId), isNull(webhookSubscriptions.deletedAt)))
		.orderBy(desc(webhookSubscriptions.createdAt), desc(webhookSubscriptions.id));
}

/** Active, undeleted subscriptions of an account that subscribed to `eventName`. */
export async function subscribersOf(env: Env, accountId: string, eventName: string): Promise<SubscriptionRow[]> {
	const rows = await database(env)
		.select()
		.from(webhookSubscriptions)
		.where(
			and(
				eq(webhookSubscriptions.accountId, accountId),
				eq(webhookSubscriptions.isActive, true),
				isNull(webhookSubscriptions.deletedAt),
			),
		);
	return rows.filter((row) => row.events.includes(eventName));
}

const ACTIVE_COUNT_SQL = `(SELECT COUNT(*) FROM webhook_subscriptions
	WHERE account_id = ?1 AND is_active = 1 AND deleted_at IS NULL)`;

export interface NewSubscription {
	id: string;
	accountId: string;
	url: string;
	description: string | null;
	events: string[];
	sealed: SealedSecret;
	now: string;
}

/** Inserts an active subscription unless the account already has the maximum; false when refused. */
export async function insertSubscriptionWithinLimit(env: Env, sub: NewSubscription): Promise<boolean> {
	const result = await env.DB.prepare(
		`INSERT INTO webhook_subscriptions (id, account_id, url, description, events, is_active, secret_ciphertext,
			secret_iv, secret_key_version, consecutive_failures, created_at, updated_at)
		 SELECT ?2, ?1, ?3, ?4, ?5, 1, ?6, ?7, ?8, 0, ?9, ?9
		 WHERE ${ACTIVE_COUNT_SQL} < ${MAX_ACTIVE_SUBSCRIPTIONS}`,
	)
		.bind(
			sub.accountId,
			sub.id,
			sub.url,
			sub.description,
			JSON.stringify(sub.events),
			sub.sealed.ciphertext,
			sub.sealed.iv,
			sub.sealed.keyVersion,
			sub.now,
		)
		.run();
	return result.meta.changes === 1;
}

export interface SubscriptionChanges {
	url?: string;
	description?: string | null;
	events?: string[];
	isActive?: boolean;
}

export type UpdateResult = "updated" | "not_found" | "limit_reached";

/**
 * Partial update. Turning a subscription on (from off) resets `consecutive_failures` and is refused when the
 * account already has the maximum of active subscriptions.
 */
export async function updateSubscription(
	env: Env,
	accountId: string,
	id: string,
	changes: SubscriptionChanges,
	now: string,
): Promise<UpdateResult> {
	const sets: string[] = ["updated_at = ?3"];
	const values: unknown[] = [accountId, id, now];
	const set = (column: string, value: unknown) => {
		values.push(value);
		sets.push(`${column} = ?${values.length}`);
	};
	if (changes.url !== undefined) set("url", changes.url);
	if (changes.description !== undefined) set("description", changes.description);
	if (changes.events !== undefined) set("events", JSON.stringify(changes.events));
	let guard = "";
	if (changes.isActive === false) set("is_active", 0);
	if (changes.isActive === true) {
		// Only an actual reactivation resets the count and needs a free slot; PATCHing an active one is a no-op.
		sets.push("consecutive_failures = CASE WHEN is_active = 1 THEN consecutive_failures ELSE 0 END", "is_active = 1");
		guard = ` AND (is_active = 1 OR ${ACTIVE_COUNT_SQL} < ${MAX_ACTIVE_SUBSCRIPTIONS})`;
	}
	const result = await env.DB.prepare(
		`UPDATE webhook_subscriptions SET ${sets.join(", ")}
		 WHERE id = ?2 AND account_id = ?1 AND deleted_at IS NULL${guard}`,
	)
		.bind(...values)
		.run();
	if (result.meta.changes === 1) return "updated";
	return (await findSubscription(env, accountId, id)) ? "limit_reached" : "not_found";
}

export async function replaceSecret(
	env: Env,
	accountId: string,
	id: string,
	sealed: SealedSecret,
	now: string,
): Promise<boolean> {
	const result = await database(env)
		.update(webhookSubscriptions)
		.set({
			secretCiphertext: sealed.ciphertext,
			secretIv: sealed.iv,
			secretKeyVersion: sealed.keyVersion,
			updatedAt: now,
		})
		.where(
			and(
				eq(webhookSubscriptions.id, id),
				eq(webhookSubscriptions.accountId, accountId),
				isNull(webhookSubscriptions.deletedAt),
			),
		)
		.run();
	return result.meta.changes === 1;
}

/** Soft delete: the subscription and its delivery log are marked deleted in one batch. */
export async function softDeleteSubscription(env: Env, accountId: string, id: string, now: string): Promise<boolean> {
	const [subscription] = await env.DB.batch([
		env.DB.prepare(
			`UPDATE webhook_subscriptions SET deleted_at = ?3, is_active = 0, updated_at = ?3
			 WHERE id = ?2 AND account_id = ?1 AND deleted_at IS NULL`,
		).bind(accountId, id, now),
		env.DB.prepare(
			`UPDATE webhook_deliveries SET deleted_at = ?3
			 WHERE subscription_id = ?2 AND account_id = ?1 AND deleted_at IS NULL
			   AND EXISTS (SELECT 1 FROM webhook_subscriptions WHERE id = ?2 AND deleted_at = ?3)`,
		).bind(accountId, id, now),
	]);
	return subscription?.meta.changes === 1;
}

export async function recordDeliverySuccess(env: Env, id: string, now: string): Promise<void> {
	await database(env)
		.update(webhookSubscriptions)
		.set({ consecutiveFailures: 0, lastSuccessAt: now })
		.where(eq(webhookSubscriptions.id, id))
		.run();
}

/** Counts one failed attempt; at the threshold the subscription turns inactive. Returns the state after. */
export async function recordDeliveryFailure(
	env: Env,
	id: string,
	now: string,
): Promise<{ consecutiveFailures: number; isActive: boolean } | null> {
	const row = await env.DB.prepare(
		`UPDATE webhook_subscriptions
		 SET consecutive_failures = consecutive_failures + 1,
		     last_failure_at = ?2,
		     is_active = CASE WHEN consecutive_failures + 1 >= ${AUTO_DISABLE_AFTER_FAILURES} THEN 0 ELSE is_active END,
		     updated_at = CASE WHEN consecutive_failures + 1 >= ${AUTO_DISABLE_AFTER_FAILURES} AND is_active = 1 THEN ?2 ELSE updated_at END
		 WHERE id = ?1 AND deleted_at IS NULL
		 RETURNING consecutive_failures, is_active`,
	)
		.bind(id, now)
		.first<{ consecutive_failures: number; is_active: number }>();
	return row ? { consecutiveFailures: row.consecutive_failures, isActive: row.is_active === 1 } : null;
}
