/**
 * The whole life of a conversion through the runner API, with a test runner that uses only the HTTP contract:
 * lease (long-poll), fetch source, PUT output through the signed address, heartbeat, complete or fail.
 */
import { createExecutionContext, createMessageBatch, getQueueResult, runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ACK_WINDOW_MS } from "../../durable-objects/job-broker.ts";
import { LEASE_SECONDS } from "../../durable-objects/job-broker-logic.ts";
import { FAILURE_REASONS, LeaseResponse } from "../../src/contracts/runner.ts";
import { FAILURE_MESSAGES } from "../../src/conversions/failure-messages.ts";
import { UNUSED_OUTPUT_GRACE_MS } from "../../src/conversions/outputs.ts";
import { completeConversion, failConversion } from "../../src/conversions/state-machine.ts";
import workerEntry from "../../src/index.ts";
import {
	broker,
	deliveredConversion,
	deliverJobs,
	eventsFor,
	finishPreprocessing,
	insertAudioFile,
	insertVoice,
	json,
	makeWav,
	resetBroker,
	runner,
	shiftBrokerClock,
	user,
} from "./conversion-fixtures.ts";
import { call } from "./helpers.ts";

beforeEach(resetBroker);

describe("conversion lifecycle through the runner API", () => {
	it("goes pending → queued → processing → completed, and the output downloads without a token", async () => {
		const alice = await user();
		const worker = await runner();
		const voiceId = await insertVoice({ name: "Aria" });
		const file = await insertAudioFile(alice.accountId, "ready", { seconds: 1 });

		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "fifth_up" });
		expect(created).toMatchObject({
			status: "pending_preprocessing",
			audio_file_id: file.id,
			voice_model_id: voiceId,
			voice_model_name: "Aria",
			pitch_shift: "fifth_up",
			use_preview: false,
			output_url: null,
			queued_at: null,
			processing_started_at: null,
			completed_at: null,
			error_message: null,
		});
		// The file was ready: promotion happened at creation.
		const queued = await alice.get(created.id);
		expect(queued.status).toBe("queued");
		expect(queued.queued_at).not.toBeNull();

		// The job reaches the broker while the runner long-polls.
		const response = await worker.post("/internal/v1/leases", {
			runner_id: worker.runnerId,
			capacity: 2,
			wait_seconds: 10,
			engines: ["dsp"],
		});
		expect(response.status).toBe(200);
		const body = await json<{ data: unknown }>(response);
		const { leases } = LeaseResponse.parse(body.data);
		expect(leases).toHaveLength(1);
		const lease = leases[0]!;
		expect(lease).toMatchObject({
			conversion_id: created.id,
			attempt: 1,
			semitones: 7,
			pitch_shift: "fifth_up",
			voice_settings: null,
			use_preview: false,
			preview_seconds: 10,
			// A service voice: not an account's, so a runner runs an uploaded synthesizer of it on its model thread.
			voice: { id: voiceId, name: "Aria", engine: "dsp", params: { formant_shift: 1.1 }, account_voice: false },
			source: { mime_type: "audio/wav", format: "wav", sample_rate: 16_000, channels: 1, duration_seconds: 1 },
			output: { content_type: "audio/wav" },
		});
		expect(lease.voice.artifacts[0]).toMatchObject({ name: "params", sha256: "a".repeat(64), size_bytes: 3 });

		const processing = await alice.get(created.id);
		expect(processing.status).toBe("processing");
		expect(processing.processing_started_at).not.toBeNull();
		expect(processing.output_url).toBeNull();

		// The runner reads the source and the model artifact through their signed addresses.
		const source = await call(lease.source.url);
		expect(new Uint8Array(await source.arrayBuffer())).toEqual(file.bytes);
		expect((await call(lease.voice.artifacts[0]!.url)).status).toBe(200);

		const heartbeat = await worker.heartbeat(lease.lease_id);
		expect(heartbeat.status).toBe(200);
		const { data: beat } = await json<{ data: { lease_expires_at: string } }>(heartbeat);
		expect(Date.parse(beat.lease_expires_at)).toBeGreaterThanOrEqual(Date.parse(lease.lease_expires_at));

		const wav = makeWav(0.25);
		expect((await worker.uploadOutput(lease, wav)).status).toBe(200);
		const completed = await worker.complete(lease.lease_id);
		expect(completed.status).toBe(200);
		expect(await json(completed)).toMatchObject({
			success: true,
			data: { conversion_id: created.id, status: "completed" },
		});

		const done = await alice.get(created.id);
		expect(done.status).toBe("completed");
		expect(done.completed_at).not.toBeNull();
		expect(done.queued_at).toBe(queued.queued_at);
		expect(done.processing_started_at).toBe(processing.processing_started_at);
		expect(done.error_message).toBeNull();
		// A fresh 12-hour address on every read, which downloads the WAV with no bearer token.
		const outputUrl = new URL(done.output_url!);
		const expiry = Number(outputUrl.searchParams.get("exp")) * 1000;
		expect(Math.abs(expiry - (Date.now() + 12 * 3600_000))).toBeLessThan(60_000);
		const download = await call(done.output_url!);
		expect(download.status).toBe(200);
		expect(download.headers.get("Content-Type")).toBe("audio/wav");
		// Saved under the conversion's id (the object is named by the lease).
		expect(download.headers.get("Content-Disposition")).toBe(`attachment; filename="${created.id}.wav"`);
		expect(new Uint8Array(await download.arrayBuffer())).toEqual(wav);
		expect((await call(outputUrl.href, { method: "HEAD" })).headers.get("Content-Disposition")).toBe(
			`attachment; filename="${created.id}.wav"`,
		);

		// One outbox event, in the spec's shape, without output_url.
		const events = await eventsFor(created.id);
		expect(events.map((e) => e.type)).toEqual(["conversion.completed"]);
		expect(events[0]!.payload.conversion).toEqual({
			id: created.id,
			status: "completed",
			audio_file_id: file.id,
			audio_file_name: created.audio_file_name,
			voice_model_id: voiceId,
			voice_model_name: "Aria",
			pitch_shift: "fifth_up",
			pitch_shift_applied: "fifth_up",
			use_preview: false,
			voice_settings: null,
			queued_at: done.queued_at,
			processing_started_at: done.processing_started_at,
			completed_at: done.completed_at,
		});
		expect(await broker().stats()).toMatchObject({ waiting: 0, leased: 0 });
	});

	it("waits for preprocessing when created early, then starts by itself when the file is ready", async () => {
		const alice = await user();
		const worker = await runner();
		const voiceId = await insertVoice();
		const file = await insertAudioFile(alice.accountId, "pending");
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId, use_preview: true });

		expect(await worker.lease({ wait_seconds: 0 })).toEqual([]);
		expect((await alice.get(created.id)).status).toBe("pending_preprocessing");

		// Preprocessing ends while the runner is already long-polling: the job arrives without any scan.
		const polling = worker.lease({ wait_seconds: 10 });
		await finishPreprocessing(alice.accountId, file.id, "ready");
		const [lease] = await polling;
		expect(lease?.conversion_id).toBe(created.id);
		expect(lease?.use_preview).toBe(true);
		const started = await alice.get(created.id);
		expect(started.status).toBe("processing");
		expect(Date.parse(started.queued_at!)).toBeGreaterThanOrEqual(Date.parse(created.created_at));
		expect((await worker.finish(lease!)).status).toBe(200);
		expect((await alice.get(created.id)).status).toBe("completed");
	});

	it("fails waiting conversions with the reason when preprocessing fails", async () => {
		const alice = await user();
		const voiceId = await insertVoice();
		const file = await insertAudioFile(alice.accountId, "pending");
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId });
		await finishPreprocessing(alice.accountId, file.id, "failed");
		const failed = await alice.get(created.id);
		expect(failed).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES.unsupported_format });
		expect(failed.queued_at).toBeNull();
		const events = await eventsFor(created.id);
		expect(events.map((e) => e.type)).toEqual(["conversion.failed"]);
		expect(events[0]!.payload.conversion).toMatchObject({
			status: "failed",
			error_message: FAILURE_MESSAGES.unsupported_format,
		});
		// A duplicate notification changes nothing.
		await finishPreprocessing(alice.accountId, file.id, "failed");
		expect(await eventsFor(created.id)).toHaveLength(1);
	});

	it("maps each permanent failure reason to a client-readable message", async () => {
		const alice = await user();
		const worker = await runner();
		const voiceId = await insertVoice();
		for (const reason of FAILURE_REASONS) {
			const file = await insertAudioFile(alice.accountId, "ready");
			const created = await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId });
			await deliverJobs([created.id]);
			const lease = await worker.leaseOne();
			expect(lease.conversion_id).toBe(created.id);
			const response = await worker.fail(lease.lease_id, "permanent", reason);
			expect(await json(response)).toMatchObject({ data: { decision: "failed" } });
			const failed = await alice.get(created.id);
			expect(failed).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES[reason], output_url: null });
			expect(failed.completed_at).toBeNull();
			expect((await eventsFor(created.id)).map((e) => e.type)).toEqual(["conversion.failed"]);
			// The lease is over: no more heartbeats or completion.
			expect(await json(await worker.heartbeat(lease.lease_id))).toMatchObject({ code: "lease_lost" });
		}
		expect(FAILURE_MESSAGES.too_large).toMatch(/100 MB/);
	});

	it("fails a job whose runner names a reason this Worker does not know as internal, logging the runner's words", async () => {
		const alice = await user();
		const worker = await runner();
		const voiceId = await insertVoice();
		const warned = vi.spyOn(console, "warn");
		const file = await insertAudioFile(alice.accountId, "ready");
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId });
		await deliverJobs([created.id]);
		const lease = await worker.leaseOne();
		const fail = (body: unknown) => worker.post(`/internal/v1/leases/${lease.lease_id}/fail`, body);
		// Malformed reports are still refused, and leave the lease as it was.
		for (const body of [
			{ kind: "permanent", reason: "Not a reason!", message: "m" },
			{ kind: "permanent", reason: "", message: "m" },
			{ kind: "permanent", reason: "x".repeat(101), message: "m" },
			{ kind: "sometimes", reason: "internal", message: "m" },
			{ kind: "permanent", reason: "internal" },
		]) {
			const refused = await fail(body);
			expect(refused.status).toBe(400);
			expect(await json(refused)).toMatchObject({ code: "invalid_request" });
		}
		expect((await worker.heartbeat(lease.lease_id)).status).toBe(200);
		// A newer runner's reason: the conversion fails now, with the internal error's message.
		const message = "the source's sample rate changes mid-stream (runner 9.0)";
		const response = await fail({ kind: "permanent", reason: "sample_rate_changes", message });
		expect(response.status).toBe(200);
		expect(await json(response)).toMatchObject({ data: { decision: "failed" } });
		expect(await alice.get(created.id)).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES.internal });
		expect((await eventsFor(created.id)).map((e) => e.type)).toEqual(["conversion.failed"]);
		const logged = warned.mock.calls.map(([line]) => JSON.parse(String(line)));
		expect(logged).toContainEqual(
			expect.objectContaining({
				msg: "runner reported a failure",
				reason: "internal",
				reported_reason: "sample_rate_changes",
				detail: message,
			}),
		);
		warned.mockRestore();
	});

	it("retries a transient failure on a later lease while the conversion stays processing", async () => {
		const { alice, worker, created } = await deliveredConversion();
		const first = await worker.leaseOne();
		const started = (await alice.get(created.id)).processing_started_at;
		expect(await json(await worker.fail(first.lease_id, "transient", "internal"))).toMatchObject({
			data: { decision: "requeued" },
		});
		expect((await alice.get(created.id)).status).toBe("processing");
		// The retry is delayed (backoff); step the broker's clock instead of sleeping.
		expect(await worker.lease()).toEqual([]);
		await shiftBrokerClock(6_000);
		const second = await worker.leaseOne();
		expect(second).toMatchObject({ conversion_id: created.id, attempt: 2 });
		const again = await alice.get(created.id);
		expect(again.status).toBe("processing");
		expect(again.processing_started_at).toBe(started);
		expect((await worker.finish(second)).status).toBe(200);
		expect((await alice.get(created.id)).status).toBe("completed");
		const row = await env.DB.prepare("SELECT attempts FROM voice_conversions WHERE id = ?").bind(created.id).first();
		expect(row).toEqual({ attempts: 2 });
	});

	it("gives a released job back without charging an attempt", async () => {
		const { worker, created } = await deliveredConversion();
		const first = await worker.leaseOne();
		expect((await worker.release(first.lease_id)).status).toBe(200);
		// Released again (its runner lost the first answer): the same answer, and the job is not given back twice.
		expect((await worker.release(first.lease_id)).status).toBe(200);
		expect((await worker.complete(first.lease_id)).status).toBe(409);
		const second = await worker.leaseOne();
		expect(second).toMatchObject({ conversion_id: created.id, attempt: 1 });
		expect((await worker.release(second.lease_id)).status).toBe(200);
		const third = await worker.leaseOne();
		expect(third).toMatchObject({ conversion_id: created.id, attempt: 1 });
		// The first lease's release, repeated once more while the job is leased again, changes nothing.
		expect((await worker.release(first.lease_id)).status).toBe(200);
		expect((await worker.heartbeat(third.lease_id)).status).toBe(200);
		expect(second.lease_id).not.toBe(first.lease_id);
		expect((await worker.finish(third)).status).toBe(200);
		expect((await worker.release(third.lease_id)).status).toBe(409);
	});

	/**
	 * A runner's long-poll, waiting in the broker; `gone.abort()` is the runner dying (its connection closes).
	 * `deadPoll` settles with the request's error, caught at once so that it is never unhandled meanwhile.
	 */
	async function longPollOfRunnerAboutToDie() {
		const dead = await runner();
		const gone = new AbortController();
		const deadPoll = dead
			.api("/internal/v1/leases", {
				method: "POST",
				headers: { "Content-Type": "application/json" },
				body: JSON.stringify({ runner_id: dead.runnerId, capacity: 1, wait_seconds: 20 }),
				signal: gone.signal,
			})
			.catch((error: unknown) => error);
		await vi.waitFor(async () => expect((await broker().stats()).waiters).toBe(1));
		return { gone, deadPoll };
	}

	/** A live runner's long-poll gets the next job, on its first attempt. */
	async function nextJobGoesToALiveRunner() {
		const live = await runner();
		const livePoll = live.lease({ wait_seconds: 10 });
		await vi.waitFor(async () => expect((await broker().stats()).waiters).toBe(1));
		const { created } = await deliveredConversion();
		const leases = await livePoll;
		expect(leases).toEqual([expect.objectContaining({ conversion_id: created.id, attempt: 1 })]);
		for (const lease of leases) expect((await live.finish(lease)).status).toBe(200);
	}

	it("forgets the long-poll of a runner whose request went away, so the next job goes to a live runner", async () => {
		const { gone, deadPoll } = await longPollOfRunnerAboutToDie();
		// The runner is killed mid-poll: its connection closes, and the broker must drop its waiter at once.
		gone.abort();
		expect(await deadPoll).toMatchObject({ name: "AbortError" });
		await vi.waitFor(async () => expect((await broker().stats()).waiters).toBe(0), { timeout: 3_000 });

		await nextJobGoesToALiveRunner();
	});

	it("gives back uncharged a job granted to a long-poll whose runner went away as the job arrived", async () => {
		// Created before its file is ready, so that no job exists until the runner waits.
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "pending");
		const voiceId = await insertVoice();
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId });
		const { gone, deadPoll } = await longPollOfRunnerAboutToDie();
		await finishPreprocessing(alice.accountId, file.id, "ready");
		// The runner is killed as its job arrives: the broker grants the job before it hears of the abort.
		gone.abort();
		await broker().enqueue({
			conversionId: created.id,
			accountId: alice.accountId,
			voiceId,
			engine: "dsp",
			usePreview: false,
		});
		expect(await deadPoll).toMatchObject({ name: "AbortError" });
		await vi.waitFor(async () => expect(await broker().stats()).toMatchObject({ waiting: 1, leased: 0, waiters: 0 }), {
			timeout: 3_000,
		});
		const live = await runner();
		const lease = await live.leaseOne();
		expect(lease).toMatchObject({ conversion_id: created.id, attempt: 1 });
		expect((await live.finish(lease)).status).toBe(200);
	});

	it("gives back uncharged a lease whose acknowledging runner never heartbeated it (died unseen, no disconnect)", async () => {
		const { created } = await deliveredConversion();
		const dead = await runner();
		// The answer arrives, but its runner is gone before it can heartbeat; no disconnect reached the Worker.
		const [lost] = await dead.lease({ wait_seconds: 5, acknowledges: true });
		expect(lost).toMatchObject({ conversion_id: created.id, attempt: 1 });
		await shiftBrokerClock(ACK_WINDOW_MS + 1_000);
		expect(await runDurableObjectAlarm(broker())).toBe(true);
		expect(await json(await dead.heartbeat(lost?.lease_id ?? ""))).toMatchObject({ code: "lease_lost" });
		const live = await runner();
		const lease = await live.leaseOne({ acknowledges: true });
		expect(lease).toMatchObject({ conversion_id: created.id, attempt: 1 });
		// A live runner's acknowledgement keeps its lease past the window.
		expect((await live.heartbeat(lease.lease_id)).status).toBe(200);
		await shiftBrokerClock(2 * ACK_WINDOW_MS + 2_000);
		await broker().sweep();
		expect((await live.finish(lease)).status).toBe(200);
	});

	it("ends the long-poll of a runner that says it stopped, though its connection never seemed to close", async () => {
		const stopping = await runner();
		const waitId = crypto.randomUUID();
		const poll = stopping.api("/internal/v1/leases", {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ runner_id: stopping.runnerId, capacity: 1, wait_seconds: 20, wait_id: waitId }),
		});
		await vi.waitFor(async () => expect((await broker().stats()).waiters).toBe(1));
		// A proxy between them keeps the connection open, so only the runner's word ends the wait.
		const cancelled = await stopping.api(`/internal/v1/leases/waits/${waitId}/cancel`, { method: "POST" });
		expect(cancelled.status).toBe(200);
		expect(await json(cancelled)).toEqual({ success: true, data: { waiting: true, released: 0 } });
		expect(await json(await poll)).toEqual({
			success: true,
			data: { leases: [], validations: [], forget_voice_ids: [] },
		});
		expect((await broker().stats()).waiters).toBe(0);

		await nextJobGoesToALiveRunner();
		// Cancelling again, or a wait never made, changes nothing.
		const again = await stopping.api(`/internal/v1/leases/waits/${waitId}/cancel`, { method: "POST" });
		expect(await json(again)).toEqual({ success: true, data: { waiting: false, released: 0 } });
	});

	it("refuses to complete before the output was uploaded", async () => {
		const { alice, worker, created } = await deliveredConversion();
		const lease = await worker.leaseOne();
		const early = await worker.complete(lease.lease_id);
		expect(early.status).toBe(409);
		expect(await json(early)).toMatchObject({ success: false, code: "output_missing" });
		expect((await alice.get(created.id)).status).toBe("processing");
		// The output address only takes audio/wav.
		const wrongType = await call(lease.output.url, {
			method: "PUT",
			headers: { "Content-Type": "audio/mpeg", "Content-Length": "4" },
			body: new Uint8Array(4),
		});
		expect(wrongType.status).toBe(415);
		expect((await worker.finish(lease)).status).toBe(200);
	});
});

