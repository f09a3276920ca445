/** Helpers for audio file tests: register, upload to the signed address, wait for preprocessing. */
import { env, exports } from "cloudflare:workers";
import { expect } from "vitest";
import type { AudioFile } from "../../src/contracts/audio-files.ts";
import { keysUnder, runSql } from "./helpers.ts";

export type Api = (path: string, init?: RequestInit) => Promise<Response>;

export async function register(api: Api, body: Record<string, unknown>): Promise<Response> {
	return api("/api/v1/audio-files", {
		method: "POST",
		headers: { "Content-Type": "application/json" },
		body: JSON.stringify(body),
	});
}

export async function registerFile(api: Api, fileName: string, mimeType: string): Promise<AudioFile> {
	const response = await register(api, { file_name: fileName, mime_type: mimeType });
	expect(response.status).toBe(201);
	return ((await response.json()) as { data: AudioFile }).data;
}

/** PUT to a signed address through the Worker, as a client would (no bearer token). */
export function put(url: string, body: BodyInit | null, headers: Record<string, string>): Promise<Response> {
	return exports.default.fetch(new Request(url, { method: "PUT", body, headers }));
}

/**
 * A slow client's body: `bytes` up to `at` at once, the rest when `release` is called (or the stream fails with
 * `abort`, as when the client goes away). `started` settles once the first bytes were taken (the upload was let in).
 */
export function heldBody(bytes: Uint8Array, at: number) {
	let release = () => {};
	let abort = (_reason: Error) => {};
	const gate = new Promise<void>((resolve, reject) => {
		release = resolve;
		abort = reject;
	});
	let taken = () => {};
	const started = new Promise<void>((resolve) => {
		taken = resolve;
	});
	let first = true;
	const stream = new ReadableStream<Uint8Array>({
		async pull(controller) {
			if (first) {
				first = false;
				controller.enqueue(bytes.slice(0, at));
				taken();
				return;
			}
			try {
				await gate;
			} catch (error) {
				controller.error(error);
				return;
			}
			controller.enqueue(bytes.slice(at));
			controller.close();
		},
	});
	return { stream, started, release: () => release(), abort: (reason: Error) => abort(reason) };
}

/** An upload through `url` that sends its first 1000 bytes at once and the rest when released (`heldBody`). */
export function heldUpload(url: string, bytes: Uint8Array, contentType = "audio/wav") {
	const held = heldBody(bytes, 1000);
	const response = put(url, held.stream, { "Content-Type": contentType, "Content-Length": String(bytes.byteLength) });
	return { ...held, response };
}

export const upload = (file: AudioFile, bytes: Uint8Array, contentType = file.mime_type) =>
	put(file.upload_url as string, bytes, { "Content-Type": contentType, "Content-Length": String(bytes.byteLength) });

export async function getFile(api: Api, id: string): Promise<AudioFile> {
	const response = await api(`/api/v1/audio-files/${id}`);
	expect(response.status).toBe(200);
	return ((await response.json()) as { data: AudioFile }).data;
}

/** Polls until preprocessing has an outcome: the real queue delivers after its 1 s batch timeout. Bounded. */
export async function waitForPreprocessing(api: Api, id: string, timeoutMs = 15_000): Promise<AudioFile> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const file = await getFile(api, id);
		if (file.preprocessing_status === "ready" || file.preprocessing_status === "failed") return file;
		if (Date.now() > deadline) throw new Error(`preprocessing of ${id} did not finish: ${file.preprocessing_status}`);
		await new Promise((resolve) => setTimeout(resolve, 100));
	}
}

export const objectKeyOf = (accountId: string, fileId: string) => `audio-files/${accountId}/${fileId}`;

/**
 * The one object kept for the file (an upload's bytes are under its signed key and a suffix of their own), or null;
 * more than one is an error: a refused or lost upload must not leave its bytes behind.
 */
/** The bytes of the one object kept for the file (`storedObject`), or null. */
export async function storedBytes(accountId: string, fileId: string): Promise<Uint8Array | null> {
	const stored = await storedObject(accountId, fileId);
	return stored ? new Uint8Array(await stored.arrayBuffer()) : null;
}

export async function storedObject(accountId: string, fileId: string) {
	const keys = await keysUnder(objectKeyOf(accountId, fileId));
	if (keys.length > 1) throw new Error(`${keys.length} objects kept for audio file ${fileId}: ${keys.join(", ")}`);
	return keys[0] === undefined ? null : env.BUCKET.get(keys[0]);
}

/** A voice and a conversion of `fileId` in `status`, written directly (the conversion API is another issue's). */
export async function insertConversion(accountId: string, fileId: string, status: string): Promise<string> {
	const voiceId = crypto.randomUUID();
	const conversionId = crypto.randomUUID();
	const now = new Date().toISOString();
	await runSql([
		`INSERT INTO voices (id, name, tags, engine, engine_params, artifacts, is_active, created_at, updated_at) VALUES ('${voiceId}', 'voice ${voiceId}', '[]', 'dsp', '{}', '[]', 1, '${now}', '${now}')`,
		`INSERT INTO voice_conversions (id, account_id, audio_file_id, voice_model_id, pitch_shift, use_preview, status, created_at, updated_at) VALUES ('${conversionId}', '${accountId}', '${fileId}', '${voiceId}', 'same_octave', 0, '${status}', '${now}', '${now}')`,
	]);
	return conversionId;
}
