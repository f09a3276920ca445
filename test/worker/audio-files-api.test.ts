/** Registration, listing, reading, deleting and renewing upload addresses; validation and tenant isolation. */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { AudioFile } from "../../src/contracts/audio-files.ts";
import { runSafetyNet } from "../../src/cron/safety-net.ts";
import { signStorageUrl } from "../../src/storage/signed-url.ts";
import { makeWav } from "../support/wav-generator.ts";
import {
	getFile,
	insertConversion,
	objectKeyOf,
	put,
	register,
	registerFile,
	storedObject,
	upload,
} from "./audio-files-helpers.ts";
import { call, ORIGIN, runSql, signedInClient } from "./helpers.ts";

const wav = makeWav({ sampleRate: 8000, channels: 1, frames: 8000, encoding: "pcm", bits: 16 });

describe("POST /api/v1/audio-files", () => {
	it("registers a file awaiting upload, with a signed address valid exactly 30 minutes", async () => {
		const { api } = await signedInClient();
		const response = await register(api, { file_name: "voice memo.wav", mime_type: "audio/wav" });
		expect(response.status).toBe(201);
		const body = (await response.json()) as { success: boolean; data: AudioFile };
		expect(body.success).toBe(true);
		const file = body.data;
		expect(file).toMatchObject({
			file_name: "voice memo.wav",
			mime_type: "audio/wav",
			upload_status: "awaiting_upload",
			preprocessing_status: "pending",
			uploaded_at: null,
			size_bytes: null,
			format: null,
			duration_seconds: null,
		});
		expect(file.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
		expect(Date.parse(file.upload_url_expires_at) - Date.parse(file.created_at)).toBe(30 * 60 * 1000);
		const url = new URL(file.upload_url as string);
		expect(url.pathname).toMatch(/^\/storage\/v1\/audio-files\//);
		expect(url.searchParams.get("method")).toBe("PUT");
		expect(url.searchParams.get("ct")).toBe("audio/wav");
		expect(url.searchParams.get("max")).toBe("100000000");
		expect(Number(url.searchParams.get("exp")) * 1000).toBe(Date.parse(file.upload_url_expires_at));
	});

	it.each([
		"audio/wav",
		"audio/x-wav",
		"audio/wave",
		"audio/vnd.wave",
		"audio/mpeg",
		"audio/mp3",
		"audio/flac",
		"audio/x-flac",
		"AUDIO/WAV",
	])("accepts mime_type %s, keeping it as supplied", async (mimeType) => {
		const { api } = await signedInClient();
		expect((await registerFile(api, "a", mimeType)).mime_type).toBe(mimeType);
	});

	it.each([
		[{ mime_type: "audio/wav" }, "file_name"],
		[{ file_name: "", mime_type: "audio/wav" }, "file_name"],
		[{ file_name: "x".repeat(256), mime_type: "audio/wav" }, "file_name"],
		[{ file_name: "   ", mime_type: "audio/wav" }, "file_name"],
		[{ file_name: "a\nb.wav", mime_type: "audio/wav" }, "file_name"],
		[{ file_name: 42, mime_type: "audio/wav" }, "file_name"],
		[{ file_name: "a.ogg" }, "mime_type"],
		[{ file_name: "a.ogg", mime_type: "audio/ogg" }, "mime_type"],
		[{ file_name: "a.wav", mime_type: "audio/wav; codecs=1" }, "mime_type"],
		[{ file_name: "a.txt", mime_type: "text/plain" }, "mime_type"],
	])("refuses %j with a 400 naming %s", async (body, field) => {
		const { api } = await signedInClient();
		const response = await register(api, body);
		expect(response.status).toBe(400);
		const error = (await response.json()) as { success: boolean; message: string; errors: { field: string }[] };
		expect(error.success).toBe(false);
		expect(error.message).toContain(field);
		expect(error.errors.map((e) => e.field)).toContain(field);
	});

	it("accepts a 255-character file name", async () => {
		const { api } = await signedInClient();
		expect((await registerFile(api, "é".repeat(255), "audio/flac")).file_name).toHaveLength(255);
	});

	it("requires a bearer token", async () => {
		const { api } = await signedInClient();
		const response = await api("/api/v1/audio-files", {
			method: "POST",
			headers: { Authorization: "", "Content-Type": "application/json" },
			body: JSON.stringify({ file_name: "a.wav", mime_type: "audio/wav" }),
		});
		expect(response.status).toBe(401);
	});
});

describe("GET /api/v1/audio-files", () => {
	it("lists the caller's files newest first, a page at a time", async () => {
		const { api } = await signedInClient();
		const ids: string[] = [];
		for (let i = 0; i < 5; i++) ids.push((await registerFile(api, `f${i}.wav`, "audio/wav")).id);
		const seen: string[] = [];
		let cursor: string | null = null;
		for (let page = 0; page < 5; page++) {
			const query: string = cursor ? `?limit=2&cursor=${cursor}` : "?limit=2";
			const response = await api(`/api/v1/audio-files${query}`);
			expect(response.status).toBe(200);
			const body = (await response.json()) as { data: AudioFile[]; next_cursor: string | null };
			expect(body.data.length).toBeLessThanOrEqual(2);
			seen.push(...body.data.map((f) => f.id));
			cursor = body.next_cursor;
			if (!cursor) break;
		}
		expect(seen).toEqual([...ids].reverse());
	});

	it.each([
		["limit=0", "query.limit: must be an integer from 1 to 100"],
		["limit=101", "query.limit: must be an integer from 1 to 100"],
		["limit=abc", "query.limit: must be an integer from 1 to 100"],
		["limit=2.5", "query.limit: must be an integer from 1 to 100"],
		// Not plain decimal digits: not read as 16, 100, 5 or the default, as Number() would.
		["limit=0x10", "query.limit: must be an integer from 1 to 100"],
		["limit=1e2", "query.limit: must be an integer from 1 to 100"],
		["limit=%205", "query.limit: must be an integer from 1 to 100"],
		["limit=", "query.limit: must be an integer from 1 to 100"],
		["cursor=not-a-cursor", "query.cursor"],
	])("refuses %s with a 400 saying %s", async (query, problem) => {
		const { api } = await signedInClient();
		const response = await api(`/api/v1/audio-files?${query}`);
		expect(response.status).toBe(400);
		expect(((await response.json()) as { message: string }).message).toContain(problem);
	});

	it("states one problem for a limit too large for a number", async () => {
		const { api } = await signedInClient();
		const response = await api("/api/v1/audio-files?limit=99999999999999999999");
		expect(response.status).toBe(400);
		const body = (await response.json()) as { errors: { field: string }[] };
		expect(body.errors.map((e) => e.field)).toEqual(["query.limit"]);
	});

	it("reads a limit written in plain digits, leading zeros too", async () => {
		const { api } = await signedInClient();
		expect((await api("/api/v1/audio-files?limit=007")).status).toBe(200);
		expect((await api("/api/v1/audio-files")).status).toBe(200);
	});
});

describe("tenant isolation", () => {
	it("another account's file is a 404 for every operation and absent from lists", async () => {
		const owner = await signedInClient();
		const other = await signedInClient();
		const file = await registerFile(owner.api, "private.wav", "audio/wav");
		expect((await other.api(`/api/v1/audio-files/${file.id}`)).status).toBe(404);
		expect((await other.api(`/api/v1/audio-files/${file.id}`, { method: "DELETE" })).status).toBe(404);
		expect((await other.api(`/api/v1/audio-files/${file.id}/regenerate-upload-url`, { method: "POST" })).status).toBe(
			404,
		);
		const list = (await (await other.api("/api/v1/audio-files")).json()) as { data: AudioFile[] };
		expect(list.data.map((f) => f.id)).not.toContain(file.id);
		// The owner still sees it, untouched.
		expect((await getFile(owner.api, file.id)).upload_status).toBe("awaiting_upload");
	});

	it("an unknown or malformed id is a 404", async () => {
		const { api } = await signedInClient();
		expect((await api(`/api/v1/audio-files/${crypto.randomUUID()}`)).status).toBe(404);
		expect((await api("/api/v1/audio-files/not-a-uuid")).status).toBe(404);
	});
});

describe("DELETE /api/v1/audio-files/{id}", () => {
	it("deletes the file and its stored bytes", async () => {
		const { api, client } = await signedInClient();
		const file = await registerFile(api, "a.wav", "audio/wav");
		expect((await upload(file, wav)).status).toBe(200);
		expect(await storedObject(client.accountId, file.id)).not.toBeNull();
		const response = await api(`/api/v1/audio-files/${file.id}`, { method: "DELETE" });
		expect(response.status).toBe(200);
		expect(await response.json()).toEqual({ success: true, data: { id: file.id, deleted: true } });
		expect(await storedObject(client.accountId, file.id)).toBeNull();
		expect((await api(`/api/v1/audio-files/${file.id}`)).status).toBe(404);
		expect((await api(`/api/v1/audio-files/${file.id}`, { method: "DELETE" })).status).toBe(404);
	});

	it("answers 200 once the deletion is recorded, and the safety net removes bytes a failed removal left", async () => {
		const { api, client } = await signedInClient();
		const file = await registerFile(api, "a.wav", "audio/wav");
		expect((await upload(file, wav)).status).toBe(200);
		const kept = await registerFile(api, "b.wav", "audio/wav");
		expect((await upload(kept, wav)).status).toBe(200);
		// The removal's last step fails (D1 refusing the write that records it), after the bytes were listed.
		await runSql([
			`CREATE TRIGGER refuse_removal BEFORE UPDATE OF objects_removed_at ON audio_files WHEN NEW.id = '${file.id}'
			 BEGIN SELECT RAISE(ABORT, 'injected fault'); END;`,
		]);
		const response = await api(`/api/v1/audio-files/${file.id}`, { method: "DELETE" });
		expect(response.status).toBe(200);
		expect(await response.json()).toEqual({ success: true, data: { id: file.id, deleted: true } });
		expect((await api(`/api/v1/audio-files/${file.id}`)).status).toBe(404);
		// Bytes left under the file's key, as an R2 failure or an upload that streamed in meanwhile would leave them.
		const stray = `${objectKeyOf(client.accountId, file.id)}.upload-${crypto.randomUUID()}`;
		await env.BUCKET.put(stray, wav);
		await runSql(["DROP TRIGGER refuse_removal"]);

		const deletedAt = Date.parse(
			String(
				(await env.DB.prepare("SELECT deleted_at FROM audio_files WHERE id = ?").bind(file.id).first())?.deleted_at,
			),
		);
		// Not before an upload still streaming in could have removed its own bytes.
		const early = await runSafetyNet(env, new Date(deletedAt + 30 * 60 * 1000));
		expect(early.audioFileObjectsRemoved).toBe(0);
		expect(await env.BUCKET.head(stray)).not.toBeNull();
		const late = await runSafetyNet(env, new Date(deletedAt + 61 * 60 * 1000));
		expect(late.audioFileObjectsRemoved).toBeGreaterThanOrEqual(1);
		expect(await env.BUCKET.head(stray)).toBeNull();
		const row = await env.DB.prepare("SELECT objects_removed_at FROM audio_files WHERE id = ?").bind(file.id).first();
		expect(row?.objects_removed_at).toEqual(expect.any(String));
		// A file that was not deleted keeps its bytes.
		expect(await storedObject(client.accountId, kept.id)).not.toBeNull();
	});

	it("refuses with 409 while a conversion that is not finished uses the file, and allows it after", async () => {
		const { api, client } = await signedInClient();
		const file = await registerFile(api, "a.wav", "audio/wav");
		expect((await upload(file, wav)).status).toBe(200);
		for (const status of ["pending_preprocessing", "queued", "processing"]) {
			const conversionId = await insertConversion(client.accountId, file.id, status);
			const response = await api(`/api/v1/audio-files/${file.id}`, { method: "DELETE" });
			expect(response.status).toBe(409);
			expect(await response.json()).toMatchObject({
				code: "audio_file_in_use",
				message: expect.stringMatching(/conversion/),
			});
			await runSql([`UPDATE voice_conversions SET status = 'completed' WHERE id = '${conversionId}'`]);
		}
		expect(await storedObject(client.accountId, file.id)).not.toBeNull();
		await insertConversion(client.accountId, file.id, "failed");
		expect((await api(`/api/v1/audio-files/${file.id}`, { method: "DELETE" })).status).toBe(200);
		expect(await storedObject(client.accountId, file.id)).toBeNull();
	});

	it("refuses an upload to a deleted file's address", async () => {
		const { api, client } = await signedInClient();
		const file = await registerFile(api, "a.wav", "audio/wav");
		expect((await api(`/api/v1/audio-files/${file.id}`, { method: "DELETE" })).status).toBe(200);
		const response = await upload(file, wav);
		expect(response.status).toBe(410);
		expect(await response.json()).toMatchObject({ code: "audio_file_deleted" });
		expect(await storedObject(client.accountId, file.id)).toBeNull();
	});
});

describe("POST /api/v1/audio-files/{id}/regenerate-upload-url", () => {
	it("starts a new 30-minute window while the file awaits its upload", async () => {
		const { api } = await signedInClient();
		const file = await registerFile(api, "a.wav", "audio/wav");
		// As if the first window had run out.
		await runSql([`UPDATE audio_files SET upload_url_expires_at = '2020-01-01T00:00:00.000Z' WHERE id = '${file.id}'`]);
		const stale = await getFile(api, file.id);
		expect(
			(
				await put(stale.upload_url as string, wav, {
					"Content-Type": "audio/wav",
					"Content-Length": String(wav.byteLength),
				})
			).status,
		).toBe(403);

		const before = Date.now();
		const response = await api(`/api/v1/audio-files/${file.id}/regenerate-upload-url`, { method: "POST" });
		expect(response.status).toBe(200);
		const renewed = ((await response.json()) as { data: AudioFile }).data;
		const expiresAt = Date.parse(renewed.upload_url_expires_at);
		expect(expiresAt).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 30 * 60 * 1000);
		expect(expiresAt).toBeLessThanOrEqual(Date.now() + 30 * 60 * 1000);
		expect(renewed.upload_url).not.toBe(stale.upload_url);
		expect((await upload(renewed, wav)).status).toBe(200);
	});

	it("retires every earlier address: only the newest one uploads, older ones get 403", async () => {
		const { api, client } = await signedInClient();
		const file = await registerFile(api, "a.wav", "audio/wav");
		// An address signed as before generations existed (no `gen`) counts as generation 0 and works until regenerated.
		const unversioned = await signStorageUrl(env, ORIGIN, {
			method: "PUT",
			key: objectKeyOf(client.accountId, file.id),
			expiresAt: new Date(file.upload_url_expires_at),
			contentType: "audio/wav",
			maxBytes: 100_000_000,
		});
		const addresses = [file.upload_url as string, unversioned];
		for (let i = 0; i < 2; i++) {
			// Within the same second as registration: the expiry alone would not tell the addresses apart.
			const response = await api(`/api/v1/audio-files/${file.id}/regenerate-upload-url`, { method: "POST" });
			expect(response.status).toBe(200);
			addresses.push(((await response.json()) as { data: AudioFile }).data.upload_url as string);
		}
		const newest = addresses.at(-1) as string;
		expect(new Set(addresses).size).toBe(addresses.length);
		expect((await getFile(api, file.id)).upload_url).toBe(newest);
		const headers = { "Content-Type": "audio/wav", "Content-Length": String(wav.byteLength) };
		for (const old of addresses.slice(0, -1)) {
			const refused = await put(old, wav, headers);
			expect(refused.status, old).toBe(403);
			expect(await refused.json()).toMatchObject({
				success: false,
				code: "upload_url_superseded",
				message: expect.stringMatching(/replaced by a newer one/),
			});
		}
		expect(await storedObject(client.accountId, file.id)).toBeNull();
		expect((await put(newest, wav, headers)).status).toBe(200);
		expect((await getFile(api, file.id)).upload_status).toBe("uploaded");
	});

	it("keeps the generation signed in: changing it in an address breaks the signature", async () => {
		const { api } = await signedInClient();
		const file = await registerFile(api, "a.wav", "audio/wav");
		await api(`/api/v1/audio-files/${file.id}/regenerate-upload-url`, { method: "POST" });
		const stale = new URL(file.upload_url as string);
		expect(stale.searchParams.get("gen")).toBe("0");
		for (const forged of ["1", "01", "1e0", "-1", ""]) {
			stale.searchParams.set("gen", forged);
			const response = await put(stale.toString(), wav, {
				"Content-Type": "audio/wav",
				"Content-Length": String(wav.byteLength),
			});
			expect(response.status, forged).toBe(403);
			expect(await response.json()).toMatchObject({ code: "signature_invalid" });
		}
	});

	it("is a 409 once the file is uploaded", async () => {
		const { api } = await signedInClient();
		const file = await registerFile(api, "a.wav", "audio/wav");
		expect((await upload(file, wav)).status).toBe(200);
		const response = await api(`/api/v1/audio-files/${file.id}/regenerate-upload-url`, { method: "POST" });
		expect(response.status).toBe(409);
		expect(await response.json()).toMatchObject({ code: "already_uploaded" });
	});
});

describe("OpenAPI document", () => {
	it("describes the audio file operations", async () => {
		const doc = (await (await call("/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
		expect(Object.keys(doc.paths["/api/v1/audio-files"] ?? {}).sort()).toEqual(["get", "post"]);
		expect(Object.keys(doc.paths["/api/v1/audio-files/{id}"] ?? {}).sort()).toEqual(["delete", "get"]);
		expect(doc.paths["/api/v1/audio-files/{id}/regenerate-upload-url"]).toHaveProperty("post");
	});

	it("documents why preprocessing and conversions fail, including the source limits and NaN samples", async () => {
		const text = await (await call("/openapi.json")).text();
		expect(text).toContain("a sample rate outside 4,000 to 768,000 Hz or more than 32 channels");
		expect(text).toContain("NaN or infinite samples in a float WAV");
		expect(text).toContain("an MP3 cut short reports the frames it still has");
	});
});
