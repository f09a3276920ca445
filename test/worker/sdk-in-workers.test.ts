/**
 * The SDK running inside workerd, as a Worker that calls this API would use it: tokens, the upload helper with
 * progress (a streamed body given its length by `FixedLengthStream`), a conversion completed by a runner through the
 * runner API, waiting, downloading, webhooks and the receiver-side verifier.
 */
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { VoiceConversionClient, verifyWebhook } from "../../sdk/index.ts";
import { computeWebhookSignature } from "../../src/contracts/webhook-signature.ts";
import { insertVoice, makeWav, runner } from "./conversion-fixtures.ts";
import { ORIGIN, provisionClient } from "./helpers.ts";

const workerFetch: typeof fetch = (input, init) => exports.default.fetch(new Request(input, init));

async function sdkClient() {
	const client = await provisionClient("api");
	return new VoiceConversionClient({
		baseUrl: ORIGIN,
		clientId: client.clientId,
		clientSecret: client.clientSecret,
		fetch: workerFetch,
	});
}

describe("SDK in a Worker", () => {
	it("uploads with progress, creates a conversion, waits for it and downloads the output", async () => {
		const sdk = await sdkClient();
		const voiceId = await insertVoice({ name: "Worker Voice" });
		expect((await sdk.voices.list()).map((v) => v.id)).toContain(voiceId);

		const source = makeWav(3);
		const progress: number[] = [];
		const file = await sdk.uploadAudio(source, {
			fileName: "in-worker.wav",
			onProgress: ({ loaded }) => progress.push(loaded),
		});
		expect(file).toMatchObject({ upload_status: "uploaded", size_bytes: source.length });
		expect(progress.at(-1)).toBe(source.length);

		const created = await sdk.conversions.create({
			audio_file_id: file.id,
			voice_model_id: voiceId,
			pitch_shift: "fifth_down",
			use_preview: true,
		});
		const gpu = await runner();
		const lease = await gpu.leaseOne();
		expect(lease).toMatchObject({ conversion_id: created.id, semitones: -7, use_preview: true });
		const output = makeWav(0.5);
		expect((await gpu.finish(lease, output)).status).toBe(200);

		const done = await sdk.waitForConversion(created.id, { initialIntervalMs: 20, timeoutMs: 10_000 });
		expect(done).toMatchObject({ status: "completed", pitch_shift: "fifth_down" });
		const downloaded = new Uint8Array(await (await sdk.downloadConversion(done)).arrayBuffer());
		expect(downloaded).toEqual(output);
		expect(sdk.tokens.requests).toBe(1);
	});

	it("manages a webhook subscription and verifies a signed delivery with WebCrypto", async () => {
		const sdk = await sdkClient();
		const subscription = await sdk.webhooks.create({
			url: "https://hooks.example.com/voice",
			events: ["conversion_completed"],
		});
		expect((await sdk.webhooks.list()).map((s) => s.id)).toEqual([subscription.id]);

		const body = JSON.stringify({
			event: "webhook.test",
			id: crypto.randomUUID(),
			timestamp: new Date().toISOString(),
		});
		const timestamp = Math.floor(Date.now() / 1000);
		const signature = await computeWebhookSignature(subscription.secret, timestamp, body);
		const headers = new Headers({
			"X-Webhook-Signature": `sha256=${signature}`,
			"X-Webhook-Timestamp": String(timestamp),
		});
		expect(await verifyWebhook({ secret: subscription.secret, headers, body })).toMatchObject({ ok: true });
		expect(await verifyWebhook({ secret: subscription.secret, headers, body: `${body} ` })).toMatchObject({
			ok: false,
			reason: "signature_mismatch",
		});

		await sdk.webhooks.delete(subscription.id);
		expect(await sdk.webhooks.list()).toEqual([]);
	});
});
