/** Helpers for audio file tests: register, upload to the signed address, wait for preprocessing. */
import { env, exports } from "cloudflare:workers";
import { expect } from "vitest";
import type { AudioFile } from "../../src/contracts/audio-files.ts";
import { runSql } from "./helpers.ts";

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

export async function storedObject(accountId: string, fileId: string) {
	return env.BUCKET.head(objectKeyOf(accountId, fileId));
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
