import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_PARALLEL_ATTEMPTS } from "../../durable-objects/webhook-delivery-logic.ts";
import { verifyWebhook } from "../../sdk/verify-webhook.ts";
import { CONVERSION_EVENT_FIELDS } from "../../src/contracts/webhooks.ts";
import { DELIVERY_TIMEOUT_MS } from "../../src/webhooks/send-delivery.ts";
import { signedInClient } from "./helpers.ts";
import {
	consumeWebhookEvent,
	createSubscription,
	deliveryLog,
	insertOutboxEvent,
	patchSubscription,
	type ReceivedDelivery,
	runDeliveryAlarm,
	scheduledAlarm,
	subscriptionObject,
	subscriptionRow,
	webhookTestbed,
} from "./webhooks-helpers.ts";

afterEach(() => {
	vi.restoreAllMocks();
	vi.useRealTimers();
});

/** Verifies as a receiver would on arrival (its clock reads the delivery's own timestamp). */
const verifyWith = (secret: string, delivery: ReceivedDelivery) =>
	verifyWebhook({
		secret,
		headers: delivery.headers,
		body: delivery.body,
		now: Number(delivery.headers.get("X-Webhook-Timestamp")) * 1000,
	});

describe("event fan-out", () => {
	it("delivers a signed completed event with the spec's headers and payload, and logs it", async () => {
		const { receiver, api, client } = await webhookTestbed([200]);
		const sub = await createSubscription(api, { url: "https://hooks.example.com/voice" });
		const eventId = await insertOutboxEvent(client.accountId, "conversion.completed");

		await consumeWebhookEvent(eventId);
		expect(receiver.received).toHaveLength(0); // the object delivers from its alarm, scheduled for now
		expect(await scheduledAlarm(sub.id)).toBe(Date.now());
		await runDeliveryAlarm(sub.id);

		expect(receiver.received).toHaveLength(1);
		const [delivery] = receiver.received as [ReceivedDelivery];
		expect(delivery.url).toBe("https://hooks.example.com/voice");
		expect(delivery.redirect).toBe("manual");
		expect(delivery.hasTimeoutSignal).toBe(true);
		expect(delivery.headers.get("Content-Type")).toBe("application/json");
		expect(delivery.headers.get("User-Agent")).toMatch(/voice-conversion-webhooks/);
		expect(delivery.headers.get("X-Webhook-Event")).toBe("conversion_completed");
		expect(delivery.headers.get("X-Webhook-Timestamp")).toBe(String(Math.floor(Date.now() / 1000)));
		expect(delivery.headers.get("X-Webhook-Signature")).toMatch(/^sha256=[0-9a-f]{64}$/);
		expect(await verifyWith(sub.secret, delivery)).toMatchObject({ ok: true });

		const payload = JSON.parse(delivery.body);
		expect(Object.keys(payload).sort()).toEqual(["data", "event", "id", "timestamp"]);
		expect(payload.event).toBe("conversion.completed");
		expect(payload.id).toBe(delivery.headers.get("X-Webhook-Id"));
		expect(payload.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
		expect(Object.keys(payload.data.conversion).sort()).toEqual([...CONVERSION_EVENT_FIELDS].sort());
		expect(payload.data.conversion).toMatchObject({
			status: "completed",
			voice_model_name: "Aurora",
			pitch_shift: "auto",
			pitch_shift_applied: "third_up",
			voice_settings: { index_rate: 0.5, protect: 0.2 },
		});
		expect(delivery.body).not.toContain("output_url");

		const [entry] = await deliveryLog(api, sub.id);
		expect(entry).toMatchObject({
			subscription_id: sub.id,
			event: "conversion.completed",
			event_id: eventId,
			webhook_id: payload.id,
			attempt: 1,
			status: "delivered",
			response_code: 200,
			error: null,
			next_retry_at: null,
		});
		expect(entry?.duration_ms).toEqual(expect.any(Number));
		expect((await subscriptionRow(sub.id))?.last_success_at).toBe(new Date().toISOString());
		const sent = await env.DB.prepare("SELECT sent_at FROM events WHERE id = ?").bind(eventId).first("sent_at");
		expect(sent).toBeTruthy();
	});

	it("sends error_message, and still no output_url, for a failed conversion", async () => {
		const { receiver, api, client } = await webhookTestbed([204]);
		const sub = await createSubscription(api, { events: ["conversion_failed"] });
		const eventId = await insertOutboxEvent(client.accountId, "conversion.failed");
		await consumeWebhookEvent(eventId);
		await runDeliveryAlarm(sub.id);
		const [delivery] = receiver.received as [ReceivedDelivery];
		expect(delivery.headers.get("X-Webhook-Event")).toBe("conversion_failed");
		const payload = JSON.parse(delivery.body);
		expect(payload.event).toBe("conversion.failed");
		expect(payload.data.conversion).toMatchObject({ status: "failed", error_message: "The source audio is corrupted" });
		expect(Object.keys(payload.data.conversion).sort()).toEqual([...CONVERSION_EVENT_FIELDS, "error_message"].sort());
		expect(delivery.body).not.toContain("output_url");
		expect(await verifyWith(sub.secret, delivery)).toMatchObject({ ok: true });
	});

	it("reaches each active subscriber of the account once, however often the queue repeats the event", async () => {
		const { receiver, api, client } = await webhookTestbed([200]);
		const both = await createSubscription(api, { url: "https://a.example.com/hook" });
		const completedOnly = await createSubscription(api, {
			url: "https://b.example.com/hook",
			events: ["conversion_completed"],
		});
		const failedOnly = await createSubscription(api, {
			url: "https://c.example.com/hook",
			events: ["conversion_failed"],
		});
		const inactive = await createSubscription(api, { url: "https://d.example.com/hook" });
		await patchSubscription(api, inactive.id, { is_active: false });
		const deleted = await createSubscription(api, { url: "https://e.example.com/hook" });
		await api(`/api/v1/webhooks/subscriptions/${deleted.id}`, { method: "DELETE" });
		const otherAccount = await signedInClient();
		const foreign = await createSubscription(otherAccount.api, { url: "https://f.example.com/hook" });

		const eventId = await insertOutboxEvent(client.accountId, "conversion.completed");
		for (let i = 0; i < 3; i++) await consumeWebhookEvent(eventId);
		for (const sub of [both, completedOnly, failedOnly, inactive, deleted, foreign]) await runDeliveryAlarm(sub.id);

		expect(receiver.received.map((d) => d.url).sort()).toEqual([
			"https://a.example.com/hook",
			"https://b.example.com/hook",
		]);
		// Two subscriptions never share a delivery id.
		expect(new Set(receiver.received.map((d) => d.headers.get("X-Webhook-Id"))).size).toBe(2);
	});

	it("acknowledges malformed messages and unknown events instead of retrying them", async () => {
		await webhookTestbed([200]);
		const unknown = await consumeWebhookEvent(crypto.randomUUID());
		expect(unknown.retryMessages).toEqual([]);
		expect(unknown.explicitAcks).toHaveLength(1);
	});
});

describe("retries, abandonment and auto-disable", () => {
	it("retries after 2, 4, 8 and 16 s with fresh signatures and the same id, then abandons after the 5th attempt", async () => {
		const { receiver, api, client, clock } = await webhookTestbed([500]);
		const sub = await createSubscription(api);
		const eventId = await insertOutboxEvent(client.accountId);
		await consumeWebhookEvent(eventId);
		await runDeliveryAlarm(sub.id);
		expect(receiver.received).toHaveLength(1);

		for (const [attempt, delay] of [
			[2, 2],
			[3, 4],
			[4, 8],
			[5, 16],
		] as const) {
			expect(await scheduledAlarm(sub.id)).toBe(Date.now() + delay * 1000);
			// One second early: the alarm finds nothing due and sends nothing.
			clock.advanceSeconds(delay - 1);
			await runDeliveryAlarm(sub.id);
			expect(receiver.received).toHaveLength(attempt - 1);
			clock.advanceSeconds(1);
			await runDeliveryAlarm(sub.id);
			expect(receiver.received).toHaveLength(attempt);
		}
		expect(await scheduledAlarm(sub.id)).toBeNull();
		clock.advanceSeconds(600);
		await runDeliveryAlarm(sub.id);
		expect(receiver.received).toHaveLength(5);

		const ids = new Set(receiver.received.map((d) => d.headers.get("X-Webhook-Id")));
		const timestamps = receiver.received.map((d) => Number(d.headers.get("X-Webhook-Timestamp")));
		expect(ids.size).toBe(1);
		expect(timestamps.slice(1).map((t, i) => t - (timestamps[i] as number))).toEqual([2, 4, 8, 16]);
		expect(new Set(receiver.received.map((d) => d.headers.get("X-Webhook-Signature"))).size).toBe(5);
		expect(new Set(receiver.received.map((d) => d.body)).size).toBe(1);
		for (const delivery of receiver.received) expect((await verifyWith(sub.secret, delivery)).ok).toBe(true);

		const log = await deliveryLog(api, sub.id);
		expect(log.map((e) => [e.attempt, e.status, e.response_code])).toEqual([
			[5, "abandoned", 500],
			[4, "failed", 500],
			[3, "failed", 500],
			[2, "failed", 500],
			[1, "failed", 500],
		]);
		expect(log[0]?.next_retry_at).toBeNull();
		expect(log[4]?.next_retry_at).toBe(new Date(Date.parse(log[4]?.completed_at as string) + 2000).toISOString());
		expect(log[0]?.error).toBe("Receiver answered HTTP 500");
		expect(await subscriptionRow(sub.id)).toMatchObject({ is_active: 1, consecutive_failures: 5 });
	});

	it("treats redirects, timeouts and network errors as failures, and does not follow redirects", async () => {
		const { receiver, api, client, clock } = await webhookTestbed([
			() => new Response(null, { status: 302, headers: { Location: "http://169.254.169.254/" } }),
			() => Promise.reject(new DOMException("The operation timed out.", "TimeoutError")),
			() => Promise.reject(new TypeError("connection refused")),
			200,
		]);
		const sub = await createSubscription(api);
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await runDeliveryAlarm(sub.id);
		for (const delay of [2, 4, 8]) {
			clock.advanceSeconds(delay);
			await runDeliveryAlarm(sub.id);
		}
		expect(receiver.received.map((d) => d.url)).toEqual(Array(4).fill("https://hooks.example.com/receive"));
		const log = await deliveryLog(api, sub.id);
		expect(log.map((e) => [e.status, e.response_code])).toEqual([
			["delivered", 200],
			["failed", null],
			["failed", null],
			["failed", 302],
		]);
		expect(log[3]?.error).toMatch(/302.*not followed/);
		expect(log[2]?.error).toBe("No answer within 30 seconds");
		expect(log[1]?.error).toMatch(/connection refused/);
		// The 2xx reset the count that three failures had raised.
		expect(await subscriptionRow(sub.id)).toMatchObject({ consecutive_failures: 0, is_active: 1 });
	});

	it("disables the subscription at exactly 10 consecutive failures across events, dropping pending retries", async () => {
		const { receiver, api, client, clock } = await webhookTestbed([500]);
		const sub = await createSubscription(api);
		// First event: 5 failed attempts, abandoned; the count is 5 and the subscription stays active.
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await runDeliveryAlarm(sub.id);
		for (const delay of [2, 4, 8, 16]) {
			clock.advanceSeconds(delay);
			await runDeliveryAlarm(sub.id);
		}
		expect(await subscriptionRow(sub.id)).toMatchObject({ consecutive_failures: 5, is_active: 1 });

		// Two more events fail side by side: 6, 7, then 8, 9, then the 10th failure disables.
		const second = await insertOutboxEvent(client.accountId);
		const third = await insertOutboxEvent(client.accountId, "conversion.failed");
		await consumeWebhookEvent(second);
		await consumeWebhookEvent(third);
		await runDeliveryAlarm(sub.id);
		clock.advanceSeconds(2);
		await runDeliveryAlarm(sub.id);
		expect(receiver.received).toHaveLength(9);
		expect(await subscriptionRow(sub.id)).toMatchObject({ consecutive_failures: 9, is_active: 1 });
		clock.advanceSeconds(4);
		await runDeliveryAlarm(sub.id);
		expect(receiver.received).toHaveLength(10);
		expect(await subscriptionRow(sub.id)).toMatchObject({ consecutive_failures: 10, is_active: 0 });
		expect(await scheduledAlarm(sub.id)).toBeNull();

		// Nothing more is sent: not the dropped retry, not a new event.
		clock.advanceSeconds(60);
		await runDeliveryAlarm(sub.id);
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await runDeliveryAlarm(sub.id);
		expect(receiver.received).toHaveLength(10);

		const log = await deliveryLog(api, sub.id);
		expect(log).toHaveLength(10);
		expect(log.filter((e) => e.status === "abandoned")).toHaveLength(3);
		expect(log.filter((e) => e.status === "failed")).toHaveLength(7);
		expect(log[0]).toMatchObject({ status: "abandoned", error: expect.stringMatching(/disabled/) });
		expect(log[1]).toMatchObject({
			status: "abandoned",
			error: expect.stringMatching(/retry dropped/),
			next_retry_at: null,
		});

		// Reactivation resets the count, and the next 2xx keeps it at zero.
		const reactivated = await patchSubscription(api, sub.id, { is_active: true });
		expect(((await reactivated.json()) as { data: unknown }).data).toMatchObject({
			is_active: true,
			consecutive_failures: 0,
		});
		receiver.answer([500, 200]);
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await runDeliveryAlarm(sub.id);
		expect(await subscriptionRow(sub.id)).toMatchObject({ consecutive_failures: 1, is_active: 1 });
		clock.advanceSeconds(2);
		await runDeliveryAlarm(sub.id);
		const row = await subscriptionRow(sub.id);
		expect(row).toMatchObject({ consecutive_failures: 0, is_active: 1 });
		expect(row?.last_success_at).toBe(new Date().toISOString());
		expect(Date.parse(row?.last_failure_at as string)).toBe(Date.now() - 2000);
	});

	it("stops retrying once the subscription is deactivated or deleted", async () => {
		const { receiver, api, client, clock } = await webhookTestbed([500]);
		const paused = await createSubscription(api, { url: "https://a.example.com/hook" });
		const removed = await createSubscription(api, { url: "https://b.example.com/hook" });
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await runDeliveryAlarm(paused.id);
		await runDeliveryAlarm(removed.id);
		await patchSubscription(api, paused.id, { is_active: false });
		await api(`/api/v1/webhooks/subscriptions/${removed.id}`, { method: "DELETE" });
		clock.advanceSeconds(2);
		await runDeliveryAlarm(paused.id);
		await runDeliveryAlarm(removed.id);
		expect(receiver.received).toHaveLength(2);
		expect(await scheduledAlarm(paused.id)).toBeNull();
		expect(await scheduledAlarm(removed.id)).toBeNull();
	});
});

/**
 * Fakes setTimeout as well as Date, from the test clock's current time, so the object's waits for a retry (and the
 * receiver's timeout) run on the test clock too. The clock is advanced inside the object, where those timers were
 * set: what they wake up does the object's I/O. Real I/O still takes real time: `until` polls for its effects.
 */
function useScheduleClock(subscriptionId: string) {
	const now = Date.now();
	vi.useRealTimers();
	vi.useFakeTimers({ toFake: ["Date", "setTimeout", "clearTimeout"], now });
	return {
		advance: (ms: number) => runInDurableObject(subscriptionObject(subscriptionId), () => vi.advanceTimersByTime(ms)),
	};
}

/** Polls (on the real clock) until `condition` holds; fails after `timeoutMs`. */
async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 5_000) {
	const deadline = performance.now() + timeoutMs;
	while (!(await condition())) {
		if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
		await scheduler.wait(10);
	}
}

