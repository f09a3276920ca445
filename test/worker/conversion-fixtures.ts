/**
 * Fixtures for conversion tests: voices and audio files written straight into D1 and R2 (their own endpoints
 * belong to other modules), a user and a runner that talk to the Worker over HTTP, and broker access.
 */
import { createExecutionContext, createMessageBatch, getQueueResult, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { JobBroker } from "../../durable-objects/job-broker.ts";
import { notifyPreprocessingListeners } from "../../src/audio-files/preprocessing-listeners.ts";
import type { BaseModelName, Lease } from "../../src/contracts/runner.ts";
import type { VoiceConversion } from "../../src/contracts/voice-conversions.ts";
import { jobBroker } from "../../src/conversions/job-broker-client.ts";
import worker from "../../src/index.ts";
import { sha256Hex, utf8 } from "../../src/lib/encoding.ts";
import { makeWav as generateWav } from "../support/wav-generator.ts";
import { call, signedInClient } from "./helpers.ts";

export type Api = (path: string, init?: RequestInit) => Promise<Response>;

export interface VoiceFixture {
	name?: string;
	engine?: "dsp" | "rvc";
	params?: Record<string, unknown>;
	/** Names of the voice's own model files (stored in R2 with their checksums); default one 3-byte `params` file. */
	artifacts?: string[];
	pitchRangeHz?: { low: number; high: number };
}

export async function insertVoice(options: VoiceFixture = {}): Promise<string> {
	const id = crypto.randomUUID();
	const now = new Date().toISOString();
	const artifacts = [];
	if (!options.artifacts) {
		await env.BUCKET.put(`voices/${id}/params.bin`, new Uint8Array([1, 2, 3]));
		artifacts.push({ name: "params", key: `voices/${id}/params.bin`, sha256: "a".repeat(64), size_bytes: 3 });
	}
	for (const name of options.artifacts ?? []) {
		const bytes = utf8(`${name} of ${id}`);
		const key = `models/${id}/${name}`;
		await env.BUCKET.put(key, bytes);
		artifacts.push({ name, key, sha256: await sha256Hex(bytes), size_bytes: bytes.byteLength });
	}
	await env.DB.prepare(
		`INSERT INTO voices (id, name, tags, engine, engine_params, artifacts, pitch_range_low_hz, pitch_range_high_hz,
		 is_active, created_at, updated_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)`,
	)
		.bind(
			id,
			options.name ?? `Voice ${id.slice(0, 8)}`,
			JSON.stringify(["test"]),
			options.engine ?? "dsp",
			JSON.stringify(options.params ?? { formant_shift: 1.1 }),
			JSON.stringify(artifacts),
			options.pitchRangeHz?.low ?? null,
			options.pitchRangeHz?.high ?? null,
			now,
			now,
		)
		.run();
	return id;
}

/** Sets a deployment base model (`contentvec`, `rmvpe`, ...) the way `admin base-model set` does: bytes in R2, row in D1. */
export async function setBaseModel(name: BaseModelName, bytes: Uint8Array<ArrayBuffer>): Promise<{ sha256: string }> {
	const sha256 = await sha256Hex(bytes);
	const key = `base-models/${name}/${sha256}`;
	await env.BUCKET.put(key, bytes);
	await env.DB.prepare(
		`INSERT INTO base_models (name, object_key, sha256, size_bytes, updated_at) VALUES (?, ?, ?, ?, ?)
		 ON CONFLICT (name) DO UPDATE SET object_key = excluded.object_key, sha256 = excluded.sha256,
		 size_bytes = excluded.size_bytes, updated_at = excluded.updated_at`,
	)
		.bind(name, key, sha256, bytes.byteLength, new Date().toISOString())
		.run();
	return { sha256 };
}

export async function clearBaseModels(): Promise<void> {
	await env.DB.prepare("DELETE FROM base_models").run();
}

/** A small 16-bit mono PCM WAV of a sine tone. */
export function makeWav(seconds: number, sampleRate = 16_000): Uint8Array {
	return generateWav({ sampleRate, channels: 1, frames: Math.round(seconds * sampleRate), encoding: "pcm", bits: 16 });
}

export type FileState = "ready" | "pending" | "failed" | "awaiting_upload";

/** An audio file of `accountId`, its bytes in R2, in the given preprocessing state. */
export async function insertAudioFile(
	accountId: string,
	state: FileState = "ready",
	options: { seconds?: number; createdAt?: string } = {},
): Promise<{ id: string; objectKey: string; bytes: Uint8Array }> {
	const id = crypto.randomUUID();
	const objectKey = `audio/${accountId}/${id}`;
	const bytes = makeWav(options.seconds ?? 1);
	const now = options.createdAt ?? new Date().toISOString();
	const uploaded = state !== "awaiting_upload";
	if (uploaded) await env.BUCKET.put(objectKey, bytes, { httpMetadata: { contentType: "audio/wav" } });
	const ready = state === "ready";
	await env.DB.prepare(
		`INSERT INTO audio_files (id, account_id, file_name, mime_type, object_key, upload_status, upload_url_expires_at,
		 uploaded_at, size_bytes, preprocessing_status, preprocessing_error_code, preprocessing_error, format, sample_rate,
		 channels, duration_seconds, created_at, updated_at)
		 VALUES (?, ?, ?, 'audio/wav', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	)
		.bind(
			id,
			accountId,
			`take-${id.slice(0, 4)}.wav`,
			objectKey,
			uploaded ? "uploaded" : "awaiting_upload",
			new Date(Date.parse(now) + 30 * 60_000).toISOString(),
			uploaded ? now : null,
			uploaded ? bytes.byteLength : null,
			state === "awaiting_upload" ? "pending" : state,
			state === "failed" ? "corrupted" : null,
			state === "failed" ? "The WAV header is truncated" : null,
			ready ? "wav" : null,
			ready ? 16_000 : null,
			ready ? 1 : null,
			ready ? (options.seconds ?? 1) : null,
			now,
			now,
		)
		.run();
	return { id, objectKey, bytes };
}

/** What issue 3's preprocessing does when a file turns out fine: record it, then tell the listeners. */
export async function finishPreprocessing(accountId: string, audioFileId: string, outcome: "ready" | "failed") {
	if (outcome === "ready") {
		await env.DB.prepare(
			`UPDATE audio_files SET preprocessing_status = 'ready', format = 'wav', sample_rate = 16000, channels = 1,
			 duration_seconds = 1, upload_status = 'uploaded' WHERE id = ?`,
		)
			.bind(audioFileId)
			.run();
		await notifyPreprocessingListeners(env, { audioFileId, accountId, outcome });
	} else {
		await env.DB.prepare(
			`UPDATE audio_files SET preprocessing_status = 'failed', preprocessing_error_code = 'unsupported_format',
			 preprocessing_error = 'The bytes are an OGG file' WHERE id = ?`,
		)
			.bind(audioFileId)
			.run();
		await notifyPreprocessingListeners(env, {
			audioFileId,
			accountId,
			outcome,
			errorCode: "unsupported_format",
			errorMessage: "The bytes are an OGG file",
		});
	}
}

export async function json<T = Record<string, unknown>>(response: Response): Promise<T> {
	return (await response.json()) as T;
}

/** A client with a base-scope token, and shortcuts for the conversion endpoints. */
export async function user() {
	const session = await signedInClient("api");
	const create = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
		session.api("/api/v1/voice-conversions", {
			method: "POST",
			headers: { "Content-Type": "application/json", ...headers },
			body: JSON.stringify(body),
		});
	const get = async (id: string) => {
		const response = await session.api(`/api/v1/voice-conversions/${id}`);
		if (response.status !== 200) throw new Error(`GET conversion: ${response.status} ${await response.text()}`);
		return (await json<{ data: VoiceConversion }>(response)).data;
	};
	/** Creates a conversion that must succeed; returns the created object. */
	const convert = async (body: Record<string, unknown>) => {
		const response = await create(body);
		if (response.status !== 201) throw new Error(`create: ${response.status} ${await response.text()}`);
		return (await json<{ data: VoiceConversion }>(response)).data;
	};
	return { ...session, accountId: session.client.accountId, create, get, convert };
}

/** A runner written against the runner API contract, as a GPU runner would use it. */
export async function runner(runnerId = `runner-${crypto.randomUUID().slice(0, 6)}`) {
	const session = await signedInClient("runner");
	const post = (path: string, body: unknown) =>
		session.api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
	const lease = async (body: Record<string, unknown> = {}): Promise<Lease[]> => {
		const response = await post("/internal/v1/leases", { runner_id: runnerId, capacity: 1, wait_seconds: 0, ...body });
		if (response.status !== 200) throw new Error(`lease: ${response.status} ${await response.text()}`);
		return (await json<{ data: { leases: Lease[] } }>(response)).data.leases;
	};
	const leaseOne = async (body: Record<string, unknown> = {}): Promise<Lease> => {
		const [first] = await lease({ wait_seconds: 5, ...body });
		if (!first) throw new Error("no lease granted");
		return first;
	};
	const heartbeat = (leaseId: string) => post(`/internal/v1/leases/${leaseId}/heartbeat`, { progress: 0.5 });
	const uploadOutput = (lease: Lease, bytes: Uint8Array) =>
		call(lease.output.url, {
			method: "PUT",
			headers: { "Content-Type": "audio/wav", "Content-Length": String(bytes.byteLength) },
			body: bytes,
		});
	const complete = (leaseId: string, seconds = 1) =>
		post(`/internal/v1/leases/${leaseId}/complete`, {
			output: { size_bytes: 1, duration_seconds: seconds, sample_rate: 16_000, channels: 1 },
			metrics: { processing_seconds: 0.1 },
		});
	const fail = (leaseId: string, kind: "transient" | "permanent", reason: string) =>
		post(`/internal/v1/leases/${leaseId}/fail`, { kind, reason, message: `test runner: ${reason}` });
	const release = (leaseId: string) => post(`/internal/v1/leases/${leaseId}/release`, { reason: "shutdown" });
	/** Does the job the way a runner with a no-op engine would: upload a WAV, then complete. */
	const finish = async (lease: Lease, bytes = makeWav(lease.use_preview ? 0.5 : 1)) => {
		const put = await uploadOutput(lease, bytes);
		if (put.status !== 200) throw new Error(`output PUT: ${put.status} ${await put.text()}`);
		return complete(lease.lease_id);
	};
	return { ...session, runnerId, post, lease, leaseOne, heartbeat, uploadOutput, complete, fail, release, finish };
}

export const broker = () => jobBroker(env);

/** A user, a runner, and a conversion of a ready file that the `conversion-jobs` consumer has given the broker. */
export async function deliveredConversion() {
	const alice = await user();
	const worker = await runner();
	const file = await insertAudioFile(alice.accountId, "ready");
	const created = await alice.convert({ audio_file_id: file.id, voice_model_id: await insertVoice() });
	await deliverJobs([created.id]);
	return { alice, worker, file, created };
}

/** Runs the `conversion-jobs` consumer on a batch, as the queue would; returns what it acked and retried. */
export async function deliverJobs(conversionIds: string[]) {
	const batch = createMessageBatch(
		"conversion-jobs",
		conversionIds.map((id, i) => ({
			id: `msg-${i}-${crypto.randomUUID()}`,
			timestamp: new Date(),
			attempts: 1,
			body: { conversion_id: id },
		})),
	);
	const ctx = createExecutionContext();
	await worker.queue(batch, env, ctx);
	return getQueueResult(batch, ctx);
}

/** Points the broker's clock `offsetMs` ahead of real time (0 restores it). */
export async function shiftBrokerClock(offsetMs: number): Promise<void> {
	await runInDurableObject(broker(), (instance: JobBroker) => {
		instance.clock = () => Date.now() + offsetMs;
	});
}

/**
 * Empties the broker between tests (its storage is shared by the tests of one file). Conversions that earlier tests
 * left queued or processing are failed first, straight in D1: they would come back into the emptied broker, since
 * the API's own dispatch message (tests hand jobs over with `deliverJobs`) reaches the real queue consumer up to a
 * second later, and the safety net re-sends what the broker does not hold. Both leave a failed conversion alone.
 * A plain UPDATE rather than `failConversion`, which would add events and webhook deliveries to a later test's.
 * The jobs are kept as finished ones, as the broker keeps them for a day: a consumer that read its conversion as
 * queued just before this reset, and hands the job over just after, then finds it known ("exists") instead of
 * adding a job that a later test's runner would be granted.
 */
export async function resetBroker(): Promise<void> {
	const at = new Date().toISOString();
	await env.DB.prepare(
		`UPDATE voice_conversions SET status = 'failed', error_code = 'internal', error_message = 'ended by the test reset',
		 failed_at = ?1, updated_at = ?1 WHERE status IN ('queued', 'processing')`,
	)
		.bind(at)
		.run();
	await runInDurableObject(broker(), (instance: JobBroker, state) => {
		instance.clock = () => Date.now();
		state.storage.sql.exec("UPDATE jobs SET state = 'done', lease_id = NULL, updated_at = ?", Date.now());
		state.storage.sql.exec("DELETE FROM leases");
		state.storage.sql.exec("DELETE FROM output_uploads");
		state.storage.sql.exec("DELETE FROM unused_outputs");
	});
}

export async function eventsFor(conversionId: string) {
	const { results } = await env.DB.prepare("SELECT * FROM events WHERE subject_id = ? ORDER BY created_at")
		.bind(conversionId)
		.all<{ id: string; type: string; payload: string; account_id: string; sent_at: string | null }>();
	return results.map((row) => ({
		...row,
		payload: JSON.parse(row.payload) as { conversion: Record<string, unknown> },
	}));
}
