/**
 * Request budgets, against wrangler.toml's own `[[ratelimits]]` bindings under miniflare. The limiter counts in
 * windows aligned to the clock, so a burst may straddle two: each test sends until the first 429 and checks that
 * none came before the configured limit, and that one did come.
 */
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { RATE_LIMITS, type RateLimitName } from "../../src/http/rate-limits.ts";
import { requestToken, signedInClient } from "./helpers.ts";
import {
	consumeWebhookEvent,
	createSubscription,
	deliveryLog,
	insertOutboxEvent,
	runDeliveryAlarm,
	webhookTestbed,
} from "./webhooks-helpers.ts";

type Binding = { name: string; simple: { limit: number; period: number } };
/** wrangler.toml's `[[ratelimits]]`, as vitest.config.ts read them. */
const bindings = (env as unknown as { TEST_RATE_LIMITS: Binding[] }).TEST_RATE_LIMITS;
const limitOf = (name: RateLimitName) => {
	const binding = bindings.find((b) => b.name === name);
	if (!binding) throw new Error(`wrangler.toml has no ${name}`);
	return binding.simple.limit;
};
const API_LIMIT = limitOf("API_RATE_LIMIT");
const TOKEN_LIMIT = limitOf("TOKEN_RATE_LIMIT");
const WEBHOOK_SEND_LIMIT = limitOf("WEBHOOK_SEND_RATE_LIMIT");

/** Calls `send` until it answers 429 (at most three windows' worth); returns the 429 and how many got through first. */
async function sendUntilLimited(send: () => Promise<Response>, limit: number) {
	for (let accepted = 0; accepted <= 3 * limit; accepted++) {
		const response = await send();
		if (response.status === 429) return { response, accepted };
		await response.body?.cancel();
	}
	throw new Error(`no 429 after ${3 * limit + 1} requests`);
}

async function expectRateLimited(response: Response, periodSeconds: number) {
	expect(response.headers.get("Retry-After")).toBe(String(periodSeconds));
	expect(response.headers.get("Cache-Control")).toBe("no-store");
	const body = (await response.json()) as { success: boolean; code: string; message: string };
	expect(body).toMatchObject({ success: false, code: "rate_limited" });
	expect(body.message).toContain(`retry after ${periodSeconds} seconds`);
	return body;
}

