/** The cron safety net, run through the Worker's `scheduled` handler: it repairs only what was lost or stuck. */
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { FAILURE_MESSAGES } from "../../src/conversions/failure-messages.ts";
import {
	conversionWaitLimitSeconds,
	DEFAULT_CONVERSION_WAIT_LIMIT_SECONDS,
	UPLOAD_GRACE_SECONDS,
} from "../../src/conversions/wait-limit.ts";
import { failConversionsPastWaitLimit } from "../../src/cron/safety-net.ts";
import worker from "../../src/index.ts";
import {
	broker,
	eventsFor,
	type FileState,
	insertAudioFile,
	insertVoice,
	json,
	resetBroker,
	runner,
	shiftBrokerClock,
	user,
} from "./conversion-fixtures.ts";
import { call } from "./helpers.ts";

beforeEach(resetBroker);
afterEach(() => vi.restoreAllMocks());

/** The deployment's wait limit (wrangler.toml), which these tests run under. */
const WAIT_LIMIT = Number(env.CONVERSION_WAIT_LIMIT_SECONDS);

const ago = (seconds: number) => new Date(Date.now() - seconds * 1000).toISOString();

async function runCron() {
	const ctx = createExecutionContext();
	await worker.scheduled(createScheduledController({ scheduledTime: new Date(), cron: "* * * * *" }), env, ctx);
	await waitOnExecutionContext(ctx);
}

/** A conversion row written as if it had been in `status` for a while (its file registered when it was created). */
async function insertConversion(
	accountId: string,
	status: "pending_preprocessing" | "queued" | "processing",
	options: { ageSeconds: number; fileState?: FileState; fileCreatedSecondsAgo?: number },
) {
	const file = await insertAudioFile(accountId, options.fileState ?? "ready", {
		createdAt: ago(options.fileCreatedSecondsAgo ?? options.ageSeconds),
	});
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
	return { id, voiceId, fileId: file.id };
}

