/**
 * The TypeScript SDK against the real local service: the Worker (D1, R2, Queues, Durable Objects through wrangler's
 * test harness), the runner process with the CPU engine, and a real webhook receiver. Each test drives the service
 * only through the SDK, the way a client application would.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
	type CachedToken,
	type ConversionSnapshot,
	SDK_ERROR_CODES,
	type TokenStore,
	VoiceConversionClient,
	VoiceConversionError,
	verifyWebhook,
} from "../../sdk/index.ts";
import { type Credentials, type LocalStack, startLocalStack } from "../support/local-stack.ts";
import { type RunnerProcess, startRunner } from "../support/runner-process.ts";
import { makeWav } from "../support/wav-generator.ts";
import { estimatePitchHz, readWav } from "../support/wav-reader.ts";
import { startReceiver } from "../support/webhook-receiver.ts";

let stack: LocalStack;
let runner: RunnerProcess;
let credentials: Credentials;
let voiceId: string;
const receiver = startReceiver();
let receiverUrl: string;

/** Every request the SDK makes goes through here, so tests can count them or reshape answers. */
const requests: { method: string; url: string }[] = [];
const countingFetch: typeof fetch = (input, init) => {
	const url = input instanceof Request ? input.url : String(input);
	requests.push({ method: init?.method ?? "GET", url });
	return fetch(input, init);
};

const client = (options: Partial<ConstructorParameters<typeof VoiceConversionClient>[0]> = {}) =>
	new VoiceConversionClient({
		baseUrl: stack.url,
		clientId: credentials.clientId,
		clientSecret: credentials.clientSecret,
		fetch: countingFetch,
		...options,
	});

/** A tone of `seconds` at 220 Hz, 16-bit mono 44.1 kHz. */
const toneWav = (seconds: number) =>
	makeWav({ sampleRate: 44_100, channels: 1, frames: 44_100 * seconds, encoding: "pcm", bits: 16 });

const caught = async (promise: Promise<unknown>) => {
	try {
		await promise;
	} catch (error) {
		return error as VoiceConversionError;
	}
	throw new Error("expected a rejection");
};

beforeAll(async () => {
	stack = await startLocalStack({ vars: { ALLOW_LOCAL_WEBHOOK_URLS: "true" } });
	credentials = await stack.provision("api");
	runner = startRunner(stack.url, await stack.provision("runner", credentials.accountId));
	voiceId = await stack.addVoice({ name: "SDK Tenor", tags: ["sdk"], params: { formant_shift: 0 } });
	receiverUrl = `http://127.0.0.1:${await receiver.listen()}`;
}, 120_000);

afterAll(async () => {
	await runner?.stop();
	await receiver.close();
	await stack?.close();
});

