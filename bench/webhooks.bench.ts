/**
 * Webhook figures: signing and verification cost, and event-to-receiver latency through the real local stack
 * (wrangler test harness: queue → consumer → WebhookSubscription object → signed POST to a node:http receiver on
 * 127.0.0.1). Bounded: a fixed number of operations and events, and a deadline. Run: `npx node bench/webhooks.bench.ts`.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { verifyWebhook } from "../sdk/verify-webhook.ts";
import { computeWebhookSignature } from "../src/contracts/webhook-signature.ts";
import { startLocalStack } from "../test/support/local-stack.ts";

const SIGN_OPS = 5_000;
const EVENTS = 60;
const SUBSCRIPTIONS = 5;
const DEADLINE_MS = 120_000;

const percentile = (sorted: number[], p: number) =>
	sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

async function signingFigures() {
	const secret = `whsec_${randomBytes(32).toString("base64url")}`;
	const body = JSON.stringify({ event: "conversion.completed", id: crypto.randomUUID(), pad: "x".repeat(900) });
	const timestamp = Math.floor(Date.now() / 1000);
	for (let i = 0; i < 500; i++) await computeWebhookSignature(secret, timestamp, body); // warm-up
	let start = performance.now();
	let signature = "";
	for (let i = 0; i < SIGN_OPS; i++) signature = await computeWebhookSignature(secret, timestamp, body);
	const signMs = performance.now() - start;
	const headers = { "x-webhook-signature": `sha256=${signature}`, "x-webhook-timestamp": String(timestamp) };
	start = performance.now();
	for (let i = 0; i < SIGN_OPS; i++) {
		const result = await verifyWebhook({ secret, headers, body });
		if (!result.ok) throw new Error("verification failed in bench");
	}
	const verifyMs = performance.now() - start;
	console.log(
		`sign   ~1 KB body: ${(SIGN_OPS / (signMs / 1000)).toFixed(0)} ops/s (${((signMs * 1000) / SIGN_OPS).toFixed(1)} µs/op)`,
	);
	console.log(
		`verify ~1 KB body: ${(SIGN_OPS / (verifyMs / 1000)).toFixed(0)} ops/s (${((verifyMs * 1000) / SIGN_OPS).toFixed(1)} µs/op)`,
	);
	console.log(`verify/sign cost ratio: ${(verifyMs / signMs).toFixed(2)}`);
}

async function deliveryFigures() {
	const arrivals = new Map<string, number[]>();
	const receiver = createServer((request, response) => {
		request.resume();
		request.on("end", () => {
			const id = String(request.headers["x-webhook-id"]);
			arrivals.set(id, [...(arrivals.get(id) ?? []), Date.now()]);
			response.writeHead(204).end();
		});
	});
	await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
	const origin = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
	const stack = await startLocalStack({ vars: { ALLOW_LOCAL_WEBHOOK_URLS: "true" } });
	try {
		const { env } = stack;
		const client = await stack.provision("api");
		const access_token = await stack.token(client);
		for (let i = 0; i < SUBSCRIPTIONS; i++) {
			const created = await stack.harness.fetch("/api/v1/webhooks/subscriptions", {
				method: "POST",
				headers: { Authorization: `Bearer ${access_token}`, "Content-Type": "application/json" },
				body: JSON.stringify({ url: `${origin}/hook/${i}`, events: ["conversion_completed"] }),
			});
			if (created.status !== 201) throw new Error(`subscription create failed: ${created.status}`);
		}

		const eventIds: string[] = [];
		const sentAt = Date.now();
		for (let i = 0; i < EVENTS; i++) {
			const id = crypto.randomUUID();
			eventIds.push(id);
			await env.DB.prepare(
				"INSERT INTO events (id, account_id, type, subject_id, payload, created_at) VALUES (?, ?, 'conversion.completed', ?, ?, ?)",
			)
				.bind(
					id,
					client.accountId,
					crypto.randomUUID(),
					JSON.stringify({ conversion: { id } }),
					new Date().toISOString(),
				)
				.run();
		}
		const sendStart = Date.now();
		await env.WEBHOOK_EVENTS_QUEUE.sendBatch(eventIds.map((event_id) => ({ body: { event_id } })));
		const expected = EVENTS * SUBSCRIPTIONS;
		let fannedOutMs = Number.NaN;
		while ([...arrivals.values()].length < expected && Date.now() - sendStart < DEADLINE_MS) {
			await new Promise((r) => setTimeout(r, 50));
			if (Number.isNaN(fannedOutMs)) {
				const unsent = await env.DB.prepare("SELECT COUNT(*) AS n FROM events WHERE sent_at IS NULL").first<number>(
					"n",
				);
				if (unsent === 0) fannedOutMs = Date.now() - sendStart;
			}
		}
		const firsts = [...arrivals.values()].map((times) => (times[0] as number) - sendStart).sort((a, b) => a - b);
		const duplicates = [...arrivals.values()].reduce((n, times) => n + times.length - 1, 0);
		const spanMs = Math.max(...firsts);
		console.log(
			`fan-out: ${EVENTS} events x ${SUBSCRIPTIONS} subscriptions = ${expected} deliveries expected, ${firsts.length} received, ${duplicates} duplicates (outbox insert ${sendStart - sentAt} ms)`,
		);
		console.log(`consumer: all ${EVENTS} events handed to their subscriptions' objects after ${fannedOutMs} ms`);
		console.log(
			`queue send → receiver: p50 ${percentile(firsts, 50)} ms, p95 ${percentile(firsts, 95)} ms, max ${spanMs} ms; ${(firsts.length / (spanMs / 1000)).toFixed(0)} deliveries/s`,
		);
	} finally {
		await stack.close();
		await new Promise<void>((resolve) => receiver.close(() => resolve()));
	}
}

await signingFigures();
await deliveryFigures();