describe("request budgets", () => {
	it("answers with the window each binding counts in", () => {
		expect(bindings.map((b) => [b.name, b.simple.period]).sort()).toEqual(
			Object.entries(RATE_LIMITS)
				.map(([name, { periodSeconds }]) => [name, periodSeconds])
				.sort(),
		);
	});

	let restore: (() => void) | undefined;
	afterEach(() => {
		restore?.();
		restore = undefined;
		vi.useRealTimers();
	});

	it("limits each account's API requests, not another account's, and lets it in again after Retry-After", async () => {
		const busy = await signedInClient();
		const other = await signedInClient();
		const { response, accepted } = await sendUntilLimited(() => busy.api("/api/v1/voices?limit=1"), API_LIMIT);
		expect(accepted).toBeGreaterThanOrEqual(API_LIMIT);
		await expectRateLimited(response, RATE_LIMITS.API_RATE_LIMIT.periodSeconds);

		// Every authenticated route is counted, whatever it answers.
		expect((await busy.api("/api/v1/voice-conversions/not-an-id")).status).toBe(429);
		expect((await other.api("/api/v1/voices?limit=1")).status).toBe(200);

		await new Promise((resolve) => setTimeout(resolve, RATE_LIMITS.API_RATE_LIMIT.periodSeconds * 1000));
		expect((await busy.api("/api/v1/voices?limit=1")).status).toBe(200);
	}, 60_000);

	it("limits token requests per client_id and address, wrong guesses included, with OAuth's error fields", async () => {
		const { client } = await signedInClient();
		const { client: other } = await signedInClient();
		const fields = (c: typeof client, secret = c.clientSecret) => ({
			grant_type: "client_credentials",
			client_id: c.clientId,
			client_secret: secret,
			scope: c.scope,
		});
		const guesser = { "CF-Connecting-IP": "203.0.113.9" };
		const { response, accepted } = await sendUntilLimited(
			() => requestToken(fields(client, "a wrong guess"), guesser),
			TOKEN_LIMIT,
		);
		expect(accepted).toBeGreaterThanOrEqual(TOKEN_LIMIT - 1);
		const body = await expectRateLimited(response, RATE_LIMITS.TOKEN_RATE_LIMIT.periodSeconds);
		expect(body).toMatchObject({ error: "rate_limited" });
		expect((body as unknown as { error_description: string }).error_description).toBe(body.message);

		// The right secret from that address waits too; another client does not.
		expect((await requestToken(fields(client), guesser)).status).toBe(429);
		expect((await requestToken(fields(other), guesser)).status).toBe(200);
		// Nor does the client itself elsewhere: a client_id is no secret, and someone else's guesses must not lock it out.
		expect((await requestToken(fields(client), { "CF-Connecting-IP": "198.51.100.7" })).status).toBe(200);
		expect((await requestToken(fields(client))).status).toBe(200);
	}, 60_000);

	it("limits test deliveries and redeliveries per account and receiver host, after their 404s", async () => {
		const { receiver, api, client } = await webhookTestbed([200]);
		restore = receiver.restore;
		const subscription = await createSubscription(api);
		const second = await createSubscription(api, { url: "https://elsewhere.example.net/second" });
		await consumeWebhookEvent(await insertOutboxEvent(client.accountId));
		await runDeliveryAlarm(subscription.id);
		const [logged] = await deliveryLog(api, subscription.id);
		const sendTest = (id: string) => api(`/api/v1/webhooks/subscriptions/${id}/test`, { method: "POST" });
		const redeliver = (id: string, deliveryId = logged?.id) =>
			api(`/api/v1/webhooks/subscriptions/${id}/deliveries/${deliveryId}/redeliver`, { method: "POST" });
		const before = receiver.received.length;

		const { response, accepted } = await sendUntilLimited(() => sendTest(subscription.id), WEBHOOK_SEND_LIMIT);
		expect(accepted).toBeGreaterThanOrEqual(WEBHOOK_SEND_LIMIT);
		await expectRateLimited(response, RATE_LIMITS.WEBHOOK_SEND_RATE_LIMIT.periodSeconds);
		// Only what was let through reached the receiver; a redelivery shares the budget.
		expect(receiver.received.length - before).toBe(accepted);
		expect((await redeliver(subscription.id)).status).toBe(429);

		expect((await sendTest(second.id)).status).toBe(200);
		// A new subscription for the same receiver starts no new count, whether the old one is gone or not.
		expect((await api(`/api/v1/webhooks/subscriptions/${subscription.id}`, { method: "DELETE" })).status).toBe(200);
		const again = await createSubscription(api, { url: "https://hooks.example.com/again" });
		expect((await sendTest(again.id)).status).toBe(429);
		expect(receiver.received.length - before).toBe(accepted + 1);
		// What does not exist is still a 404, not a 429.
		expect((await sendTest(crypto.randomUUID())).status).toBe(404);
		expect((await redeliver(subscription.id, crypto.randomUUID())).status).toBe(404);
	}, 60_000);

	it("does not count the runner API: runners are the operator's own", async () => {
		const runner = await signedInClient("runner");
		const heartbeat = () =>
			runner.api(`/internal/v1/leases/${crypto.randomUUID()}/heartbeat`, {
				method: "POST",
				headers: { "Content-Type": "application/json" },
				body: "{}",
			});
		const statuses = new Set<number>();
		for (let i = 0; i <= API_LIMIT; i++) statuses.add((await heartbeat()).status);
		// An unknown lease is lost (409), every time.
		expect([...statuses]).toEqual([409]);
	}, 60_000);
});