describe("SDK tokens", () => {
	it("fetches one token for many calls and renews it shortly before it expires", async () => {
		let now = Date.now();
		const sdk = client({ now: () => now });
		const tokenRequests = () => requests.filter((r) => r.url.endsWith("/oauth2/token")).length;
		const before = tokenRequests();

		await Promise.all([sdk.voices.list(), sdk.voices.list(), sdk.webhooks.list()]);
		await sdk.voices.list();
		expect(tokenRequests() - before).toBe(1);

		now += 3540 * 1000 - 1000; // 59 minutes minus a second: still more than the 60 s margin left
		await sdk.voices.list();
		expect(tokenRequests() - before).toBe(1);

		now += 2000; // within the last minute of the token's hour: renewed before use
		await sdk.voices.list();
		expect(tokenRequests() - before).toBe(2);
		expect(sdk.tokens.requests).toBe(2);
	});

	it("replaces a token the service refuses, and retries a read that failed in transit", async () => {
		let refuseNext = true;
		let dropNext = 0;
		const sdk = client({
			fetch: async (input, init) => {
				const url = input instanceof Request ? input.url : String(input);
				if (url.includes("/api/v1/") && dropNext > 0) {
					dropNext--;
					throw new TypeError("fetch failed: connection reset");
				}
				if (url.includes("/api/v1/") && refuseNext) {
					refuseNext = false;
					// As if the signing key had been rotated: the service answers 401 to the cached token.
					return fetch(input, { ...init, headers: { ...init?.headers, Authorization: "Bearer expired.token.value" } });
				}
				return fetch(input, init);
			},
		});
		expect((await sdk.voices.list()).map((v) => v.id)).toContain(voiceId);
		expect(sdk.tokens.requests).toBe(2);

		dropNext = 2;
		expect((await sdk.voices.list()).map((v) => v.id)).toContain(voiceId);
		expect(dropNext).toBe(0);
		dropNext = 3; // more failures than the two retries
		expect(await caught(sdk.voices.list())).toMatchObject({
			status: null,
			code: SDK_ERROR_CODES.network,
			retryable: true,
		});
	});

	it("takes a kept token from its store, once for a burst of first calls, and keeps the one that replaces it", async () => {
		const tokenRequests = () => requests.filter((r) => r.url.endsWith("/oauth2/token")).length;
		const kept: (CachedToken | undefined)[] = [];
		let loads = 0;
		let stored: CachedToken | undefined;
		const store: TokenStore = {
			load: async () => {
				loads++;
				return stored;
			},
			save: (token) => {
				kept.push(token);
				stored = token;
			},
		};
		const first = client({ tokenStore: store });
		const before = tokenRequests();
		await first.voices.list();
		expect(tokenRequests() - before).toBe(1);
		expect(kept).toHaveLength(1);
		expect(stored?.value).toBeTruthy();

		// A new client (another process) with the same store: a burst of first calls reads it once and fetches none.
		const second = client({ tokenStore: store });
		await Promise.all([second.voices.list(), second.voices.list(), second.webhooks.list()]);
		expect(tokenRequests() - before).toBe(1);
		expect(loads).toBe(2);

		// A store that fails costs a token request, not the call.
		const broken = client({
			tokenStore: {
				load: () => {
					throw new Error("disk gone");
				},
				save: async () => {
					throw new Error("disk gone");
				},
			},
		});
		expect((await broken.voices.list()).map((v) => v.id)).toContain(voiceId);
		expect(tokenRequests() - before).toBe(2);
	});

	it("reports wrong credentials as a 401 that is not worth retrying", async () => {
		const error = await caught(client({ clientSecret: "wrong-secret" }).voices.list());
		expect(error).toBeInstanceOf(VoiceConversionError);
		expect(error).toMatchObject({ status: 401, code: "invalid_client", retryable: false });
		expect(error.message).toMatch(/client/i);
	});
});

