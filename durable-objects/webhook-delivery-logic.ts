/**
 * The delivery rules of spec section 6, as pure functions the `WebhookSubscription` Durable Object applies:
 * when to retry, when to give up, and what the failure count does. No I/O, so the rules read and test alone.
 *
 * Attempts: the first at once, then retries 2, 4, 8 and 16 seconds after the delivery's own previous failure,
 * whatever other deliveries of the subscription are doing; the fifth attempt is the last, and its failure abandons
 * the delivery. (The spec lists the backoff as 2, 4, 8, 16, 32 s and also caps attempts at 5; the cap wins, so 32 s
 * would only be used if `MAX_ATTEMPTS` were raised to 6.)
 *
 * Failure count: every failed attempt, of any event, adds one to the subscription's `consecutive_failures`; any
 * 2xx resets it to 0; reaching `AUTO_DISABLE_AFTER_FAILURES` deactivates the subscription, and its pending retries
 * are dropped. The count lives in the D1 row and is changed by one atomic statement (`recordDeliveryFailure`),
 * because a PATCH that reactivates the subscription resets it there too.
 */

import { AUTO_DISABLE_AFTER_FAILURES } from "../src/contracts/webhook-delivery.ts";

export { AUTO_DISABLE_AFTER_FAILURES };
export const RETRY_DELAYS_SECONDS = [2, 4, 8, 16, 32] as const;
export const MAX_ATTEMPTS = 5;

/** Seconds to wait after failed attempt number `attempt` (1-based) before the next one. */
export function retryDelaySeconds(attempt: number): number {
	const index = Math.min(Math.max(attempt, 1), RETRY_DELAYS_SECONDS.length) - 1;
	return RETRY_DELAYS_SECONDS[index] as number;
}

export type AttemptDecision =
	| { status: "delivered" }
	| { status: "failed"; nextAttemptAt: number }
	| { status: "abandoned"; reason: "attempts_exhausted" | "subscription_inactive" };

export interface AttemptFacts {
	/** 1-based number of the attempt that just ended. */
	attempt: number;
	delivered: boolean;
	/** Epoch ms when the attempt ended. */
	now: number;
	/** Whether the subscription is still active after this attempt was counted. */
	subscriptionActive: boolean;
}

export function decideAfterAttempt(facts: AttemptFacts): AttemptDecision {
	if (facts.delivered) return { status: "delivered" };
	if (!facts.subscriptionActive) return { status: "abandoned", reason: "subscription_inactive" };
	if (facts.attempt >= MAX_ATTEMPTS) return { status: "abandoned", reason: "attempts_exhausted" };
	return { status: "failed", nextAttemptAt: facts.now + retryDelaySeconds(facts.attempt) * 1000 };
}

/** Most attempts one subscription has in flight at once (a burst of events to a healthy receiver). */
export const MAX_PARALLEL_ATTEMPTS = 4;

/**
 * How many attempts may be sent side by side given the current failure count: never more than could fail without
 * passing the auto-disable threshold, so the 10th failure is exactly the last failed request, and a failing
 * receiver gets one request at a time near the threshold.
 */
export function parallelAttempts(consecutiveFailures: number): number {
	return Math.max(1, Math.min(MAX_PARALLEL_ATTEMPTS, AUTO_DISABLE_AFTER_FAILURES - consecutiveFailures));
}

/**
 * How many more attempts may start while `inFlight` others are under way. An attempt in flight may still fail, so it
 * takes a place under the cap and under the failures left before auto-disable alike.
 */
export function attemptsToStart(consecutiveFailures: number, inFlight: number): number {
	return Math.max(0, parallelAttempts(consecutiveFailures) - inFlight);
}

/** How long a queue-repeated event id is remembered (longest Queues retention is 14 days). */
export const SEEN_EVENT_RETENTION_MS = 14 * 24 * 3600 * 1000;

/**
 * Before an attempt starts, its run is pushed this far ahead, so that if the object dies mid-attempt a later
 * alarm picks the delivery up again (at-least-once) instead of losing it.
 */
export const IN_FLIGHT_LEASE_MS = 35_000;

/** When the signing secret cannot be opened (a key configuration fault), deliveries wait this long and try again. */
export const SECRET_FAULT_RETRY_MS = 60_000;

/** One alarm stops starting new attempts after this long and re-arms at once, staying far below the 15 min limit. */
export const ALARM_WORK_BUDGET_MS = 5 * 60_000;