/** A receiver that never answers: the attempt ends when its 30 s timeout fires (on the test clock). */
const hangsUntilTimeout = () =>
	new Promise<Response>((_, reject) =>
		setTimeout(() => reject(new DOMException("The operation timed out.", "TimeoutError")), DELIVERY_TIMEOUT_MS),
	);

describe("each delivery on its own schedule", () => {
	it("retries a delivery 2, 4, 8 and 16 s after its own failures while another attempt runs into the timeout", async () => {
		const { receiver, api, client } = await webhookTestbed([hangsUntilTimeout, 500, 500, 500, 500, 200]);
		const sub = await createSubscription(api);
		const clock = useScheduleClock(sub.id);
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		const start = Date.now();
		const alarm = runDeliveryAlarm(sub.id);

		const webhookId = (d: ReceivedDelivery) => d.headers.get("X-Webhook-Id");
		await until(() => receiver.received.length === 2, "both first attempts");
		const [slow, other] = receiver.received.map(webhookId);
		const otherAttempts = () => receiver.received.filter((d) => webhookId(d) === other).length;
		const finished = async (attempt: number) =>
			(await deliveryLog(api, sub.id)).some(
				(e) => e.webhook_id === other && e.attempt === attempt && e.status !== "pending",
			);
		for (const [attempt, delay] of [
			[1, 2],
			[2, 4],
			[3, 8],
			[4, 16],
		] as const) {
			await until(() => finished(attempt), `attempt ${attempt} to fail`);
			await clock.advance(delay * 1000 - 1000);
			await scheduler.wait(50);
			expect(otherAttempts(), `one second before retry ${attempt + 1}`).toBe(attempt);
			await clock.advance(1000);
			await until(() => otherAttempts() === attempt + 1, `attempt ${attempt + 1}`);
		}
		await alarm;

		const log = await deliveryLog(api, sub.id);
		const attemptsOf = (id: string | null | undefined) =>
			log.filter((e) => e.webhook_id === id).sort((a, b) => (a.attempt as number) - (b.attempt as number));
		const retried = attemptsOf(other);
		expect(retried.map((e) => [e.attempt, e.status])).toEqual([
			[1, "failed"],
			[2, "failed"],
			[3, "failed"],
			[4, "failed"],
			[5, "delivered"],
		]);
		// Each retry started exactly its delay after its own previous attempt ended.
		const offsets = retried
			.slice(1)
			.map((e, i) => Date.parse(e.created_at as string) - Date.parse(retried[i]?.completed_at as string));
		expect(offsets).toEqual([2000, 4000, 8000, 16000]);
		// Meanwhile the slow attempt held its place for the whole 30 s, and retries on its own schedule.
		const [timedOut] = attemptsOf(slow);
		expect(timedOut).toMatchObject({ attempt: 1, status: "failed", error: "No answer within 30 seconds" });
		expect(Date.parse(timedOut?.completed_at as string) - start).toBe(DELIVERY_TIMEOUT_MS);
		expect(timedOut?.next_retry_at).toBe(new Date(start + DELIVERY_TIMEOUT_MS + 2000).toISOString());
		expect(await scheduledAlarm(sub.id)).toBe(start + DELIVERY_TIMEOUT_MS + 2000);
	}, 20_000);

	it("sends a new event at once while another attempt is still waiting for its receiver", async () => {
		const { receiver, api, client } = await webhookTestbed([hangsUntilTimeout, 200]);
		const sub = await createSubscription(api);
		const clock = useScheduleClock(sub.id);
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		const alarm = runDeliveryAlarm(sub.id);
		await until(() => receiver.received.length === 1, "the first attempt");
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await until(() => receiver.received.length === 2, "the new event's attempt");
		expect(Date.parse((await deliveryLog(api, sub.id))[0]?.created_at as string)).toBe(Date.now());
		await clock.advance(DELIVERY_TIMEOUT_MS);
		await alarm;
		expect((await deliveryLog(api, sub.id)).map((e) => e.status).sort()).toEqual(["delivered", "failed"]);
	}, 20_000);

	it("never has more attempts in flight than the cap, starting the next as soon as one ends", async () => {
		const { receiver, api, client } = await webhookTestbed([hangsUntilTimeout]);
		const sub = await createSubscription(api);
		const clock = useScheduleClock(sub.id);
		for (let i = 0; i < 6; i++) await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		const alarm = runDeliveryAlarm(sub.id);
		await until(() => receiver.received.length === MAX_PARALLEL_ATTEMPTS, "the first attempts");
		await scheduler.wait(50);
		expect(receiver.received).toHaveLength(MAX_PARALLEL_ATTEMPTS);

		// The four time out together (4 failures); the other two start at once, not at the next retry.
		receiver.answer([200]);
		await clock.advance(DELIVERY_TIMEOUT_MS);
		await until(() => receiver.received.length === 6, "the two waiting deliveries");
		await alarm;
		const log = await deliveryLog(api, sub.id);
		expect(log.filter((e) => e.status === "delivered").map((e) => Date.parse(e.created_at as string))).toEqual(
			Array(2).fill(Date.parse(log.find((e) => e.status === "failed")?.completed_at as string)),
		);
		expect(log.filter((e) => e.status === "failed")).toHaveLength(MAX_PARALLEL_ATTEMPTS);
		expect(await subscriptionRow(sub.id)).toMatchObject({ is_active: 1 });
	}, 20_000);
});