describe("SDK conversion workflow", () => {
	it("uploads with progress, converts a preview a third up, waits through partial answers and downloads the WAV", async () => {
		const subscription = await client().webhooks.create({
			url: `${receiverUrl}/sdk-hooks`,
			events: ["conversion_completed"],
			description: "sdk test",
		});
		expect(subscription.secret).toMatch(/\S{16,}/);

		const sdk = client();
		const voices = await sdk.voices.list();
		const voice = voices.find((v) => v.id === voiceId);
		expect(voice).toMatchObject({ name: "SDK Tenor", tags: ["sdk"] });

		const source = toneWav(12);
		const progress: { loaded: number; total: number }[] = [];
		const file = await sdk.uploadAudio(source, { fileName: "tone.wav", onProgress: (p) => progress.push(p) });
		expect(file).toMatchObject({ file_name: "tone.wav", mime_type: "audio/wav", upload_status: "uploaded" });
		expect(progress.length).toBeGreaterThan(2);
		expect(progress.at(-1)).toEqual({ loaded: source.length, total: source.length });
		for (let i = 1; i < progress.length; i++)
			expect(progress[i]?.loaded).toBeGreaterThanOrEqual(progress[i - 1]?.loaded ?? 0);

		const created = await sdk.conversions.create({
			audio_file_id: file.id,
			voice_model_id: voiceId,
			pitch_shift: "third_up",
			use_preview: true,
		});
		expect(created).toMatchObject({ status: expect.stringMatching(/pending_preprocessing|queued/), output_url: null });

		// The spec lets a GET of an unfinished conversion carry only id, use_preview, status and output_url. Reduce
		// the real service's answers to exactly that, to prove waitForConversion copes.
		const minimal = new VoiceConversionClient({
			baseUrl: stack.url,
			clientId: credentials.clientId,
			clientSecret: credentials.clientSecret,
			fetch: async (input, init) => {
				const response = await fetch(input, init);
				const url = input instanceof Request ? input.url : String(input);
				if (!url.includes(`/voice-conversions/${created.id}`) || !response.ok) return response;
				const body = (await response.json()) as { data: ConversionSnapshot };
				const { id, use_preview, status, output_url } = body.data;
				const data =
					status === "completed" || status === "failed" ? body.data : { id, use_preview, status, output_url };
				return Response.json({ success: true, data });
			},
		});
		const updates: ConversionSnapshot[] = [];
		const done = await minimal.waitForConversion(created.id, {
			initialIntervalMs: 100,
			timeoutMs: 60_000,
			onUpdate: (c) => updates.push(structuredClone(c)),
		});
		expect(done).toMatchObject({
			id: created.id,
			status: "completed",
			pitch_shift: "third_up",
			use_preview: true,
			voice_model_name: "SDK Tenor",
			audio_file_name: "tone.wav",
			error_message: null,
		});
		expect(done.output_url).toMatch(/^http/);
		expect(updates.at(-1)?.status).toBe("completed");
		const unfinished = updates.filter((u) => u.status !== "completed");
		for (const update of unfinished)
			expect(Object.keys(update).sort()).toEqual(["id", "output_url", "status", "use_preview"]);

		const response = await sdk.downloadConversion(done);
		expect(response.headers.get("content-type")).toMatch(/audio\/wav/);
		const wav = readWav(new Uint8Array(await response.arrayBuffer()));
		expect(Math.abs(wav.durationSeconds - 10)).toBeLessThan(0.05); // preview: the first 10 of 12 seconds
		const pitch = estimatePitchHz(wav.samples, wav.sampleRate);
		expect(Math.abs(1200 * Math.log2(pitch / (220 * 2 ** (4 / 12))))).toBeLessThan(25); // +4 semitones, in cents

		// By id as well: the SDK fetches the conversion for a fresh address.
		expect((await sdk.downloadConversion(created.id)).status).toBe(200);

		// The signed webhook arrives and verifies with the SDK's verifier; the delivery log shows it; redelivery
		// sends the same payload id again.
		await receiver.waitFor("/sdk-hooks", 1, 30_000);
		const delivery = receiver.received.find((r) => r.path === "/sdk-hooks");
		expect(
			await verifyWebhook({
				secret: subscription.secret,
				headers: delivery?.headers ?? {},
				body: String(delivery?.body),
			}),
		).toMatchObject({ ok: true, event: "conversion_completed" });
		const payload = JSON.parse(String(delivery?.body));
		expect(payload.data.conversion).toMatchObject({ id: created.id, status: "completed" });

		let log = await sdk.webhooks.deliveries(subscription.id, { limit: 10 });
		for (let i = 0; i < 50 && log[0]?.status !== "delivered"; i++) {
			await new Promise((r) => setTimeout(r, 100));
			log = await sdk.webhooks.deliveries(subscription.id, { limit: 10 });
		}
		expect(log[0]).toMatchObject({ status: "delivered", response_code: 200, webhook_id: payload.id });
		const redelivery = await sdk.webhooks.redeliver(subscription.id, String(log[0]?.id));
		expect(redelivery.webhook_id).toBe(payload.id);
		await receiver.waitFor("/sdk-hooks", 2, 30_000);
		expect(JSON.parse(String(receiver.received.filter((r) => r.path === "/sdk-hooks")[1]?.body)).id).toBe(payload.id);
		await sdk.webhooks.delete(subscription.id);
	});

	it("lists and iterates conversions, and returns the same conversion for a repeated idempotency key", async () => {
		const sdk = client();
		const file = await sdk.uploadAudio(new Blob([toneWav(1) as Uint8Array<ArrayBuffer>], { type: "audio/wav" }), {
			fileName: "short.wav",
		});
		const key = crypto.randomUUID();
		const input = { audio_file_id: file.id, voice_model_id: voiceId, use_preview: true } as const;
		const first = await sdk.conversions.create(input, { idempotencyKey: key });
		const again = await sdk.conversions.create(input, { idempotencyKey: key });
		expect(again.id).toBe(first.id);
		const second = await sdk.conversions.create(input);
		expect(second.id).not.toBe(first.id);

		const page = await sdk.conversions.list({ limit: 1 });
		expect(page.data).toHaveLength(1);
		expect(page.nextCursor).toEqual(expect.any(String));
		const all: string[] = [];
		for await (const conversion of sdk.conversions.iterate({ limit: 1 })) all.push(conversion.id);
		expect(all).toEqual(expect.arrayContaining([first.id, second.id]));
		expect(new Set(all).size).toBe(all.length);

		for (const id of [first.id, second.id])
			await sdk.waitForConversion(id, { initialIntervalMs: 100, timeoutMs: 60_000 });
		const completed = await sdk.conversions.list({ status: "completed", limit: 100 });
		expect(completed.data.map((c) => c.id)).toEqual(expect.arrayContaining([first.id, second.id]));
		expect(completed.data.every((c) => c.status === "completed")).toBe(true);
	});

	it("sends a recording again to a fresh address when its upload fails in transit", async () => {
		// First upload: the connection drops before anything is sent. Second: storage takes the bytes, the answer is
		// lost, and the fresh address the SDK asks for is refused as already uploaded, which ends it.
		for (const lose of ["request", "answer"] as const) {
			const puts: string[] = [];
			let failed = false;
			const flaky: typeof fetch = async (input, init) => {
				if (init?.method !== "PUT") return countingFetch(input, init);
				puts.push(String(input));
				if (failed) return countingFetch(input, init);
				failed = true;
				if (lose === "request") throw new TypeError("fetch failed: socket hang up");
				const response = await countingFetch(input, init);
				await response.body?.cancel();
				throw new TypeError("fetch failed: other side closed");
			};
			const retries: string[] = [];
			const file = await client({ fetch: flaky }).uploadAudio(toneWav(1), {
				fileName: `flaky-${lose}.wav`,
				onRetry: ({ attempt, error }) => retries.push(`${attempt} ${error.code}`),
			});
			expect(retries).toEqual(["1 network_error"]);
			expect(file).toMatchObject({ file_name: `flaky-${lose}.wav`, upload_status: "uploaded" });
			// Lost before sending: sent again to the fresh address. Lost after: nothing sent again.
			expect(puts).toHaveLength(lose === "request" ? 2 : 1);
			if (lose === "request") expect(puts[1]).not.toBe(puts[0]);
		}
	});

	it("manages audio files: list, get, a fresh upload address, delete", async () => {
		const sdk = client();
		const registered = await sdk.audioFiles.register({ file_name: "later.flac", mime_type: "audio/flac" });
		expect(registered).toMatchObject({ upload_status: "awaiting_upload", upload_url: expect.stringMatching(/^http/) });
		const fresh = await sdk.audioFiles.regenerateUploadUrl(registered.id);
		expect(fresh.upload_url).toMatch(/^http/);
		expect(Date.parse(fresh.upload_url_expires_at)).toBeGreaterThanOrEqual(
			Date.parse(registered.upload_url_expires_at),
		);
		const page = await sdk.audioFiles.list({ limit: 100 });
		expect(page.data.map((f) => f.id)).toContain(registered.id);
		expect(await sdk.audioFiles.get(registered.id)).toMatchObject({ id: registered.id, file_name: "later.flac" });
		expect(await sdk.audioFiles.delete(registered.id)).toEqual({ id: registered.id, deleted: true });
		expect(await caught(sdk.audioFiles.get(registered.id))).toMatchObject({ status: 404, code: "not_found" });
	});
});

