/** The signed PUT of an audio file: what is accepted, what is refused, and that refusals keep nothing. */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { MAX_AUDIO_FILE_BYTES } from "../../src/audio-files/limits.ts";
import type { VoiceConversion } from "../../src/contracts/voice-conversions.ts";
import { FAILURE_MESSAGES } from "../../src/conversions/failure-messages.ts";
import { signStorageUrl } from "../../src/storage/signed-url.ts";
import { makeWav } from "../support/wav-generator.ts";
import {
	type Api,
	getFile,
	heldUpload,
	objectKeyOf,
	put,
	registerFile,
	storedBytes,
	storedObject,
	upload,
} from "./audio-files-helpers.ts";
import { eventsFor, insertVoice } from "./conversion-fixtures.ts";
import { ORIGIN, signedInClient } from "./helpers.ts";

const wav = makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 });

/** A body produced on demand in 64 KiB chunks, counting how much was actually pulled from it. */
function generatedBody(totalBytes: number) {
	const counter = { pulled: 0 };
	const chunk = new Uint8Array(64 * 1024).fill(0x55);
	const stream = new ReadableStream<Uint8Array>({
		pull(controller) {
			if (counter.pulled >= totalBytes) return controller.close();
			const part = chunk.subarray(0, Math.min(chunk.byteLength, totalBytes - counter.pulled));
			counter.pulled += part.byteLength;
			controller.enqueue(part.slice());
		},
	});
	return { stream, counter };
}

async function newFile(mimeType = "audio/wav") {
	const { api, client } = await signedInClient();
	const file = await registerFile(api, "take.wav", mimeType);
	return { api, client, file };
}

async function expectNothingKept(api: Parameters<typeof getFile>[0], accountId: string, fileId: string) {
	expect(await storedObject(accountId, fileId)).toBeNull();
	expect(await getFile(api, fileId)).toMatchObject({ upload_status: "awaiting_upload", uploaded_at: null });
}