describe("secret regeneration", () => {
	it("signs the very next attempt with the new secret; the old one no longer verifies", async () => {
		const { receiver, api, client, clock } = await webhookTestbed([500, 200]);
		const sub = await createSubscription(api);
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await runDeliveryAlarm(sub.id);
		const response = await api(`/api/v1/webhooks/subscriptions/${sub.id}/regenerate-secret`, { method: "POST" });
		const { new_secret } = ((await response.json()) as { data: { new_secret: string } }).data;
		clock.advanceSeconds(2);
		await runDeliveryAlarm(sub.id);

		const [before, after] = receiver.received as [ReceivedDelivery, ReceivedDelivery];
		expect(await verifyWith(sub.secret, before)).toMatchObject({ ok: true });
		expect(await verifyWith(sub.secret, after)).toEqual({ ok: false, reason: "signature_mismatch" });
		expect(await verifyWith(new_secret, after)).toMatchObject({ ok: true });
	});
});

describe("test deliveries", () => {
	it("sends a signed webhook.test at once, unlogged and uncounted, even when the receiver fails", async () => {
		const { receiver, api } = await webhookTestbed([500]);
		const sub = await createSubscription(api, { url: "https://hooks.example.com/test-me" });
		const response = await api(`/api/v1/webhooks/subscriptions/${sub.id}/test`, { method: "POST" });
		expect(response.status).toBe(200);
		const { data } = (await response.json()) as {
			data: { message: string; url: string; test_payload: Record<string, string> };
		};
		expect(Object.keys(data).sort()).toEqual(["message", "test_payload", "url"]);
		expect(data.url).toBe("https://hooks.example.com/test-me");
		expect(data.message).toMatch(/HTTP 500/);

		expect(receiver.received).toHaveLength(1);
		const [delivery] = receiver.received as [ReceivedDelivery];
		expect(await verifyWith(sub.secret, delivery)).toMatchObject({ ok: true });
		expect(delivery.headers.get("X-Webhook-Event")).toBe("webhook_test");
		const payload = JSON.parse(delivery.body);
		expect(payload).toEqual({
			event: "webhook.test",
			id: data.test_payload.id,
			timestamp: data.test_payload.timestamp,
			data: { message: expect.any(String), subscription_id: sub.id },
		});
		expect(data.test_payload).toEqual({ event: "webhook.test", id: payload.id, timestamp: payload.timestamp });
		expect(delivery.headers.get("X-Webhook-Id")).toBe(payload.id);

		expect(await deliveryLog(api, sub.id)).toEqual([]);
		expect(await subscriptionRow(sub.id)).toMatchObject({ consecutive_failures: 0, last_failure_at: null });
		receiver.answer([200]);
		const ok = await api(`/api/v1/webhooks/subscriptions/${sub.id}/test`, { method: "POST" });
		expect(((await ok.json()) as { data: { message: string } }).data.message).toMatch(/delivered.*HTTP 200/);
		expect(await subscriptionRow(sub.id)).toMatchObject({ last_success_at: null });
	});
});