describe("SDK webhook subscriptions", () => {
	it("creates, reads, updates, tests, rotates the secret of and deletes a subscription", async () => {
		const sdk = client();
		const created = await sdk.webhooks.create({ url: `${receiverUrl}/sdk-test`, events: ["conversion_failed"] });
		expect(created).toMatchObject({ is_active: true, events: ["conversion_failed"], consecutive_failures: 0 });
		expect(await sdk.webhooks.get(created.id)).not.toHaveProperty("secret");
		expect((await sdk.webhooks.list()).map((s) => s.id)).toContain(created.id);

		const updated = await sdk.webhooks.update(created.id, {
			description: "renamed",
			events: ["conversion_completed", "conversion_failed"],
		});
		expect(updated).toMatchObject({ description: "renamed", events: ["conversion_completed", "conversion_failed"] });
		expect(await sdk.webhooks.update(created.id, { is_active: false })).toMatchObject({ is_active: false });
		expect(await sdk.webhooks.update(created.id, { is_active: true })).toMatchObject({ is_active: true });

		// A test delivery is received before the test call answers. It is found by its id: the subscription takes the
		// account's conversion events too, and those of the conversions just completed above may arrive in between.
		const testDelivery = (id: string) =>
			receiver.received.find((r) => r.path === "/sdk-test" && JSON.parse(r.body).id === id);
		const test = await sdk.webhooks.test(created.id);
		expect(test.test_payload.event).toBe("webhook.test");
		const first = testDelivery(test.test_payload.id);
		expect(
			await verifyWebhook({ secret: created.secret, headers: first?.headers ?? {}, body: String(first?.body) }),
		).toMatchObject({ ok: true });
		expect(JSON.parse(String(first?.body))).toMatchObject({ event: "webhook.test", id: test.test_payload.id });

		const rotated = await sdk.webhooks.regenerateSecret(created.id);
		expect(rotated.new_secret).not.toBe(created.secret);
		const second = testDelivery((await sdk.webhooks.test(created.id)).test_payload.id);
		expect(second).toBeDefined();
		const input = { headers: second?.headers ?? {}, body: String(second?.body) };
		expect(await verifyWebhook({ secret: rotated.new_secret, ...input })).toMatchObject({ ok: true });
		expect(await verifyWebhook({ secret: created.secret, ...input })).toMatchObject({
			ok: false,
			reason: "signature_mismatch",
		});

		expect(await sdk.webhooks.delete(created.id)).toMatchObject({ id: created.id, deleted: true });
		expect(await caught(sdk.webhooks.get(created.id))).toMatchObject({ status: 404 });
	});
});

