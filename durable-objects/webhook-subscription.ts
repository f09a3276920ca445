/**
 * `WebhookSubscription`: one object per subscription (`idFromName(subscription_id)`). It accepts events from the
 * `webhook-events` consumer (and redeliveries from the API), remembers which event ids it has accepted so a
 * repeated queue message is delivered once, and delivers from its alarm: sign, POST, log the attempt, retry on
 * the schedule of `webhook-delivery-logic.ts` (each delivery on its own), count failures, stop when the subscription
 * is disabled.
 *
 * Storage layout (SQLite in the object):
 *   meta(key, value)            `subscription_id`, `account_id`
 *   seen_events(event_id, accepted_at)   events accepted, for de-duplication (pruned after 14 days)
 *   runs(run_id, event_id, event_type, webhook_id, body, attempts, next_attempt_at, last_log_id, open_log_id)
 *                               deliveries still to attempt; `body` is the exact JSON sent on every attempt
 *
 * The subscription row itself (URL, secret, active flag, failure count) is read from D1 before attempts are started,
 * never cached, so a new URL or a regenerated secret applies to the very next attempt.
 */
import { DurableObject } from "cloudflare:workers";
import type { EnqueueRequest, EnqueueResult } from "../src/contracts/webhook-delivery.ts";
import {
	logAttemptFinished,
	logAttemptInterrupted,
	logAttemptStarted,
	logRetriesDropped,
} from "../src/webhooks/delivery-log.ts";
import { buildEventPayload } from "../src/webhooks/payloads.ts";
import { openSecret } from "../src/webhooks/secret-box.ts";
import { sendSignedDelivery } from "../src/webhooks/send-delivery.ts";
import {
	loadSubscriptionForDelivery,
	recordDeliveryFailure,
	recordDeliverySuccess,
	sealedSecretOf,
} from "../src/webhooks/subscription-store.ts";
import {
	ALARM_WORK_BUDGET_MS,
	attemptsToStart,
	decideAfterAttempt,
	IN_FLIGHT_LEASE_MS,
	MAX_ATTEMPTS,
	SECRET_FAULT_RETRY_MS,
	SEEN_EVENT_RETENTION_MS,
} from "./webhook-delivery-logic.ts";

interface Run {
	run_id: string;
	event_id: string;
	event_type: string;
	webhook_id: string;
	body: string;
	attempts: number;
	next_attempt_at: number;
	/** The latest attempt's log row (closed as `abandoned` if the run is dropped). */
	last_log_id: string | null;
	/** Set while an attempt is under way; still set later means that attempt was interrupted. */
	open_log_id: string | null;
	[key: string]: SqlStorageValue;
}

/** Why an alarm stops starting attempts: the subscription is off (drop what waits) or its secret cannot be opened. */
type Halt = { kind: "drop"; closeLog: boolean } | { kind: "secret_fault" };

export class WebhookSubscription extends DurableObject<Env> {
	/** Set while an alarm waits for its next change; `enqueue` calls it so a new event does not wait. */
	#wake: (() => void) | null = null;

	constructor(ctx: DurableObjectState, env: Env) {
		super(ctx, env);
		ctx.blockConcurrencyWhile(async () => {
			ctx.storage.sql.exec(`
				CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
				CREATE TABLE IF NOT EXISTS seen_events (event_id TEXT PRIMARY KEY, accepted_at INTEGER NOT NULL);
				CREATE TABLE IF NOT EXISTS runs (
					run_id TEXT PRIMARY KEY, event_id TEXT NOT NULL, event_type TEXT NOT NULL, webhook_id TEXT NOT NULL,
					body TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_at INTEGER NOT NULL, last_log_id TEXT,
					open_log_id TEXT
				);
				CREATE INDEX IF NOT EXISTS runs_due ON runs (next_attempt_at);
			`);
		});
	}

	/** Accepts an event for delivery; the first attempt runs from the alarm, at once. */
	async enqueue(request: EnqueueRequest): Promise<EnqueueResult> {
		const sql = this.ctx.storage.sql;
		const now = Date.now();
		this.#remember("subscription_id", request.subscriptionId);
		this.#remember("account_id", request.accountId);
		if (!request.redelivery) {
			const seen = sql.exec("SELECT 1 FROM seen_events WHERE event_id = ?", request.event.id).toArray();
			if (seen.length > 0) return { status: "duplicate" };
		}
		const payload = await buildEventPayload(request.event, request.subscriptionId);
		this.ctx.storage.transactionSync(() => {
			sql.exec("INSERT OR IGNORE INTO seen_events (event_id, accepted_at) VALUES (?, ?)", request.event.id, now);
			sql.exec(
				`INSERT INTO runs (run_id, event_id, event_type, webhook_id, body, attempts, next_attempt_at, last_log_id)
				 VALUES (?, ?, ?, ?, ?, 0, ?, NULL)`,
				crypto.randomUUID(),
				request.event.id,
				request.event.type,
				payload.id,
				JSON.stringify(payload),
				now,
			);
		});
		await this.#rearm();
		// A running alarm starts it at once instead of after the attempts it is waiting on.
		this.#wake?.();
		return { status: "accepted", webhookId: payload.id };
	}