describe("delivery log and redelivery", () => {
	it("lists newest first with limit (default 50, at most 100)", async () => {
		const { api, client } = await webhookTestbed();
		const sub = await createSubscription(api);
		const base = Date.now();
		const statements = Array.from({ length: 120 }, (_, i) =>
			env.DB.prepare(
				`INSERT INTO webhook_deliveries (id, subscription_id, account_id, event_id, event_type, attempt, status, created_at)
				 VALUES (?, ?, ?, ?, 'conversion.completed', 1, 'delivered', ?)`,
			).bind(
				crypto.randomUUID(),
				sub.id,
				client.accountId,
				crypto.randomUUID(),
				new Date(base + i * 1000).toISOString(),
			),
		);
		await env.DB.batch(statements);

		const byDefault = await deliveryLog(api, sub.id);
		expect(byDefault).toHaveLength(50);
		expect(byDefault[0]?.created_at).toBe(new Date(base + 119_000).toISOString());
		const times = byDefault.map((e) => Date.parse(e.created_at as string));
		expect(times).toEqual([...times].sort((a, b) => b - a));
		expect(await deliveryLog(api, sub.id, "?limit=3")).toHaveLength(3);
		expect(await deliveryLog(api, sub.id, "?limit=100")).toHaveLength(100);
		for (const bad of ["101", "0", "-1", "abc", "2.5"]) {
			const response = await api(`/api/v1/webhooks/subscriptions/${sub.id}/deliveries?limit=${bad}`);
			expect(response.status, bad).toBe(400);
			expect(((await response.json()) as { message: string }).message).toContain("limit");
		}
	});

	it("redelivers a logged event with the same payload id, logging new attempts", async () => {
		const { receiver, api, client } = await webhookTestbed([200]);
		const sub = await createSubscription(api);
		const eventId = await insertOutboxEvent(client.accountId);
		await consumeWebhookEvent(eventId);
		await runDeliveryAlarm(sub.id);
		const [first] = await deliveryLog(api, sub.id);

		const response = await api(`/api/v1/webhooks/subscriptions/${sub.id}/deliveries/${first?.id}/redeliver`, {
			method: "POST",
		});
		expect(response.status).toBe(202);
		const { data } = (await response.json()) as { data: { event_id: string; webhook_id: string } };
		expect(data).toMatchObject({ event_id: eventId, webhook_id: first?.webhook_id });
		await runDeliveryAlarm(sub.id);

		expect(receiver.received).toHaveLength(2);
		const [original, again] = receiver.received as [ReceivedDelivery, ReceivedDelivery];
		expect(again.headers.get("X-Webhook-Id")).toBe(original.headers.get("X-Webhook-Id"));
		expect(again.body).toBe(original.body);
		expect(await verifyWith(sub.secret, again)).toMatchObject({ ok: true });
		expect((await deliveryLog(api, sub.id)).map((e) => [e.event_id, e.status])).toEqual([
			[eventId, "delivered"],
			[eventId, "delivered"],
		]);

		expect(
			(
				await api(`/api/v1/webhooks/subscriptions/${sub.id}/deliveries/${crypto.randomUUID()}/redeliver`, {
					method: "POST",
				})
			).status,
		).toBe(404);
		await patchSubscription(api, sub.id, { is_active: false });
		const refused = await api(`/api/v1/webhooks/subscriptions/${sub.id}/deliveries/${first?.id}/redeliver`, {
			method: "POST",
		});
		expect(refused.status).toBe(409);
		expect(((await refused.json()) as { code: string }).code).toBe("subscription_inactive");
	});
});