describe("outputs of leases that did not complete", () => {
	const LEASE_MS = LEASE_SECONDS * 1000;
	/** The conversion's objects under `outputs/`, by key. */
	const storedOutputs = async (accountId: string, conversionId: string) =>
		(await env.BUCKET.list({ prefix: `outputs/${accountId}/${conversionId}/` })).objects.map((o) => o.key).sort();
	const outputKey = (lease: { output: { url: string } }) =>
		decodeURIComponent(new URL(lease.output.url).pathname.replace("/storage/v1/", ""));
	/** Steps the broker's clock past the removal grace of leases that ended by `offsetMs`, and fires its alarm. */
	const afterGrace = async (offsetMs = 0) => {
		await shiftBrokerClock(offsetMs + UNUSED_OUTPUT_GRACE_MS + 1_000);
		expect(await runDurableObjectAlarm(broker())).toBe(true);
	};

	it("removes what a lease uploaded before it expired, and refuses uploads through its address after", async () => {
		const { alice, worker, created } = await deliveredConversion();
		const lost = await worker.leaseOne();
		// The runner uploads its output, then goes silent before completing: the lease expires.
		expect((await worker.uploadOutput(lost, makeWav(1))).status).toBe(200);
		expect(await storedOutputs(alice.accountId, created.id)).toEqual([outputKey(lost)]);
		await shiftBrokerClock(LEASE_MS + 1_000);
		expect(await runDurableObjectAlarm(broker())).toBe(true);
		// A complete that passed its lease check as the lease ended may still be recording it: kept for a while.
		expect(await storedOutputs(alice.accountId, created.id)).toEqual([outputKey(lost)]);
		await afterGrace(LEASE_MS + 1_000);
		expect(await storedOutputs(alice.accountId, created.id)).toEqual([]);
		// Its address is still signed for hours, but the lease can never complete: nothing it sends is kept.
		const late = await worker.uploadOutput(lost, makeWav(1));
		expect(late.status).toBe(409);
		expect(await json(late)).toMatchObject({ code: "lease_lost" });
		expect(await storedOutputs(alice.accountId, created.id)).toEqual([]);

		const second = await worker.leaseOne();
		expect(second.attempt).toBe(2);
		expect((await worker.finish(second)).status).toBe(200);
		const done = await alice.get(created.id);
		expect(done.status).toBe("completed");
		expect(await storedOutputs(alice.accountId, created.id)).toEqual([outputKey(second)]);
		expect((await call(done.output_url as string)).status).toBe(200);
		// Once completed, the completing lease's address takes nothing more either.
		expect((await worker.uploadOutput(second, makeWav(2))).status).toBe(409);
		expect((await call(done.output_url as string)).status).toBe(200);
	});

	it("removes the output of a lease whose runner reported a failure or gave the job back", async () => {
		const { alice, worker, created } = await deliveredConversion();
		const failed = await worker.leaseOne();
		expect((await worker.uploadOutput(failed, makeWav(1))).status).toBe(200);
		expect(await json(await worker.fail(failed.lease_id, "permanent", "internal"))).toMatchObject({
			data: { decision: "failed" },
		});
		expect((await alice.get(created.id)).status).toBe("failed");

		const other = await deliveredConversion();
		const released = await other.worker.leaseOne();
		expect((await other.worker.uploadOutput(released, makeWav(1))).status).toBe(200);
		expect((await other.worker.release(released.lease_id)).status).toBe(200);
		await afterGrace();
		expect(await storedOutputs(alice.accountId, created.id)).toEqual([]);
		expect(await storedOutputs(other.alice.accountId, other.created.id)).toEqual([]);
	});

	it("keeps an output whose completion D1 recorded, though its lease ended before the broker heard of it", async () => {
		const { alice, worker, created } = await deliveredConversion();
		const lease = await worker.leaseOne();
		expect((await worker.uploadOutput(lease, makeWav(1))).status).toBe(200);
		// The complete call wrote D1, then the broker's part of it was lost; the lease expires after.
		expect(
			(
				await completeConversion(env, created.id, {
					key: outputKey(lease),
					sizeBytes: 1,
					durationSeconds: 1,
					pitchShiftApplied: "same_octave",
				})
			).outcome,
		).toBe("applied");
		await shiftBrokerClock(LEASE_MS + 1_000);
		expect(await runDurableObjectAlarm(broker())).toBe(true);
		await afterGrace(LEASE_MS + 1_000);
		expect(await storedOutputs(alice.accountId, created.id)).toEqual([outputKey(lease)]);
		expect((await call((await alice.get(created.id)).output_url as string)).status).toBe(200);
	});
});

