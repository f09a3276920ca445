/**
 * The whole service end to end over real HTTP: the Worker (wrangler's test harness: D1, R2, Queues, Durable
 * Objects), the GPU runner as its own process with the CPU (`dsp`) engine, and a real webhook receiver. A client
 * registers and uploads audio, creates conversions, polls, downloads the WAV and verifies signed webhooks, exactly
 * as the spec's workflow describes; nothing in between is faked.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifyWebhook } from "../../sdk/verify-webhook.ts";
import { type ApiCall, type Credentials, callApi, type LocalStack, startLocalStack } from "../support/local-stack.ts";
import { type RunnerProcess, startRunner } from "../support/runner-process.ts";
import { makeWav } from "../support/wav-generator.ts";
import { readWav } from "../support/wav-reader.ts";
import { startReceiver } from "../support/webhook-receiver.ts";

const PART_BYTES = 5 * 1024 ** 2;
let stack: LocalStack;
let runner: RunnerProcess;
let token: string;
let voiceId: string;
const receiver = startReceiver();
let receiverUrl: string;
let secret: string;

const api = <T = Record<string, unknown>>(route: string, init?: ApiCall) => callApi<T>(stack, token, route, init);

async function uploadAudio(bytes: Uint8Array, mimeType = "audio/wav") {
	const file = await api<{ id: string; upload_url: string }>("/api/v1/audio-files", {
		method: "POST",
		body: { file_name: "take-1.wav", mime_type: mimeType },
	});
	return {
		file,
		upload: () =>
			fetch(file.upload_url, { method: "PUT", headers: { "Content-Type": mimeType }, body: Buffer.from(bytes) }),
	};
}

async function waitForTerminal(id: string, timeoutMs = 60_000) {
	const deadline = Date.now() + timeoutMs;
	for (let delay = 100; Date.now() < deadline; delay = Math.min(delay * 1.5, 1000)) {
		const conversion = await api<Record<string, unknown>>(`/api/v1/voice-conversions/${id}`);
		if (conversion.status === "completed" || conversion.status === "failed") return conversion;
		await new Promise((r) => setTimeout(r, delay));
	}
	throw new Error(`conversion ${id} did not finish; runner log:\n${runner.log().slice(-3000)}`);
}

/** A 3-second harmonic tone at 220 Hz, 16-bit mono 44.1 kHz, built by the shared WAV generator. */
function sourceWav(): Uint8Array {
	const sampleRate = 44_100;
	return makeWav({ sampleRate, channels: 1, frames: sampleRate * 3, encoding: "pcm", bits: 16 });
}

beforeAll(async () => {
	// Outputs over 5 MiB (R2's smallest part) go up in parts, so a one-minute full conversion takes that path.
	stack = await startLocalStack({ vars: { ALLOW_LOCAL_WEBHOOK_URLS: "true", OUTPUT_PART_BYTES: String(PART_BYTES) } });
	const client: Credentials = await stack.provision("api");
	const runnerClient = await stack.provision("runner", client.accountId);
	token = await stack.token(client);
	voiceId = await stack.addVoice({ name: "E2E Alto", tags: ["e2e"], params: { formant_shift: 2 } });
	receiverUrl = `http://127.0.0.1:${await receiver.listen()}`;

	runner = startRunner(stack.url, runnerClient);

	const subscription = await api<{ secret: string }>("/api/v1/webhooks/subscriptions", {
		method: "POST",
		body: { url: `${receiverUrl}/hooks`, events: ["conversion_completed", "conversion_failed"] },
	});
	secret = subscription.secret;
}, 120_000);

afterAll(async () => {
	await runner?.stop();
	await receiver.close();
	await stack?.close();
});

