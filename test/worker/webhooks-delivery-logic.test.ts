import { describe, expect, it } from "vitest";
import {
	AUTO_DISABLE_AFTER_FAILURES,
	attemptsToStart,
	decideAfterAttempt,
	MAX_ATTEMPTS,
	MAX_PARALLEL_ATTEMPTS,
	parallelAttempts,
	retryDelaySeconds,
} from "../../durable-objects/webhook-delivery-logic.ts";

describe("delivery rules", () => {
	it("waits 2, 4, 8 and 16 s after failed attempts 1 to 4, and abandons after the 5th", () => {
		const now = 1_000_000;
		const next = [1, 2, 3, 4].map((attempt) =>
			decideAfterAttempt({ attempt, delivered: false, now, subscriptionActive: true }),
		);
		expect(next).toEqual([2, 4, 8, 16].map((s) => ({ status: "failed", nextAttemptAt: now + s * 1000 })));
		expect(decideAfterAttempt({ attempt: MAX_ATTEMPTS, delivered: false, now, subscriptionActive: true })).toEqual({
			status: "abandoned",
			reason: "attempts_exhausted",
		});
		expect(MAX_ATTEMPTS).toBe(5);
		expect(retryDelaySeconds(5)).toBe(32);
	});

	it("delivers on success whatever the attempt, and abandons when the subscription was disabled", () => {
		expect(decideAfterAttempt({ attempt: 5, delivered: true, now: 0, subscriptionActive: true })).toEqual({
			status: "delivered",
		});
		expect(decideAfterAttempt({ attempt: 1, delivered: false, now: 0, subscriptionActive: false })).toEqual({
			status: "abandoned",
			reason: "subscription_inactive",
		});
	});

	it("never has more attempts in flight than failures left before auto-disable", () => {
		expect(AUTO_DISABLE_AFTER_FAILURES).toBe(10);
		const degrees = Array.from({ length: 11 }, (_, failures) => parallelAttempts(failures));
		expect(degrees).toEqual([4, 4, 4, 4, 4, 4, 4, 3, 2, 1, 1]);
		for (let failures = 0; failures < AUTO_DISABLE_AFTER_FAILURES; failures++) {
			expect(failures + parallelAttempts(failures)).toBeLessThanOrEqual(AUTO_DISABLE_AFTER_FAILURES);
		}
		expect(MAX_PARALLEL_ATTEMPTS).toBe(4);
	});

	it("counts attempts in flight against the cap and against the failures left, never going negative", () => {
		expect([0, 1, 2, 3, 4, 5].map((inFlight) => attemptsToStart(0, inFlight))).toEqual([4, 3, 2, 1, 0, 0]);
		expect([0, 1, 2].map((inFlight) => attemptsToStart(8, inFlight))).toEqual([2, 1, 0]);
		for (let failures = 0; failures < AUTO_DISABLE_AFTER_FAILURES; failures++) {
			// Every state the object can be in: no more in flight than it was allowed to start.
			for (let inFlight = 0; inFlight <= parallelAttempts(failures); inFlight++) {
				const more = attemptsToStart(failures, inFlight);
				expect(failures + inFlight + more).toBeLessThanOrEqual(AUTO_DISABLE_AFTER_FAILURES);
				expect(inFlight + more).toBeLessThanOrEqual(MAX_PARALLEL_ATTEMPTS);
			}
		}
	});
});