	override async alarm(): Promise<void> {
		const started = Date.now();
		this.ctx.storage.sql.exec("DELETE FROM seen_events WHERE accepted_at < ?", started - SEEN_EVENT_RETENTION_MS);
		const subscriptionId = this.#recall("subscription_id");
		const accountId = this.#recall("account_id");
		if (!subscriptionId || !accountId) return;
		// Every delivery keeps its own schedule: start whatever is due, then wait for the first of an attempt ending,
		// the next retry coming due or a new event, and look again, until nothing is in flight. A receiver that takes
		// its full 30 s over one attempt so never holds back another delivery's retry.
		const inFlight = new Map<string, Promise<void>>();
		const state: { halt: Halt | null } = { halt: null };
		for (;;) {
			const mayStart = state.halt === null && Date.now() - started < ALARM_WORK_BUDGET_MS;
			if (mayStart) await this.#startDueAttempts({ subscriptionId, accountId }, inFlight, state);
			if (inFlight.size === 0) break;
			await this.#nextChange(inFlight, mayStart && state.halt === null);
		}
		if (state.halt?.kind === "secret_fault") {
			await this.ctx.storage.setAlarm(Date.now() + SECRET_FAULT_RETRY_MS);
			return;
		}
		// Only once nothing is in flight, so no attempt is still writing its outcome.
		if (state.halt?.kind === "drop") await this.#dropAllRuns({ closeLog: state.halt.closeLog });
		await this.#rearm();
	}