describe("end to end", () => {
	it("converts an uploaded recording with a pitch shift, notifies by webhook, and serves the WAV", async () => {
		const { file, upload } = await uploadAudio(sourceWav());
		// Created before the upload: it waits in pending_preprocessing and starts by itself.
		const created = await api<Record<string, unknown>>("/api/v1/voice-conversions", {
			method: "POST",
			body: { audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "third_up", use_preview: true },
		});
		expect(created).toMatchObject({ status: "pending_preprocessing", output_url: null, queued_at: null });
		expect((await upload()).status).toBe(200);

		const done = await waitForTerminal(String(created.id));
		expect(done).toMatchObject({
			status: "completed",
			pitch_shift: "third_up",
			use_preview: true,
			error_message: null,
		});
		for (const field of ["queued_at", "processing_started_at", "completed_at"])
			expect(done[field]).toEqual(expect.any(String));

		const wav = new Uint8Array(await (await fetch(String(done.output_url))).arrayBuffer());
		expect(Math.abs(readWav(wav).durationSeconds - 3)).toBeLessThan(0.01);

		await receiver.waitFor("/hooks", 1, 30_000);
		const delivery = receiver.received.find((r) => JSON.parse(r.body).data?.conversion?.id === created.id);
		expect(delivery).toBeDefined();
		if (!delivery) return;
		expect(await verifyWebhook({ secret, headers: delivery.headers, body: delivery.body })).toMatchObject({ ok: true });
		expect(delivery.headers["x-webhook-event"]).toBe("conversion_completed");
		const payload = JSON.parse(delivery.body);
		expect(payload.event).toBe("conversion.completed");
		expect(payload.data.conversion).not.toHaveProperty("output_url");
		expect(payload.data.conversion).toMatchObject({
			id: done.id,
			status: "completed",
			audio_file_id: file.id,
			voice_model_id: voiceId,
			voice_model_name: "E2E Alto",
			completed_at: done.completed_at,
		});
	});

	it("uploads an output larger than the part size in parts and serves it whole", async () => {
		const sampleRate = 44_100;
		const seconds = 75; // 6.6 MB of 16-bit mono WAV: two parts of at most 5 MiB
		const { file, upload } = await uploadAudio(
			makeWav({ sampleRate, channels: 1, frames: sampleRate * seconds, encoding: "pcm", bits: 16 }),
		);
		expect((await upload()).status).toBe(200);
		const created = await api<{ id: string }>("/api/v1/voice-conversions", {
			method: "POST",
			body: { audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "fifth_up" },
		});
		const done = await waitForTerminal(created.id);
		expect(done.status).toBe("completed");
		const key = await stack.env.DB.prepare("SELECT output_key FROM voice_conversions WHERE id = ?")
			.bind(created.id)
			.first<string>("output_key");
		const stored = await stack.env.BUCKET.head(String(key));
		expect(stored?.size).toBeGreaterThan(PART_BYTES);
		// R2 gives an object assembled from parts an etag ending in "-<number of parts>".
		expect(stored?.etag).toMatch(/-2$/);
		const wav = new Uint8Array(await (await fetch(String(done.output_url))).arrayBuffer());
		expect(wav.length).toBe(stored?.size);
		expect(Math.abs(readWav(wav).durationSeconds - seconds)).toBeLessThan(0.01);
	});

	it("fails a conversion whose source is corrupt, with a readable reason and a conversion.failed webhook", async () => {
		const { file, upload } = await uploadAudio(new TextEncoder().encode("this is not audio at all, just text"));
		const created = await api<{ id: string }>("/api/v1/voice-conversions", {
			method: "POST",
			body: { audio_file_id: file.id, voice_model_id: voiceId },
		});
		expect((await upload()).status).toBe(200);
		const done = await waitForTerminal(created.id);
		expect(done.status).toBe("failed");
		expect(String(done.error_message)).toMatch(/format|corrupt/i);

		const count = receiver.received.length;
		await receiver.waitFor(
			"/hooks",
			count + (receiver.received.some((r) => r.body.includes(created.id)) ? 0 : 1),
			30_000,
		);
		const delivery = receiver.received.find((r) => JSON.parse(r.body).data?.conversion?.id === created.id);
		expect(delivery?.headers["x-webhook-event"]).toBe("conversion_failed");
		const payload = JSON.parse(String(delivery?.body));
		expect(payload.event).toBe("conversion.failed");
		expect(payload.data.conversion.error_message).toBe(done.error_message);
		expect(
			await verifyWebhook({ secret, headers: delivery?.headers ?? {}, body: String(delivery?.body) }),
		).toMatchObject({ ok: true });
	});
});
