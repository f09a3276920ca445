/**
 * End to end, over real HTTP: the Worker runs under wrangler's test harness (workerd, real local D1, Queues and
 * Durable Objects), with `ALLOW_LOCAL_WEBHOOK_URLS=true` for this run only, and deliveries go to a real receiver
 * (node:http on 127.0.0.1). An outbox event goes through the `webhook-events` queue, the consumer and the
 * subscription's object to a signed POST; the receiver checks headers, signature and payload as a client would.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyWebhook } from "../../sdk/verify-webhook.ts";
import { CONVERSION_EVENT_FIELDS } from "../../src/contracts/webhooks.ts";
import { type LocalStack, startLocalStack } from "../support/local-stack.ts";
import { type Received, startReceiver } from "../support/webhook-receiver.ts";

let stack: LocalStack;
let receiver: ReturnType<typeof startReceiver>;
let receiverOrigin: string;
let accountId: string;
let token: string;

async function api(path: string, init: { method?: string; body?: string } = {}) {
	return stack.harness.fetch(path, {
		...init,
		headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
	});
}

async function createSubscription(path: string, events: string[]) {
	const response = await api("/api/v1/webhooks/subscriptions", {
		method: "POST",
		body: JSON.stringify({ url: `${receiverOrigin}${path}`, events }),
	});
	expect(response.status, await response.clone().text()).toBe(201);
	return ((await response.json()) as { data: { id: string; secret: string } }).data;
}

/** What a conversion's terminal transition writes (outbox row) and sends (queue message). */
async function emitConversionEvent(status: "completed" | "failed") {
	const id = crypto.randomUUID();
	const conversion = {
		id: crypto.randomUUID(),
		status,
		audio_file_id: crypto.randomUUID(),
		audio_file_name: "interview.flac",
		voice_model_id: crypto.randomUUID(),
		voice_model_name: "Aurora",
		pitch_shift: "same_octave",
		pitch_shift_applied: "same_octave",
		use_preview: true,
		voice_settings: null,
		queued_at: new Date().toISOString(),
		processing_started_at: new Date().toISOString(),
		completed_at: status === "completed" ? new Date().toISOString() : null,
		...(status === "failed" ? { error_message: "Unsupported audio format" } : {}),
	};
	await stack.env.DB.prepare(
		"INSERT INTO events (id, account_id, type, subject_id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)",
	)
		.bind(
			id,
			accountId,
			`conversion.${status}`,
			conversion.id,
			JSON.stringify({ conversion }),
			new Date().toISOString(),
		)
		.run();
	await stack.env.WEBHOOK_EVENTS_QUEUE.send({ event_id: id });
	return { eventId: id, conversion };
}

