/** Helpers for the webhook tests: a controllable clock, a scripted receiver (fetch spy), outbox events, delivery stepping. */
import {
	createExecutionContext,
	createMessageBatch,
	getQueueResult,
	runDurableObjectAlarm,
	runInDurableObject,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, vi } from "vitest";
import worker from "../../src/index.ts";
import { signedInClient } from "./helpers.ts";

/**
 * Date is faked and put a day ahead of the real clock: alarms the objects set are then far in the real future, so
 * workerd never fires them by itself and each one runs only when a test calls `runDurableObjectAlarm`.
 */
export function useTestClock() {
	vi.useFakeTimers({ toFake: ["Date"] });
	vi.setSystemTime(Date.now() + 24 * 3600 * 1000);
	return {
		advanceSeconds(seconds: number) {
			vi.setSystemTime(Date.now() + seconds * 1000);
		},
	};
}

export interface ReceivedDelivery {
	url: string;
	headers: Headers;
	body: string;
	redirect: string | undefined;
	hasTimeoutSignal: boolean;
}

export type ScriptedAnswer = number | (() => Response | Promise<Response>);

/** Replaces outbound fetch: records every request and answers from `script` in order (the last answer repeats). */
export function scriptedReceiver(script: ScriptedAnswer[] = [200]) {
	const received: ReceivedDelivery[] = [];
	const answers = [...script];
	const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
		const request = new Request(input as RequestInfo, init);
		received.push({
			url: request.url,
			headers: request.headers,
			body: await request.text(),
			redirect: init?.redirect,
			hasTimeoutSignal: init?.signal instanceof AbortSignal,
		});
		const answer = answers.length > 1 ? answers.shift() : answers[0];
		if (typeof answer === "function") return answer();
		return new Response(null, { status: answer ?? 200 });
	});
	return {
		received,
		/** Answers to use from now on. */
		answer(next: ScriptedAnswer[]) {
			answers.splice(0, answers.length, ...next);
		},
		restore: () => spy.mockRestore(),
	};
}

export async function createSubscription(
	api: (path: string, init?: RequestInit) => Promise<Response>,
	body: Record<string, unknown> = {},
) {
	const response = await api("/api/v1/webhooks/subscriptions", {
		method: "POST",
		headers: { "Content-Type": "application/json" },
		body: JSON.stringify({
			url: "https://hooks.example.com/receive",
			events: ["conversion_completed", "conversion_failed"],
			...body,
		}),
	});
	expect(response.status, await response.clone().text()).toBe(201);
	return ((await response.json()) as { data: { id: string; secret: string } & Record<string, unknown> }).data;
}

export async function patchSubscription(
	api: (path: string, init?: RequestInit) => Promise<Response>,
	id: string,
	body: Record<string, unknown>,
) {
	return api(`/api/v1/webhooks/subscriptions/${id}`, {
		method: "PATCH",
		headers: { "Content-Type": "application/json" },
		body: JSON.stringify(body),
	});
}

/** A conversion as the conversions module puts it in the outbox payload (with an `output_url` that must never leave). */
export function conversionFields(status: "completed" | "failed") {
	return {
		id: crypto.randomUUID(),
		status,
		audio_file_id: crypto.randomUUID(),
		audio_file_name: "take-1.wav",
		voice_model_id: crypto.randomUUID(),
		voice_model_name: "Aurora",
		pitch_shift: "auto",
		pitch_shift_applied: "third_up",
		use_preview: false,
		voice_settings: { index_rate: 0.5, protect: 0.2 },
		queued_at: "2026-11-20T10:00:00.000Z",
		processing_started_at: "2026-11-20T10:00:01.000Z",
		completed_at: status === "completed" ? "2026-11-20T10:00:09.000Z" : null,
		output_url: "https://storage.example.com/secret-output.wav",
		...(status === "failed" ? { error_message: "The source audio is corrupted" } : {}),
	};
}

/** Writes an outbox row the way a conversion's terminal transition does; returns its id. */
export async function insertOutboxEvent(accountId: string, type = "conversion.completed"): Promise<string> {
	const id = crypto.randomUUID();
	const conversion = conversionFields(type === "conversion.failed" ? "failed" : "completed");
	await env.DB.prepare(
		"INSERT INTO events (id, account_id, type, subject_id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)",
	)
		.bind(id, accountId, type, conversion.id, JSON.stringify({ conversion }), new Date().toISOString())
		.run();
	return id;
}

/** Runs the `webhook-events` consumer on one message, as the queue would. */
export async function consumeWebhookEvent(eventId: string) {
	const batch = createMessageBatch("webhook-events", [
		{ id: crypto.randomUUID(), timestamp: new Date(), attempts: 1, body: { event_id: eventId } },
	]);
	const ctx = createExecutionContext();
	await worker.queue(batch as MessageBatch<unknown>, env, ctx);
	return getQueueResult(batch, ctx);
}

export const subscriptionObject = (subscriptionId: string) =>
	env.WEBHOOK_SUBSCRIPTION.get(env.WEBHOOK_SUBSCRIPTION.idFromName(subscriptionId));

/** Runs the subscription object's alarm now (what the platform does when it is due). */
export const runDeliveryAlarm = (subscriptionId: string) => runDurableObjectAlarm(subscriptionObject(subscriptionId));

/** When the object's alarm is set for (epoch ms), or null. */
export const scheduledAlarm = (subscriptionId: string) =>
	runInDurableObject(subscriptionObject(subscriptionId), (_instance, state) => state.storage.getAlarm());

export async function subscriptionRow(id: string) {
	return env.DB.prepare(
		"SELECT is_active, consecutive_failures, last_success_at, last_failure_at FROM webhook_subscriptions WHERE id = ?",
	)
		.bind(id)
		.first<{
			is_active: number;
			consecutive_failures: number;
			last_success_at: string | null;
			last_failure_at: string | null;
		}>();
}

export async function deliveryLog(
	api: (path: string, init?: RequestInit) => Promise<Response>,
	id: string,
	query = "",
) {
	const response = await api(`/api/v1/webhooks/subscriptions/${id}/deliveries${query}`);
	expect(response.status).toBe(200);
	return ((await response.json()) as { data: Record<string, unknown>[] }).data;
}

export async function webhookTestbed(script: ScriptedAnswer[] = [200]) {
	const clock = useTestClock();
	const receiver = scriptedReceiver(script);
	const signedIn = await signedInClient();
	return { clock, receiver, ...signedIn };
}