describe("SDK errors", () => {
	it("refuses bad input locally with the API's own field messages, before any request", async () => {
		const sdk = client();
		const before = requests.length;
		const error = await caught(
			sdk.conversions.create({
				audio_file_id: crypto.randomUUID(),
				voice_model_id: voiceId,
				pitch_shift: "up_a_bit" as "third_up",
			}),
		);
		expect(error).toMatchObject({ status: null, code: SDK_ERROR_CODES.invalidRequest });
		expect(error.fieldErrors).toEqual([{ field: "pitch_shift", message: expect.stringContaining("third_up") }]);
		expect(requests.length).toBe(before);

		const settings = await caught(
			sdk.conversions.create({
				audio_file_id: crypto.randomUUID(),
				voice_model_id: voiceId,
				voice_settings: { index_rate: 1.2, f0_method: "crepe" as "yin" },
			}),
		);
		expect(settings.fieldErrors).toEqual([
			{ field: "voice_settings.index_rate", message: "must be a number from 0 to 1" },
			{ field: "voice_settings.f0_method", message: "must be one of: rmvpe, yin" },
		]);
		expect(requests.length).toBe(before);

		const tooLarge = await caught(
			sdk.uploadAudio({ stream: new ReadableStream(), size: 100_000_000 }, { fileName: "huge.wav" }),
		);
		expect(tooLarge).toMatchObject({ code: SDK_ERROR_CODES.fileTooLarge });
		const unknownType = await caught(sdk.uploadAudio(new Uint8Array(10), { fileName: "notes.txt" }));
		expect(unknownType.fieldErrors[0]?.field).toBe("mime_type");
		expect(requests.length).toBe(before);
	});

	it("passes the service's errors through with status, code and fields", async () => {
		const sdk = client();
		expect(await caught(sdk.conversions.get(crypto.randomUUID()))).toMatchObject({ status: 404, code: "not_found" });
		const missingVoice = await caught(
			sdk.conversions.create({ audio_file_id: crypto.randomUUID(), voice_model_id: crypto.randomUUID() }),
		);
		expect(missingVoice.status).toBe(404);

		const file = await sdk.audioFiles.register({ file_name: "twice.wav", mime_type: "audio/wav" });
		await sdk.audioFiles.put(String(file.upload_url), toneWav(1), { mimeType: "audio/wav" });
		const again = await caught(sdk.audioFiles.put(String(file.upload_url), toneWav(1), { mimeType: "audio/wav" }));
		expect(again.status).toBe(409);

		const pending = await sdk.conversions.create({ audio_file_id: file.id, voice_model_id: voiceId });
		const early = await caught(sdk.downloadConversion({ ...pending, status: "queued" }));
		expect(early).toMatchObject({ code: SDK_ERROR_CODES.notCompleted });
	});

	it("gives up waiting at the deadline with a clear error", async () => {
		const sdk = client();
		const file = await sdk.audioFiles.register({ file_name: "never.wav", mime_type: "audio/wav" });
		const conversion = await sdk.conversions.create({ audio_file_id: file.id, voice_model_id: voiceId });
		const error = await caught(sdk.waitForConversion(conversion.id, { timeoutMs: 300, initialIntervalMs: 50 }));
		expect(error).toMatchObject({ code: SDK_ERROR_CODES.waitTimeout });
		expect(error.message).toMatch(/pending_preprocessing/);
	});
});