function expectSignedDelivery(delivery: Received, secret: string, event: string) {
	expect(delivery.headers["content-type"]).toBe("application/json");
	expect(delivery.headers["user-agent"]).toMatch(/voice-conversion-webhooks/);
	expect(delivery.headers["x-webhook-event"]).toBe(event);
	expect(delivery.headers["x-webhook-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/);
	expect(Math.abs(Number(delivery.headers["x-webhook-timestamp"]) - delivery.at / 1000)).toBeLessThan(10);
	return verifyWebhook({ secret, headers: delivery.headers, body: delivery.body });
}

beforeAll(async () => {
	receiver = startReceiver();
	receiverOrigin = `http://127.0.0.1:${await receiver.listen()}`;
	stack = await startLocalStack({ vars: { ALLOW_LOCAL_WEBHOOK_URLS: "true" } });
	const client = await stack.provision("api");
	accountId = client.accountId;
	token = await stack.token(client);
});

afterAll(async () => {
	await stack?.close();
	await receiver?.close();
});

describe("webhooks end to end with a real local receiver", () => {
	it("delivers a completed and a failed conversion, signed, through queue, consumer and Durable Object", async () => {
		const completedSub = await createSubscription("/hooks/completed", ["conversion_completed"]);
		const failedSub = await createSubscription("/hooks/failed", ["conversion_failed"]);

		const completed = await emitConversionEvent("completed");
		const failed = await emitConversionEvent("failed");
		await Promise.all([receiver.waitFor("/hooks/completed", 1), receiver.waitFor("/hooks/failed", 1)]);

		const [completedDelivery] = receiver.received.filter((r) => r.path === "/hooks/completed") as [Received];
		expect(await expectSignedDelivery(completedDelivery, completedSub.secret, "conversion_completed")).toMatchObject({
			ok: true,
		});
		expect(
			await verifyWebhook({
				secret: failedSub.secret,
				headers: completedDelivery.headers,
				body: completedDelivery.body,
			}),
		).toEqual({ ok: false, reason: "signature_mismatch" });
		const completedPayload = JSON.parse(completedDelivery.body);
		expect(completedPayload).toMatchObject({
			event: "conversion.completed",
			id: completedDelivery.headers["x-webhook-id"],
		});
		expect(Object.keys(completedPayload.data.conversion).sort()).toEqual([...CONVERSION_EVENT_FIELDS].sort());
		expect(completedPayload.data.conversion).toEqual(completed.conversion);

		const [failedDelivery] = receiver.received.filter((r) => r.path === "/hooks/failed") as [Received];
		expect(await expectSignedDelivery(failedDelivery, failedSub.secret, "conversion_failed")).toMatchObject({
			ok: true,
		});
		const failedPayload = JSON.parse(failedDelivery.body);
		expect(failedPayload.event).toBe("conversion.failed");
		expect(failedPayload.data.conversion).toEqual(failed.conversion);
		expect(failedPayload.data.conversion.error_message).toBe("Unsupported audio format");
		expect(failedDelivery.body).not.toContain("output_url");

		// The receiver has the request before the object has the answer: the log says "delivered" once it recorded it.
		const entries = async () =>
			(
				(await (await api(`/api/v1/webhooks/subscriptions/${completedSub.id}/deliveries`)).json()) as {
					data: Record<string, unknown>[];
				}
			).data;
		await expect
			.poll(entries, { timeout: 5_000, interval: 100 })
			.toEqual([
				expect.objectContaining({ event_id: completed.eventId, status: "delivered", response_code: 200, attempt: 1 }),
			]);
	});

	it("retries a failing receiver after 2 s with a fresh signature and the same id", async () => {
		receiver.script("/hooks/flaky", [503, 200]);
		const sub = await createSubscription("/hooks/flaky", ["conversion_completed"]);
		await emitConversionEvent("completed");
		await receiver.waitFor("/hooks/flaky", 2);

		const [first, second] = receiver.received.filter((r) => r.path === "/hooks/flaky") as [Received, Received];
		expect(second.headers["x-webhook-id"]).toBe(first.headers["x-webhook-id"]);
		expect(second.body).toBe(first.body);
		expect(second.at - first.at).toBeGreaterThanOrEqual(1500);
		expect(Number(second.headers["x-webhook-timestamp"])).toBeGreaterThan(Number(first.headers["x-webhook-timestamp"]));
		for (const delivery of [first, second]) {
			expect(await expectSignedDelivery(delivery, sub.secret, "conversion_completed")).toMatchObject({ ok: true });
		}

		// The log catches up right after the 2xx is recorded.
		let entries: Record<string, unknown>[] = [];
		for (let i = 0; i < 50 && entries[0]?.status !== "delivered"; i++) {
			const response = await api(`/api/v1/webhooks/subscriptions/${sub.id}/deliveries`);
			entries = ((await response.json()) as { data: Record<string, unknown>[] }).data;
			if (entries[0]?.status !== "delivered") await new Promise((r) => setTimeout(r, 100));
		}
		expect(entries.map((e) => [e.attempt, e.status, e.response_code])).toEqual([
			[2, "delivered", 200],
			[1, "failed", 503],
		]);
	});

	it("retries each delivery on its own schedule while the receiver leaves another request hanging", async () => {
		// The first request hangs (the Worker's 30 s timeout would end it); the other event fails, then succeeds.
		receiver.script("/hooks/slow", ["hang", 500, 500, 200]);
		await createSubscription("/hooks/slow", ["conversion_completed"]);
		await emitConversionEvent("completed");
		await emitConversionEvent("completed");
		await receiver.waitFor("/hooks/slow", 4);

		const [hanging, ...others] = receiver.received.filter((r) => r.path === "/hooks/slow") as Received[];
		const retried = others.filter((r) => r.headers["x-webhook-id"] !== hanging?.headers["x-webhook-id"]);
		expect(retried).toHaveLength(3);
		// Measured on the receiver's clock: each retry follows the previous failure by its delay, not by 30 s.
		const offsets = retried.slice(1).map((r, i) => r.at - (retried[i] as Received).at);
		expect(offsets[0]).toBeGreaterThanOrEqual(2000);
		expect(offsets[0]).toBeLessThan(3500);
		expect(offsets[1]).toBeGreaterThanOrEqual(4000);
		expect(offsets[1]).toBeLessThan(5500);
	});

	it("sends a signed test delivery to the receiver on request", async () => {
		const sub = await createSubscription("/hooks/test", ["conversion_failed"]);
		const response = await api(`/api/v1/webhooks/subscriptions/${sub.id}/test`, { method: "POST" });
		expect(response.status).toBe(200);
		const { data } = (await response.json()) as { data: { message: string; test_payload: { id: string } } };
		const [delivery] = receiver.received.filter((r) => r.path === "/hooks/test") as [Received];
		expect(await expectSignedDelivery(delivery, sub.secret, "webhook_test")).toMatchObject({ ok: true });
		expect(JSON.parse(delivery.body)).toMatchObject({
			event: "webhook.test",
			id: data.test_payload.id,
			data: { subscription_id: sub.id },
		});
		expect(data.message).toMatch(/HTTP 200/);
	});
});