const jobOf = (accountId: string, conversion: { id: string; voiceId: string }) => ({
	conversionId: conversion.id,
	accountId,
	voiceId: conversion.voiceId,
	engine: "dsp" as const,
	usePreview: false,
});

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

	it("never fails by time a conversion whose runner keeps its lease alive, however long it has run", async () => {
		const alice = await user();
		// Longer than the old one-hour limit, and longer than the wait limit itself.
		const longJob = await insertConversion(alice.accountId, "processing", { ageSeconds: WAIT_LIMIT + 3600 });
		await broker().enqueue(jobOf(alice.accountId, longJob));
		const worker = await runner();
		const lease = await worker.leaseOne();
		expect(lease.conversion_id).toBe(longJob.id);
		// The lease was granted long ago (D1 last moved then); only its heartbeats are recent.
		await env.DB.prepare("UPDATE voice_conversions SET updated_at = ? WHERE id = ?")
			.bind(ago(WAIT_LIMIT + 3600), longJob.id)
			.run();
		expect((await worker.heartbeat(lease.lease_id)).status).toBe(200);

		await runCron();
		expect((await alice.get(longJob.id)).status).toBe("processing");
		expect(await eventsFor(longJob.id)).toEqual([]);
		expect((await worker.heartbeat(lease.lease_id)).status).toBe(200);
		expect((await worker.finish(lease)).status).toBe(200);
		expect((await alice.get(longJob.id)).status).toBe("completed");
	});

	it("fails conversions nothing has worked on for CONVERSION_WAIT_LIMIT_SECONDS, and takes their jobs from the broker", async () => {
		const alice = await user();
		const old = WAIT_LIMIT + 60;
		// Waiting in the broker for a runner since before the limit.
		const unserved = await insertConversion(alice.accountId, "queued", { ageSeconds: old });
		await shiftBrokerClock(-old * 1000);
		await broker().enqueue(jobOf(alice.accountId, unserved));
		await shiftBrokerClock(0);
		// Processing in D1, but unknown to the broker: no runner can ever finish it.
		const orphan = await insertConversion(alice.accountId, "processing", { ageSeconds: old });
		// As old in D1, but the broker put its job back a minute ago (a lost lease): it is timed from then.
		const retried = await insertConversion(alice.accountId, "processing", { ageSeconds: old });
		await broker().enqueue(jobOf(alice.accountId, retried));
		// Its file was never uploaded, though its window was regenerated again and again (the last time just now).
		const neverUploaded = await insertConversion(alice.accountId, "pending_preprocessing", {
			ageSeconds: old,
			fileState: "awaiting_upload",
		});
		await env.DB.prepare("UPDATE audio_files SET upload_url_expires_at = ? WHERE id = ?")
			.bind(new Date(Date.now() + 30 * 60_000).toISOString(), neverUploaded.fileId)
			.run();
		const young = await insertConversion(alice.accountId, "queued", { ageSeconds: WAIT_LIMIT - 600 });

		await runCron();
		for (const id of [unserved.id, orphan.id]) {
			expect(await alice.get(id)).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES.timed_out });
			expect((await eventsFor(id)).map((e) => e.type)).toEqual(["conversion.failed"]);
		}
		expect(await alice.get(neverUploaded.id)).toMatchObject({
			status: "failed",
			error_message: FAILURE_MESSAGES.never_uploaded,
		});
		expect((await alice.get(retried.id)).status).toBe("processing");
		expect((await alice.get(young.id)).status).toBe("queued");
		expect(await broker().knownJobs([unserved.id, retried.id])).toEqual([retried.id]);

		// Running again changes nothing.
		await runCron();
		expect(await eventsFor(unserved.id)).toHaveLength(1);
		expect((await alice.get(retried.id)).status).toBe("processing");
	});

	it("fails voices that no runner validated within the wait limit, telling their owner why", async () => {
		const alice = await user();
		const old = WAIT_LIMIT + 60;
		const validating = async (ageSeconds: number) => {
			const id = await insertVoice({ engine: "rvc" });
			await env.DB.prepare("UPDATE voices SET account_id = ?, status = 'validating', updated_at = ? WHERE id = ?")
				.bind(alice.accountId, ago(ageSeconds), id)
				.run();
			return id;
		};
		const validationJob = (id: string) => ({
			conversionId: id,
			accountId: alice.accountId,
			voiceId: id,
			engine: "rvc" as const,
			usePreview: false,
			kind: "validate_voice" as const,
		});
		// As old as the limit, but a runner is validating it now.
		const attended = await validating(old);
		await broker().enqueue(validationJob(attended));
		const worker = await runner();
		const leased = await worker.post("/internal/v1/leases", {
			runner_id: worker.runnerId,
			capacity: 1,
			wait_seconds: 0,
			engines: ["rvc"],
			job_kinds: ["validate_voice"],
		});
		expect((await json<{ data: { validations: { voice_id: string }[] } }>(leased)).data.validations).toMatchObject([
			{ voice_id: attended },
		]);
		// Waiting since before the limit for a runner that takes validations (none comes).
		const unserved = await validating(old);
		await shiftBrokerClock(-old * 1000);
		await broker().enqueue(validationJob(unserved));
		await shiftBrokerClock(0);
		const young = await validating(WAIT_LIMIT - 600);

		await runCron();
		const voice = async (id: string) =>
			env.DB.prepare("SELECT status, error_message FROM voices WHERE id = ?").bind(id).first();
		expect(await voice(unserved)).toEqual({
			status: "failed",
			error_message:
				"The voice could not be validated: no worker took it within 24 hours. Delete this voice and create it again to retry.",
		});
		const event = await env.DB.prepare("SELECT type FROM events WHERE subject_id = ?").bind(unserved).first();
		expect(event).toEqual({ type: "voice.failed" });
		expect(await broker().knownJobs([unserved])).toEqual([]);
		expect(await voice(attended)).toMatchObject({ status: "validating" });
		expect(await voice(young)).toMatchObject({ status: "validating" });
	});

	it("takes the wait limit from the configuration, and turns it off with 0", async () => {
		const alice = await user();
		const waiting = await insertConversion(alice.accountId, "queued", { ageSeconds: 3 * 3600 });
		const configured = (value: string) => ({ ...env, CONVERSION_WAIT_LIMIT_SECONDS: value }) as unknown as Env;
		expect(await failConversionsPastWaitLimit(configured("0"), new Date())).toBe(0);
		await failConversionsPastWaitLimit(configured("14400"), new Date());
		expect((await alice.get(waiting.id)).status).toBe("queued");
		await failConversionsPastWaitLimit(configured("7200"), new Date());
		expect(await alice.get(waiting.id)).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES.timed_out });

		expect(conversionWaitLimitSeconds(env)).toBe(DEFAULT_CONVERSION_WAIT_LIMIT_SECONDS);
		expect(DEFAULT_CONVERSION_WAIT_LIMIT_SECONDS).toBeGreaterThanOrEqual(24 * 3600);
		expect(conversionWaitLimitSeconds({ CONVERSION_WAIT_LIMIT_SECONDS: "an hour" } as unknown as Env)).toBe(
			DEFAULT_CONVERSION_WAIT_LIMIT_SECONDS,
		);
		const doc = await json<{ info: { description: string } }>(await call("/openapi.json"));
		expect(doc.info.description).toContain("never stopped by time");
		expect(doc.info.description).toContain("after 24 hours without progress");
	});

	it("fails at once the conversions waiting on a file that can no longer arrive, with that reason", async () => {
		const alice = await user();
		// Upload windows that closed (30 minutes after registration) longer ago than the grace, and within it.
		const lapsed = await insertConversion(alice.accountId, "pending_preprocessing", {
			ageSeconds: 60,
			fileState: "awaiting_upload",
			fileCreatedSecondsAgo: 30 * 60 + UPLOAD_GRACE_SECONDS + 60,
		});
		const mayStillArrive = await insertConversion(alice.accountId, "pending_preprocessing", {
			ageSeconds: 60,
			fileState: "awaiting_upload",
			fileCreatedSecondsAgo: 30 * 60 + UPLOAD_GRACE_SECONDS - 300,
		});
		// Registered two hours ago, but its upload address was regenerated a minute ago.
		const regenerated = await insertConversion(alice.accountId, "pending_preprocessing", {
			ageSeconds: 2 * 3600,
			fileState: "awaiting_upload",
		});
		await env.DB.prepare("UPDATE audio_files SET upload_url_expires_at = ? WHERE id = ?")
			.bind(new Date(Date.now() + 29 * 60_000).toISOString(), regenerated.fileId)
			.run();
		// Deleted while the conversion was being created (the delete only checks conversions that already exist).
		const deleted = await insertConversion(alice.accountId, "pending_preprocessing", {
			ageSeconds: 60,
			fileState: "pending",
		});
		await env.DB.prepare("UPDATE audio_files SET deleted_at = ? WHERE id = ?")
			.bind(new Date().toISOString(), deleted.fileId)
			.run();

		await runCron();
		expect(await alice.get(lapsed.id)).toMatchObject({
			status: "failed",
			error_message: FAILURE_MESSAGES.never_uploaded,
		});
		expect(await alice.get(deleted.id)).toMatchObject({
			status: "failed",
			error_message: FAILURE_MESSAGES.source_deleted,
		});
		for (const id of [lapsed.id, deleted.id]) {
			expect((await eventsFor(id)).map((e) => e.type)).toEqual(["conversion.failed"]);
		}
		expect((await alice.get(mayStillArrive.id)).status).toBe("pending_preprocessing");
		expect((await alice.get(regenerated.id)).status).toBe("pending_preprocessing");
	});

	it("moves on conversions whose file's preprocessing outcome never reached them", async () => {
		const alice = await user();
		const ready = await insertConversion(alice.accountId, "pending_preprocessing", { ageSeconds: 300 });
		const failed = await insertConversion(alice.accountId, "pending_preprocessing", {
			ageSeconds: 300,
			fileState: "failed",
		});
		await env.DB.prepare("UPDATE audio_files SET updated_at = ? WHERE id IN (?, ?)")
			.bind(ago(300), ready.fileId, failed.fileId)
			.run();
		await runCron();
		expect((await alice.get(ready.id)).status).toBe("queued");
		expect(await alice.get(failed.id)).toMatchObject({
			status: "failed",
			error_message: FAILURE_MESSAGES.corrupted_source,
		});
		expect(await broker().knownJobs([ready.id])).toEqual([ready.id]);
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