describe("PUT {upload_url}", () => {
	it("stores the bytes, answers 200 with an empty body, and marks the file uploaded", async () => {
		const { api, client, file } = await newFile();
		const response = await upload(file, wav);
		expect(response.status).toBe(200);
		expect(await response.text()).toBe("");
		expect(await storedBytes(client.accountId, file.id)).toEqual(wav);
		const after = await getFile(api, file.id);
		expect(after).toMatchObject({ upload_status: "uploaded", size_bytes: wav.byteLength, upload_url: null });
		expect(Date.parse(after.uploaded_at as string)).toBeGreaterThanOrEqual(Date.parse(after.created_at));
		expect(["pending", "processing", "ready"]).toContain(after.preprocessing_status);
	});

	it("accepts the registered type in another letter case, with parameters", async () => {
		const { file } = await newFile("audio/x-wav");
		expect((await upload(file, wav, "Audio/X-WAV; charset=binary")).status).toBe(200);
	});

	it("refuses a second upload with 409 and keeps the first bytes", async () => {
		const { client, file } = await newFile();
		expect((await upload(file, wav)).status).toBe(200);
		const other = new Uint8Array(100).fill(1);
		const response = await upload(file, other);
		expect(response.status).toBe(409);
		expect(await response.json()).toMatchObject({
			success: false,
			code: "already_uploaded",
			message: expect.stringContaining("already been uploaded"),
		});
		expect((await storedObject(client.accountId, file.id))?.size).toBe(wav.byteLength);
	});

	/** The file is uploaded with exactly `bytes`, in storage and in what the API says of it. */
	async function expectUploaded(api: Api, accountId: string, fileId: string, bytes: Uint8Array) {
		expect(await storedBytes(accountId, fileId)).toEqual(bytes);
		expect(await getFile(api, fileId)).toMatchObject({ upload_status: "uploaded", size_bytes: bytes.byteLength });
	}

	it("keeps the bytes of the upload it took when two go through one address at once", async () => {
		const { api, client, file } = await newFile();
		const slow = makeWav({ sampleRate: 8_000, channels: 2, frames: 8_000, encoding: "pcm", bits: 16 });
		const held = heldUpload(file.upload_url as string, slow);
		await held.started;
		// The fast one finishes first and is the file's; the slow one, finishing after, is refused and kept nowhere.
		expect((await upload(file, wav)).status).toBe(200);
		held.release();
		const refused = await held.response;
		expect(refused.status).toBe(409);
		expect(await refused.json()).toMatchObject({ code: "already_uploaded" });
		await expectUploaded(api, client.accountId, file.id, wav);
	});

	it("keeps a finished upload's bytes when another through the same address is cut off", async () => {
		const { api, client, file } = await newFile();
		const cut = heldUpload(file.upload_url as string, new Uint8Array(50_000).fill(7));
		await cut.started;
		expect((await upload(file, wav)).status).toBe(200);
		cut.abort(new Error("the client went away"));
		// 400 when its handler was reading the body as it broke off; 409 when the handler first ran after the other
		// upload finished (the request had only reached the runtime). Either way its bytes touch nothing.
		expect([400, 409]).toContain((await cut.response).status);
		await expectUploaded(api, client.accountId, file.id, wav);
	});

	it("keeps the newest address's upload when an older one, regenerated mid-upload, finishes after it", async () => {
		const { api, client, file } = await newFile();
		const old = heldUpload(file.upload_url as string, new Uint8Array(50_000).fill(7));
		await old.started;
		const regenerated = await api(`/api/v1/audio-files/${file.id}/regenerate-upload-url`, { method: "POST" });
		const newest = ((await regenerated.json()) as { data: typeof file }).data;
		expect((await upload(newest, wav)).status).toBe(200);
		old.release();
		// 409 when its handler checked the address before it was replaced (the bytes then lost to the newest upload);
		// 403 when the handler first ran after the regeneration (the request had only reached the runtime, whose
		// first pull of the body is what `started` waits for). Either way its bytes touch nothing.
		const refused = await old.response;
		const { code } = (await refused.json()) as { code: string };
		expect([
			[403, "upload_url_superseded"],
			[409, "already_uploaded"],
		]).toContainEqual([refused.status, code]);
		await expectUploaded(api, client.accountId, file.id, wav);
	});

	it("refuses another Content-Type with 415 naming the registered one", async () => {
		const { api, client, file } = await newFile("audio/flac");
		const response = await upload(file, wav, "audio/wav");
		expect(response.status).toBe(415);
		expect(((await response.json()) as { message: string }).message).toContain("audio/flac");
		await expectNothingKept(api, client.accountId, file.id);
	});

	it("refuses a compressed body with 415 naming the coding, keeps nothing and takes the plain file after", async () => {
		const { api, client, file } = await newFile();
		// Stored as it came, a gzip-encoded WAV read as no audio at all, and the file could take no other upload.
		const gzipped = new Uint8Array(
			await new Response(new Blob([wav]).stream().pipeThrough(new CompressionStream("gzip"))).arrayBuffer(),
		);
		const response = await put(file.upload_url as string, gzipped, {
			"Content-Type": "audio/wav",
			"Content-Encoding": "gzip",
			"Content-Length": String(gzipped.byteLength),
		});
		expect(response.status).toBe(415);
		expect(response.headers.get("Accept-Encoding")).toBe("identity");
		expect(await response.json()).toMatchObject({
			code: "unsupported_media_type",
			message: expect.stringMatching(/Content-Encoding gzip/),
		});
		await expectNothingKept(api, client.accountId, file.id);
		expect((await upload(file, wav)).status).toBe(200);
		await expectUploaded(api, client.accountId, file.id, wav);
	});

	it("refuses an expired address with 403", async () => {
		const { api, client, file } = await newFile();
		const expired = await signStorageUrl(env, ORIGIN, {
			method: "PUT",
			key: objectKeyOf(client.accountId, file.id),
			expiresAt: new Date(Date.now() - 1000),
			contentType: "audio/wav",
			maxBytes: MAX_AUDIO_FILE_BYTES,
		});
		const response = await put(expired, wav, { "Content-Type": "audio/wav", "Content-Length": String(wav.byteLength) });
		expect(response.status).toBe(403);
		expect(((await response.json()) as { message: string }).message).toMatch(/expired/);
		await expectNothingKept(api, client.accountId, file.id);
	});

	it.each([
		["a raised size limit", (u: URL) => u.searchParams.set("max", "999999999999")],
		["another content type", (u: URL) => u.searchParams.set("ct", "audio/mpeg")],
		["a later expiry", (u: URL) => u.searchParams.set("exp", String(Number(u.searchParams.get("exp")) + 3600))],
		["another object key", (u: URL) => (u.pathname = u.pathname.replace(/[0-9a-f]{12}$/, "000000000000"))],
		[
			"a changed signature",
			(u: URL) => {
				// Another first character, whatever it was (replacing it with a fixed one left 1 in 64 signatures as they were).
				const sig = u.searchParams.get("sig") ?? "";
				u.searchParams.set("sig", `${sig.startsWith("A") ? "B" : "A"}${sig.slice(1)}`);
			},
		],
		["no signature", (u: URL) => u.searchParams.delete("sig")],
	])("refuses a tampered address (%s) with 403", async (_name, tamper) => {
		const { api, client, file } = await newFile();
		const url = new URL(file.upload_url as string);
		tamper(url);
		const contentType = url.searchParams.get("ct") ?? "audio/wav";
		const response = await put(url.toString(), wav, {
			"Content-Type": contentType,
			"Content-Length": String(wav.byteLength),
		});
		expect(response.status).toBe(403);
		await expectNothingKept(api, client.accountId, file.id);
	});

	it("refuses a declared length of 100 MB with 413 before reading the body", async () => {
		const { api, client, file } = await newFile();
		const body = generatedBody(MAX_AUDIO_FILE_BYTES);
		const response = await put(file.upload_url as string, body.stream, {
			"Content-Type": "audio/wav",
			"Content-Length": String(MAX_AUDIO_FILE_BYTES),
		});
		expect(response.status).toBe(413);
		expect(((await response.json()) as { message: string }).message).toContain(String(MAX_AUDIO_FILE_BYTES));
		expect(body.counter.pulled).toBeLessThan(1024 * 1024);
		await expectNothingKept(api, client.accountId, file.id);
	});

	it("records a refusal over 100 MB on the file, fails the conversions waiting on it at once, and takes no other upload", async () => {
		const { api, client, file } = await newFile();
		const voiceId = await insertVoice();
		const convert = async () => {
			const response = await api("/api/v1/voice-conversions", {
				method: "POST",
				headers: { "Content-Type": "application/json" },
				body: JSON.stringify({ audio_file_id: file.id, voice_model_id: voiceId }),
			});
			expect(response.status).toBe(201);
			return ((await response.json()) as { data: VoiceConversion }).data.id;
		};
		const getConversion = async (id: string) =>
			((await (await api(`/api/v1/voice-conversions/${id}`)).json()) as { data: VoiceConversion }).data;
		const waiting = await convert();

		const response = await put(file.upload_url as string, generatedBody(MAX_AUDIO_FILE_BYTES + 5).stream, {
			"Content-Type": "audio/wav",
			"Content-Length": String(MAX_AUDIO_FILE_BYTES + 5),
		});
		expect(response.status).toBe(413);
		await expectNothingKept(api, client.accountId, file.id);
		const refused = await getFile(api, file.id);
		expect(refused).toMatchObject({
			preprocessing_status: "failed",
			preprocessing_error_code: "too_large",
			preprocessing_error: expect.stringContaining("File over 100 MB"),
			upload_url: null,
		});
		expect(await getConversion(waiting)).toMatchObject({
			status: "failed",
			error_message: FAILURE_MESSAGES.too_large,
		});
		expect((await eventsFor(waiting)).map((e) => e.type)).toEqual(["conversion.failed"]);

		// The file is over: a smaller upload through the same address, or a new address, is refused with the reason.
		const retry = await upload(file, wav);
		expect(retry.status).toBe(409);
		expect(await retry.json()).toMatchObject({ code: "upload_refused", message: expect.stringContaining("100 MB") });
		expect(await storedObject(client.accountId, file.id)).toBeNull();
		const regenerate = await api(`/api/v1/audio-files/${file.id}/regenerate-upload-url`, { method: "POST" });
		expect(regenerate.status).toBe(409);
		expect(await regenerate.json()).toMatchObject({ code: "upload_refused" });
		// A conversion created now fails at once with the same reason.
		expect(await getConversion(await convert())).toMatchObject({
			status: "failed",
			error_message: FAILURE_MESSAGES.too_large,
		});
	});

	it("lets 99,999,999 bytes past the size check (a body that then falls short is refused, not kept)", async () => {
		const { api, client, file } = await newFile();
		const response = await put(file.upload_url as string, wav, {
			"Content-Type": "audio/wav",
			"Content-Length": String(MAX_AUDIO_FILE_BYTES - 1),
		});
		expect(response.status).toBe(400);
		expect(await response.json()).toMatchObject({ code: "upload_incomplete" });
		await expectNothingKept(api, client.accountId, file.id);
	});

	it("stops reading a body longer than its declared length and keeps nothing", async () => {
		const { api, client, file } = await newFile();
		const body = generatedBody(2 * MAX_AUDIO_FILE_BYTES);
		const response = await put(file.upload_url as string, body.stream, {
			"Content-Type": "audio/wav",
			"Content-Length": "100000",
		});
		expect(response.status).toBe(400);
		expect(await response.json()).toMatchObject({ code: "upload_incomplete" });
		expect(body.counter.pulled).toBeLessThan(8 * 1024 * 1024);
		await expectNothingKept(api, client.accountId, file.id);
	});

	it("requires a Content-Length (411)", async () => {
		const { api, client, file } = await newFile();
		const body = generatedBody(1000);
		const response = await put(file.upload_url as string, body.stream, { "Content-Type": "audio/wav" });
		expect(response.status).toBe(411);
		await expectNothingKept(api, client.accountId, file.id);
	});
});
