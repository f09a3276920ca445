/** The cron safety net, run through the Worker's `scheduled` handler: it repairs only what was lost or stuck. */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { FAILURE_MESSAGES } from "../../src/conversions/failure-messages.ts";
import worker from "../../src/index.ts";
import {
	broker,
	eventsFor,
	insertAudioFile,
	insertVoice,
	json,
	resetBroker,
	runner,
	user,
} from "./conversion-fixtures.ts";

beforeEach(resetBroker);
afterEach(() => vi.restoreAllMocks());

const ago = (seconds: number) => new Date(Date.now() - seconds * 1000).toISOString();

async function runCron() {
	const ctx = createExecutionContext();
	await worker.scheduled(createScheduledController({ scheduledTime: new Date(), cron: "* * * * *" }), env, ctx);
	await waitOnExecutionContext(ctx);
}

/** A conversion row written as if it had been in `status` for a while. */
async function insertConversion(
	accountId: string,
	status: "pending_preprocessing" | "queued" | "processing",
	options: { ageSeconds: number; fileState?: "ready" | "awaiting_upload" },
) {
	const file = await insertAudioFile(accountId, options.fileState ?? "ready");
	const voiceId = await insertVoice();
	const id = crypto.randomUUID();
	const at = ago(options.ageSeconds);
	await env.DB.prepare(
		`INSERT INTO voice_conversions (id, account_id, audio_file_id, voice_model_id, pitch_shift, use_preview, status,
		 attempts, dispatched_at, created_at, queued_at, processing_started_at, updated_at)
		 VALUES (?, ?, ?, ?, 'same_octave', 0, ?, 0, ?, ?, ?, ?, ?)`,
	)
		.bind(
			id,
			accountId,
			file.id,
			voiceId,
			status,
			status === "pending_preprocessing" ? null : at,
			at,
			status === "pending_preprocessing" ? null : at,
			status === "processing" ? at : null,
			at,
		)
		.run();
	return { id, voiceId };
}

describe("scheduled safety net", () => {
	it("re-sends outbox events that were never marked sent", async () => {
		const alice = await user();
		const oldId = crypto.randomUUID();
		const newId = crypto.randomUUID();
		const insert = (id: string, createdAt: string, sentAt: string | null) =>
			env.DB.prepare(
				"INSERT INTO events (id, account_id, type, subject_id, payload, created_at, sent_at) VALUES (?, ?, 'conversion.completed', ?, '{}', ?, ?)",
			).bind(id, alice.accountId, crypto.randomUUID(), createdAt, sentAt);
		await env.DB.batch([
			insert(oldId, ago(120), null),
			insert(newId, ago(5), null),
			insert(crypto.randomUUID(), ago(300), ago(290)),
		]);
		const sent = vi.spyOn(env.WEBHOOK_EVENTS_QUEUE, "sendBatch");
		await runCron();
		const bodies = sent.mock.calls.flatMap(([messages]) => [...messages].map((m) => m.body));
		expect(bodies).toEqual([{ event_id: oldId }]);
	});

	it("re-sends queued jobs whose message was lost, and leaves those the broker holds", async () => {
		const alice = await user();
		const lost = await insertConversion(alice.accountId, "queued", { ageSeconds: 600 });
		const held = await insertConversion(alice.accountId, "queued", { ageSeconds: 600 });
		const fresh = await insertConversion(alice.accountId, "queued", { ageSeconds: 5 });
		await broker().enqueue({
			conversionId: held.id,
			accountId: alice.accountId,
			voiceId: held.voiceId,
			engine: "dsp",
			usePreview: false,
		});
		const sent = vi.spyOn(env.CONVERSION_JOBS_QUEUE, "sendBatch");
		await runCron();
		const bodies = sent.mock.calls.flatMap(([messages]) => [...messages].map((m) => m.body));
		expect(bodies).toEqual([{ conversion_id: lost.id }]);
		const row = await env.DB.prepare("SELECT dispatched_at FROM voice_conversions WHERE id = ?")
			.bind(lost.id)
			.first<{ dispatched_at: string }>();
		expect(Date.now() - Date.parse(row!.dispatched_at)).toBeLessThan(10_000);

		// The lost job is back in the broker: a runner gets both old jobs, and not the fresh one (not yet overdue).
		const worker = await runner();
		const leased = (await worker.lease({ capacity: 3 })).map((lease) => lease.conversion_id);
		expect(new Set(leased)).toEqual(new Set([lost.id, held.id]));
		expect(leased).not.toContain(fresh.id);
	});

	it("fails conversions stuck beyond STUCK_CONVERSION_SECONDS and takes their jobs from the broker", async () => {
		const alice = await user();
		const stuckSeconds = Number(env.STUCK_CONVERSION_SECONDS);
		const stuck = await insertConversion(alice.accountId, "processing", { ageSeconds: stuckSeconds + 60 });
		const neverUploaded = await insertConversion(alice.accountId, "pending_preprocessing", {
			ageSeconds: stuckSeconds + 60,
			fileState: "awaiting_upload",
		});
		const healthy = await insertConversion(alice.accountId, "processing", { ageSeconds: 60 });
		// The stuck one is still leased by a runner that hangs but heartbeats.
		await broker().enqueue({
			conversionId: stuck.id,
			accountId: alice.accountId,
			voiceId: stuck.voiceId,
			engine: "dsp",
			usePreview: false,
		});
		const worker = await runner();
		const [lease] = await worker.lease({ capacity: 1 });
		expect(lease?.conversion_id).toBe(stuck.id);

		await runCron();
		expect(await alice.get(stuck.id)).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES.timed_out });
		expect(await alice.get(neverUploaded.id)).toMatchObject({
			status: "failed",
			error_message: FAILURE_MESSAGES.never_uploaded,
		});
		expect((await alice.get(healthy.id)).status).toBe("processing");
		expect((await eventsFor(stuck.id)).map((e) => e.type)).toEqual(["conversion.failed"]);
		expect(await json(await worker.heartbeat(lease!.lease_id))).toMatchObject({ code: "lease_lost" });
		expect(await broker().knownJobs([stuck.id])).toEqual([]);

		// Running again changes nothing.
		await runCron();
		expect(await eventsFor(stuck.id)).toHaveLength(1);
	});

	it("forgets idempotency keys after their 24 hours", async () => {
		const alice = await user();
		const row = (key: string, expiresAt: string) =>
			env.DB.prepare(
				`INSERT INTO idempotency_keys (account_id, key, operation, request_hash, response_status, response_body, created_at, expires_at)
				 VALUES (?, ?, 'POST /api/v1/voice-conversions', 'h', 201, '{}', ?, ?)`,
			).bind(alice.accountId, key, ago(90_000), expiresAt);
		await env.DB.batch([row("expired", ago(3600)), row("alive", new Date(Date.now() + 3600_000).toISOString())]);
		await runCron();
		const { results } = await env.DB.prepare("SELECT key FROM idempotency_keys WHERE account_id = ?")
			.bind(alice.accountId)
			.all<{ key: string }>();
		expect(results.map((r) => r.key)).toEqual(["alive"]);
	});
});