describe("the conversion-jobs queue", () => {
	it("delivers a job to the broker through the real queue and its consumer", async () => {
		const alice = await user();
		const worker = await runner();
		const file = await insertAudioFile(alice.accountId, "ready");
		const voiceId = await insertVoice();
		// A queued conversion whose direct hand-over never happened: only the queue message can bring it.
		const id = crypto.randomUUID();
		const now = new Date().toISOString();
		await env.DB.prepare(
			`INSERT INTO voice_conversions (id, account_id, audio_file_id, voice_model_id, pitch_shift, use_preview, status,
			 attempts, dispatched_at, created_at, queued_at, updated_at)
			 VALUES (?, ?, ?, ?, 'third_down', 1, 'queued', 0, ?, ?, ?, ?)`,
		)
			.bind(id, alice.accountId, file.id, voiceId, now, now, now, now)
			.run();
		const polling = worker.lease({ wait_seconds: 10 });
		await env.CONVERSION_JOBS_QUEUE.send({ conversion_id: id }, { contentType: "json" });
		const [lease] = await polling;
		expect(lease).toMatchObject({ conversion_id: id, semitones: -4, use_preview: true });
		expect((await worker.finish(lease!)).status).toBe(200);
	});
});

describe("conversion-jobs failure paths", () => {
	afterEach(() => vi.restoreAllMocks());

	it("still dispatches when the queue send fails, through the direct hand-over", async () => {
		const alice = await user();
		const worker = await runner();
		const file = await insertAudioFile(alice.accountId, "ready");
		vi.spyOn(env.CONVERSION_JOBS_QUEUE, "sendBatch").mockRejectedValue(new Error("queue unavailable"));
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: await insertVoice() });
		const lease = await worker.leaseOne();
		expect(lease.conversion_id).toBe(created.id);
		expect((await worker.finish(lease)).status).toBe(200);
	});

	it("fails a dead-lettered job's conversion unless the broker holds the job", async () => {
		const alice = await user();
		const voiceId = await insertVoice();
		const lostFile = await insertAudioFile(alice.accountId, "pending");
		const heldFile = await insertAudioFile(alice.accountId, "pending");
		const lost = await alice.convert({ audio_file_id: lostFile.id, voice_model_id: voiceId });
		const held = await alice.convert({ audio_file_id: heldFile.id, voice_model_id: voiceId });
		await finishPreprocessing(alice.accountId, heldFile.id, "ready");
		await env.DB.prepare("UPDATE voice_conversions SET status = 'queued', queued_at = created_at WHERE id = ?")
			.bind(lost.id)
			.run();
		const batch = createMessageBatch("conversion-jobs-dlq", [
			{ id: "dead-1", timestamp: new Date(), attempts: 1, body: { conversion_id: lost.id } },
			{ id: "dead-2", timestamp: new Date(), attempts: 1, body: { conversion_id: held.id } },
		]);
		const ctx = createExecutionContext();
		await workerEntry.queue(batch, env, ctx);
		expect((await getQueueResult(batch, ctx)).explicitAcks).toHaveLength(2);
		expect(await alice.get(lost.id)).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES.internal });
		expect((await alice.get(held.id)).status).toBe("queued");
		const lease = await (await runner()).leaseOne();
		expect(lease.conversion_id).toBe(held.id);
		await (await runner()).finish(lease);
	});
});