describe("WebhookSubscription object", () => {
	it("resumes a delivery whose attempt broke off, closing the interrupted attempt in the log", async () => {
		const { receiver, api, client, clock } = await webhookTestbed([200]);
		const sub = await createSubscription(api);
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		// The outcome of the first attempt cannot be written: the attempt breaks off after its request was sent.
		await env.DB.exec(
			"CREATE TRIGGER refuse_outcome BEFORE UPDATE ON webhook_deliveries BEGIN SELECT RAISE(ABORT, 'injected fault'); END;",
		);
		vi.spyOn(console, "error").mockImplementation(() => {});
		await runDeliveryAlarm(sub.id);
		await env.DB.exec("DROP TRIGGER refuse_outcome;");
		expect(receiver.received).toHaveLength(1);
		expect((await deliveryLog(api, sub.id)).map((e) => e.status)).toEqual(["pending"]);
		expect(await scheduledAlarm(sub.id)).toBe(Date.now() + 35_000);

		// At-least-once: the delivery is attempted again once the in-flight lease runs out.
		clock.advanceSeconds(35);
		await runDeliveryAlarm(sub.id);
		expect(receiver.received).toHaveLength(2);
		expect(receiver.received[1]?.headers.get("X-Webhook-Id")).toBe(receiver.received[0]?.headers.get("X-Webhook-Id"));
		const log = await deliveryLog(api, sub.id);
		expect(log.map((e) => [e.attempt, e.status])).toEqual([
			[2, "delivered"],
			[1, "failed"],
		]);
		expect(log[1]?.error).toMatch(/interrupted/);
	});

	it("holds deliveries while the secret cannot be opened, and sends them once it can", async () => {
		const { receiver, api, client, clock } = await webhookTestbed([200]);
		const sub = await createSubscription(api);
		const setKeyVersion = (version: string) =>
			env.DB.prepare("UPDATE webhook_subscriptions SET secret_key_version = ? WHERE id = ?")
				.bind(version, sub.id)
				.run();
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await setKeyVersion("9");
		vi.spyOn(console, "error").mockImplementation(() => {});
		await runDeliveryAlarm(sub.id);
		expect(receiver.received).toHaveLength(0);
		expect(await deliveryLog(api, sub.id)).toEqual([]);
		expect(await scheduledAlarm(sub.id)).toBe(Date.now() + 60_000);
		await setKeyVersion("1");
		clock.advanceSeconds(60);
		await runDeliveryAlarm(sub.id);
		expect(receiver.received).toHaveLength(1);
		expect((await deliveryLog(api, sub.id)).map((e) => [e.attempt, e.status])).toEqual([[1, "delivered"]]);
	});

	it("sends a burst to a healthy receiver in one alarm, several attempts side by side", async () => {
		const { receiver, api, client } = await webhookTestbed([200]);
		const sub = await createSubscription(api);
		for (let i = 0; i < 6; i++) await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await runDeliveryAlarm(sub.id);
		expect(receiver.received).toHaveLength(6);
		expect(new Set(receiver.received.map((d) => d.headers.get("X-Webhook-Id"))).size).toBe(6);
		expect((await deliveryLog(api, sub.id)).map((e) => e.status)).toEqual(Array(6).fill("delivered"));
		expect(await scheduledAlarm(sub.id)).toBeNull();
	});

	it("ignores a repeated event id handed to it directly", async () => {
		const { api, client } = await webhookTestbed();
		const sub = await createSubscription(api);
		const event = {
			id: crypto.randomUUID(),
			type: "conversion.completed",
			createdAt: new Date().toISOString(),
			payload: {},
		};
		const stub = subscriptionObject(sub.id);
		const request = { subscriptionId: sub.id, accountId: client.accountId, event };
		expect(await stub.enqueue(request)).toMatchObject({ status: "accepted" });
		expect(await stub.enqueue(request)).toEqual({ status: "duplicate" });
	});
});