	/**
	 * Starts the due deliveries that fit beside those in flight. The subscription row is read afresh (current URL,
	 * secret, state), and no more attempts run side by side than failures may still happen before auto-disable, so
	 * the count can never pass the threshold and nothing is sent once it is reached.
	 */
	async #startDueAttempts(
		ids: { subscriptionId: string; accountId: string },
		inFlight: Map<string, Promise<void>>,
		state: { halt: Halt | null },
	): Promise<void> {
		const due = this.ctx.storage.sql
			.exec<Run>("SELECT * FROM runs WHERE next_attempt_at <= ? ORDER BY next_attempt_at, rowid", Date.now())
			.toArray()
			.filter((run) => !inFlight.has(run.run_id));
		if (due.length === 0) return;
		const subscription = await loadSubscriptionForDelivery(this.env, ids.subscriptionId);
		if (!subscription || subscription.deletedAt || !subscription.isActive) {
			state.halt = { kind: "drop", closeLog: Boolean(subscription && !subscription.deletedAt) };
			return;
		}
		let secret: string;
		try {
			secret = await openSecret(this.env, ids.subscriptionId, sealedSecretOf(subscription));
		} catch (error) {
			// A configuration fault (key version missing): nothing can be signed. Try again later, loudly.
			console.error(
				JSON.stringify({
					level: "error",
					msg: "webhook secret cannot be opened; deliveries wait",
					subscription: ids.subscriptionId,
					error: error instanceof Error ? error.message : String(error),
				}),
			);
			state.halt = { kind: "secret_fault" };
			return;
		}
		const target = { ...ids, url: subscription.url, secret };
		for (const run of due.slice(0, attemptsToStart(subscription.consecutiveFailures, inFlight.size))) {
			const attempt = this.#attempt(run, target).then(
				({ disabled }) => {
					if (disabled) state.halt ??= { kind: "drop", closeLog: true };
				},
				(error: unknown) => {
					// The run keeps its in-flight lease and is tried again when that expires; the others go on.
					console.error(
						JSON.stringify({
							level: "error",
							msg: "webhook attempt failed to run",
							run: run.run_id,
							error: error instanceof Error ? error.message : String(error),
						}),
					);
				},
			);
			inFlight.set(
				run.run_id,
				attempt.finally(() => inFlight.delete(run.run_id)),
			);
		}
	}

	/**
	 * Waits until an attempt in flight ends, or (when `watchSchedule`) the next retry falls due or `enqueue` adds a
	 * delivery. Due deliveries that found no free place wait for an attempt to end, not for a timer.
	 */
	async #nextChange(inFlight: Map<string, Promise<void>>, watchSchedule: boolean): Promise<void> {
		const changes: Promise<void>[] = [...inFlight.values()];
		let timer: number | null = null;
		if (watchSchedule) {
			const now = Date.now();
			const [next] = this.ctx.storage.sql
				.exec<{ at: number | null }>("SELECT MIN(next_attempt_at) AS at FROM runs WHERE next_attempt_at > ?", now)
				.toArray();
			const at = next?.at;
			if (at != null) {
				changes.push(
					new Promise((resolve) => {
						timer = setTimeout(resolve, at - now);
					}),
				);
			}
			changes.push(
				new Promise((resolve) => {
					this.#wake = resolve;
				}),
			);
		}
		try {
			await Promise.race(changes);
		} finally {
			clearTimeout(timer);
			this.#wake = null;
		}
	}

	async #attempt(
		run: Run,
		target: { subscriptionId: string; accountId: string; url: string; secret: string },
	): Promise<{ disabled: boolean }> {
		const sql = this.ctx.storage.sql;
		const { subscriptionId, accountId } = target;
		const exhausted = run.attempts >= MAX_ATTEMPTS;
		if (run.open_log_id) {
			// The previous attempt never reported back (the object was evicted or a write failed mid-attempt).
			await logAttemptInterrupted(this.env, run.open_log_id, exhausted ? "abandoned" : "failed");
		}
		if (exhausted) {
			sql.exec("DELETE FROM runs WHERE run_id = ?", run.run_id);
			return { disabled: false };
		}
		const attempt = run.attempts + 1;
		const logId = crypto.randomUUID();
		const startedAt = new Date();
		sql.exec(
			"UPDATE runs SET attempts = ?, next_attempt_at = ?, last_log_id = ?, open_log_id = ? WHERE run_id = ?",
			attempt,
			startedAt.getTime() + IN_FLIGHT_LEASE_MS,
			logId,
			logId,
			run.run_id,
		);
		await logAttemptStarted(this.env, {
			id: logId,
			subscriptionId,
			accountId,
			eventId: run.event_id,
			eventType: run.event_type,
			attempt,
			startedAt: startedAt.toISOString(),
		});

		const outcome = await sendSignedDelivery({
			url: target.url,
			secret: target.secret,
			payload: JSON.parse(run.body),
			body: run.body,
			now: startedAt,
		});

		const endedAt = new Date();
		let stillActive = true;
		if (outcome.delivered) {
			await recordDeliverySuccess(this.env, subscriptionId, endedAt.toISOString());
		} else {
			const state = await recordDeliveryFailure(this.env, subscriptionId, endedAt.toISOString());
			stillActive = state?.isActive ?? false;
		}
		const decision = decideAfterAttempt({
			attempt,
			delivered: outcome.delivered,
			now: endedAt.getTime(),
			subscriptionActive: stillActive,
		});
		const nextRetryAt = decision.status === "failed" ? decision.nextAttemptAt : null;
		await logAttemptFinished(this.env, logId, {
			status: decision.status,
			responseCode: outcome.responseCode,
			error:
				decision.status === "abandoned" && decision.reason === "subscription_inactive"
					? `${outcome.error}; subscription disabled, no further attempts`
					: outcome.error,
			durationMs: outcome.durationMs,
			completedAt: endedAt.toISOString(),
			nextRetryAt: nextRetryAt === null ? null : new Date(nextRetryAt).toISOString(),
		});
		if (nextRetryAt !== null) {
			sql.exec("UPDATE runs SET next_attempt_at = ?, open_log_id = NULL WHERE run_id = ?", nextRetryAt, run.run_id);
		} else {
			sql.exec("DELETE FROM runs WHERE run_id = ?", run.run_id);
		}
		return { disabled: !stillActive };
	}

	/** The subscription is inactive or gone: nothing more is sent, and (unless deleted) waiting retries are closed in the log. */
	async #dropAllRuns(options: { closeLog: boolean }): Promise<void> {
		const runs = this.ctx.storage.sql.exec<Run>("SELECT * FROM runs").toArray();
		if (runs.length === 0) return;
		if (options.closeLog) {
			await logRetriesDropped(
				this.env,
				runs.map((r) => r.last_log_id).filter((id): id is string => id !== null),
				"subscription inactive; retry dropped",
			);
		}
		this.ctx.storage.sql.exec("DELETE FROM runs");
	}

	async #rearm(): Promise<void> {
		const [next] = this.ctx.storage.sql
			.exec<{ at: number | null }>("SELECT MIN(next_attempt_at) AS at FROM runs")
			.toArray();
		if (next?.at == null) await this.ctx.storage.deleteAlarm();
		else await this.ctx.storage.setAlarm(next.at);
	}

	#remember(key: string, value: string): void {
		this.ctx.storage.sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", key, value);
	}

	#recall(key: string): string | null {
		const [row] = this.ctx.storage.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", key).toArray();
		return row?.value ?? null;
	}
}