describe("duplicates and reordering", () => {
	it("answers a repeated complete the same way and records one completion and one event", async () => {
		const { alice, worker, created } = await deliveredConversion();
		const lease = await worker.leaseOne();
		expect((await worker.finish(lease)).status).toBe(200);
		const first = await alice.get(created.id);
		const again = await worker.complete(lease.lease_id);
		expect(again.status).toBe(200);
		expect((await alice.get(created.id)).completed_at).toBe(first.completed_at);
		expect(await eventsFor(created.id)).toHaveLength(1);
		// A failure report after completion cannot move it.
		expect((await worker.fail(lease.lease_id, "permanent", "internal")).status).toBe(409);
		expect((await alice.get(created.id)).status).toBe("completed");
	});

	it("answers two identical completes sent at once (a retry after a lost answer) alike, and refuses a different one", async () => {
		for (let round = 0; round < 4; round++) {
			const { alice, worker, created } = await deliveredConversion();
			const lease = await worker.leaseOne();
			expect((await worker.uploadOutput(lease, makeWav(1))).status).toBe(200);
			const answers = await Promise.all([worker.complete(lease.lease_id), worker.complete(lease.lease_id)]);
			for (const answer of answers) {
				expect(answer.status).toBe(200);
				expect((await json<{ data: unknown }>(answer)).data).toEqual({
					conversion_id: created.id,
					status: "completed",
				});
			}
			expect((await alice.get(created.id)).status).toBe("completed");
			expect(await eventsFor(created.id)).toHaveLength(1);
			// Repeated once more, it is still the same report; one that says something else is not taken.
			expect((await worker.complete(lease.lease_id)).status).toBe(200);
			const other = await worker.complete(lease.lease_id, 2);
			expect(other.status).toBe(409);
			expect(await json(other)).toMatchObject({ code: "lease_lost" });
			expect((await alice.get(created.id)).status).toBe("completed");
		}
	});

	it("answers a repeated failure report (a retry after a lost answer) with the decision it took, and refuses a different one", async () => {
		const decisionOf = async (response: Response) => {
			expect(response.status).toBe(200);
			return (await json<{ data: { decision: string } }>(response)).data.decision;
		};
		// Transient: the job went back to the queue once, and the repeat charges no second attempt.
		const { alice, worker, created } = await deliveredConversion();
		const lease = await worker.leaseOne();
		expect(await decisionOf(await worker.fail(lease.lease_id, "transient", "internal"))).toBe("requeued");
		expect(await decisionOf(await worker.fail(lease.lease_id, "transient", "internal"))).toBe("requeued");
		const other = await worker.fail(lease.lease_id, "permanent", "internal");
		expect(other.status).toBe(409);
		expect(await json(other)).toMatchObject({ code: "lease_lost" });
		expect((await alice.get(created.id)).status).not.toBe("failed");
		await shiftBrokerClock(60_000);
		const retried = await worker.leaseOne();
		expect(retried).toMatchObject({ conversion_id: created.id, attempt: 2 });

		// Permanent, sent twice at once: both answered alike, one failure and one event.
		const answers = await Promise.all([
			worker.fail(retried.lease_id, "permanent", "corrupted_source"),
			worker.fail(retried.lease_id, "permanent", "corrupted_source"),
		]);
		for (const answer of answers) expect(await decisionOf(answer)).toBe("failed");
		expect(await decisionOf(await worker.fail(retried.lease_id, "permanent", "corrupted_source"))).toBe("failed");
		expect(await alice.get(created.id)).toMatchObject({
			status: "failed",
			error_message: FAILURE_MESSAGES.corrupted_source,
		});
		expect(await eventsFor(created.id)).toHaveLength(1);
	});

	it("ignores duplicate, late and reordered job messages and promotions", async () => {
		const alice = await user();
		const worker = await runner();
		const file = await insertAudioFile(alice.accountId, "ready");
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: await insertVoice() });

		// The same message twice (at-least-once): one job.
		const result = await deliverJobs([created.id, created.id]);
		expect(result.explicitAcks).toHaveLength(2);
		expect(result.retryMessages).toEqual([]);
		expect(await broker().knownJobs([created.id])).toEqual([created.id]);
		const lease = await worker.leaseOne();
		expect(await worker.lease({ capacity: 5 })).toEqual([]);
		expect((await worker.finish(lease)).status).toBe(200);

		// Late: the message again, and preprocessing "finishing" again, after completion.
		const late = await deliverJobs([created.id]);
		expect(late.explicitAcks).toHaveLength(1);
		await finishPreprocessing(alice.accountId, file.id, "ready");
		await finishPreprocessing(alice.accountId, file.id, "failed");
		expect(await worker.lease({ capacity: 5 })).toEqual([]);
		const done = await alice.get(created.id);
		expect(done.status).toBe("completed");
		expect(await eventsFor(created.id)).toHaveLength(1);
	});

	it("acknowledges malformed or unknown job messages without effect", async () => {
		const result = await deliverJobs([crypto.randomUUID()]);
		expect(result.explicitAcks).toHaveLength(1);
		expect(await broker().stats()).toMatchObject({ waiting: 0 });
	});

	it("drops a job whose conversion ended before a runner leased it", async () => {
		const { alice, worker, created } = await deliveredConversion();
		await failConversion(env, created.id, { code: "timed_out", message: FAILURE_MESSAGES.timed_out });
		expect(await worker.lease({ capacity: 3 })).toEqual([]);
		expect(await broker().knownJobs([created.id])).toEqual([]);
		expect((await alice.get(created.id)).status).toBe("failed");
	});
});

describe("runner API access", () => {
	it("requires a runner-scope token", async () => {
		const alice = await user();
		const response = await alice.api("/internal/v1/leases", {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ runner_id: "r", capacity: 1, wait_seconds: 0 }),
		});
		expect(response.status).toBe(401);
		expect((await call("/internal/v1/leases", { method: "POST" })).status).toBe(401);
	});

	it("validates lease requests and answers lease_lost for unknown leases", async () => {
		const worker = await runner();
		const bad = await worker.post("/internal/v1/leases", { runner_id: "r", capacity: 0 });
		expect(bad.status).toBe(400);
		const unknown = await worker.heartbeat(crypto.randomUUID());
		expect(unknown.status).toBe(409);
		expect(await json(unknown)).toMatchObject({ success: false, code: "lease_lost" });
	});
});
