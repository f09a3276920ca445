/** The client-facing conversion endpoints: creation rules, the object at each status, listing, tenant isolation. */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { PITCH_SHIFT_SEMITONES, PITCH_SHIFTS, VoiceConversion } from "../../src/contracts/voice-conversions.ts";
import { insertConversion } from "../../src/conversions/conversion-store.ts";
import { FAILURE_MESSAGES } from "../../src/conversions/failure-messages.ts";
import {
	eventsFor,
	finishPreprocessing,
	insertAudioFile,
	insertVoice,
	json,
	resetBroker,
	runner,
	user,
} from "./conversion-fixtures.ts";

beforeEach(resetBroker);

describe("POST /api/v1/voice-conversions", () => {
	it("creates the full object in pending_preprocessing with the defaults", async () => {
		const alice = await user();
		const voiceId = await insertVoice({ name: "Basso" });
		const file = await insertAudioFile(alice.accountId, "pending");
		const response = await alice.create({ audio_file_id: file.id, voice_model_id: voiceId });
		expect(response.status).toBe(201);
		const { data } = await json<{ success: boolean; data: Record<string, unknown> }>(response);
		expect(VoiceConversion.parse(data)).toEqual(data);
		expect(Object.keys(data).sort()).toEqual(
			[
				"id",
				"audio_file_id",
				"audio_file_name",
				"voice_model_id",
				"voice_model_name",
				"pitch_shift",
				"pitch_shift_applied",
				"use_preview",
				"voice_settings",
				"status",
				"output_url",
				"created_at",
				"queued_at",
				"processing_started_at",
				"completed_at",
				"error_message",
			].sort(),
		);
		expect(data).toMatchObject({
			status: "pending_preprocessing",
			pitch_shift: "same_octave",
			pitch_shift_applied: "same_octave",
			use_preview: false,
			voice_settings: null,
			voice_model_name: "Basso",
			output_url: null,
			queued_at: null,
			processing_started_at: null,
			completed_at: null,
			error_message: null,
		});
		expect(data.audio_file_name).toMatch(/^take-.*\.wav$/);
		// `voice_settings: null`, as the conversion shows it, is accepted back as none.
		const again = await alice.create({ audio_file_id: file.id, voice_model_id: voiceId, voice_settings: null });
		expect(again.status).toBe(201);
		expect((await json<{ data: Record<string, unknown> }>(again)).data).toMatchObject({ voice_settings: null });
	});

	it("accepts every pitch value of the spec table and refuses others, listing them", async () => {
		const alice = await user();
		const voiceId = await insertVoice();
		const file = await insertAudioFile(alice.accountId, "pending");
		expect(PITCH_SHIFT_SEMITONES).toEqual({
			same_octave: 0,
			third_down: -4,
			third_up: 4,
			fifth_down: -7,
			fifth_up: 7,
			lower_octave: -12,
			higher_octave: 12,
		});
		for (const pitch of PITCH_SHIFTS) {
			const created = await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: pitch });
			expect(created.pitch_shift).toBe(pitch);
		}
		const response = await alice.create({ audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "octave_up" });
		expect(response.status).toBe(400);
		const body = await json<{ message: string; errors: { field: string; message: string }[] }>(response);
		expect(body.errors[0]?.field).toBe("pitch_shift");
		for (const pitch of PITCH_SHIFTS) expect(body.message).toContain(pitch);
	});

	it.each([
		["a missing audio_file_id", { audio_file_id: undefined }, "audio_file_id"],
		["a malformed voice_model_id", { voice_model_id: "abc" }, "voice_model_id"],
		["a non-boolean use_preview", { use_preview: "yes" }, "use_preview"],
	])("answers 400 for %s", async (_name, override, field) => {
		const alice = await user();
		const body = { audio_file_id: crypto.randomUUID(), voice_model_id: crypto.randomUUID(), ...override };
		const response = await alice.create(body);
		expect(response.status).toBe(400);
		const problem = await json<{ success: boolean; errors: { field: string }[] }>(response);
		expect(problem.success).toBe(false);
		expect(problem.errors.map((e) => e.field)).toContain(field);
	});

	it("answers 404 for another account's audio file and for an unknown voice", async () => {
		const alice = await user();
		const bob = await user();
		const voiceId = await insertVoice();
		const bobsFile = await insertAudioFile(bob.accountId, "ready");
		const notMine = await alice.create({ audio_file_id: bobsFile.id, voice_model_id: voiceId });
		expect(notMine.status).toBe(404);
		expect(await json(notMine)).toMatchObject({ success: false, code: "not_found" });
		const mine = await insertAudioFile(alice.accountId, "ready");
		const noVoice = await alice.create({ audio_file_id: mine.id, voice_model_id: crypto.randomUUID() });
		expect(noVoice.status).toBe(404);
		expect(((await json(noVoice)) as { message: string }).message).toMatch(/voice/i);
	});

	it("accepts a file whose preprocessing already failed, and fails the conversion at once as if it had failed later", async () => {
		const alice = await user();
		const voiceId = await insertVoice();
		const published = vi.spyOn(env.WEBHOOK_EVENTS_QUEUE, "send");
		// Failed before the conversion exists.
		const failedFile = await insertAudioFile(alice.accountId, "pending");
		await finishPreprocessing(alice.accountId, failedFile.id, "failed");
		const response = await alice.create({ audio_file_id: failedFile.id, voice_model_id: voiceId });
		expect(response.status).toBe(201);
		const { data: before } = await json<{ data: VoiceConversion }>(response);
		expect(before).toMatchObject({ status: "pending_preprocessing", error_message: null });
		// Failed after the conversion was created: the path the spec describes.
		const laterFile = await insertAudioFile(alice.accountId, "pending");
		const after = await alice.convert({ audio_file_id: laterFile.id, voice_model_id: voiceId });
		await finishPreprocessing(alice.accountId, laterFile.id, "failed");

		const [early, late] = [await alice.get(before.id), await alice.get(after.id)];
		expect(early).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES.unsupported_format });
		expect(late).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES.unsupported_format });
		for (const conversion of [early, late]) {
			const events = await eventsFor(conversion.id);
			expect(events.map((e) => e.type)).toEqual(["conversion.failed"]);
			expect(events[0]?.payload.conversion).toMatchObject({
				id: conversion.id,
				status: "failed",
				error_message: FAILURE_MESSAGES.unsupported_format,
			});
			expect(published).toHaveBeenCalledWith({ event_id: events[0]?.id }, { contentType: "json" });
		}
		published.mockRestore();
	});

	it("accepts no conversion whose source was deleted after the request found it", async () => {
		const alice = await user();
		const voiceId = await insertVoice();
		const file = await insertAudioFile(alice.accountId, "ready");
		// The create handler found the file; the DELETE (refused only while a conversion uses the file) lands before
		// its insert: nothing is inserted, and the handler answers 404 as for a file deleted before the request.
		expect((await alice.api(`/api/v1/audio-files/${file.id}`, { method: "DELETE" })).status).toBe(200);
		const request = { audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "same_octave" as const };
		const body = { ...request, use_preview: false, audioFileName: "take.wav", voiceModelName: "Voice" };
		expect(await insertConversion(env, alice.accountId, body)).toBeNull();
		const rows = await env.DB.prepare("SELECT id FROM voice_conversions WHERE audio_file_id = ?").bind(file.id).all();
		expect(rows.results).toEqual([]);
		const response = await alice.create(request);
		expect(response.status).toBe(404);
		expect(await json(response)).toMatchObject({ code: "not_found", message: expect.stringContaining("Audio file") });
	});

	it("queues at once when the file is already ready, and sends the job to the broker", async () => {
		const alice = await user();
		const worker = await runner();
		const file = await insertAudioFile(alice.accountId, "ready");
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: await insertVoice() });
		expect(created.status).toBe("pending_preprocessing");
		const now = await alice.get(created.id);
		expect(now.status).toBe("queued");
		expect(Date.parse(now.queued_at!) - Date.parse(now.created_at)).toBeLessThan(1_000);
		// The real queue message reaches the broker (no scan); a long-polling runner gets it.
		const lease = await worker.leaseOne({ wait_seconds: 10 });
		expect(lease.conversion_id).toBe(created.id);
		expect((await worker.finish(lease)).status).toBe(200);
	});
});

describe("ids in upper case", () => {
	it("name the same resources as in lower case, in paths and in bodies", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "pending");
		const voiceId = await insertVoice();
		const created = await alice.convert({
			audio_file_id: file.id.toUpperCase(),
			voice_model_id: voiceId.toUpperCase(),
		});
		expect(created).toMatchObject({ audio_file_id: file.id, voice_model_id: voiceId });
		const got = await alice.api(`/api/v1/voice-conversions/${created.id.toUpperCase()}`);
		expect(got.status).toBe(200);
		expect((await json<{ data: { id: string } }>(got)).data.id).toBe(created.id);
		expect((await alice.api(`/api/v1/audio-files/${file.id.toUpperCase()}`)).status).toBe(200);
		expect((await alice.api(`/api/v1/voices/${voiceId.toUpperCase()}`)).status).toBe(200);
	});
});

describe("GET /api/v1/voice-conversions/{id} and the list", () => {
	it("hides another account's conversion behind a 404", async () => {
		const alice = await user();
		const bob = await user();
		const file = await insertAudioFile(alice.accountId, "pending");
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: await insertVoice() });
		expect((await bob.api(`/api/v1/voice-conversions/${created.id}`)).status).toBe(404);
		expect((await alice.api(`/api/v1/voice-conversions/${crypto.randomUUID()}`)).status).toBe(404);
		expect((await alice.api("/api/v1/voice-conversions/not-a-uuid")).status).toBe(404);
		const list = await json<{ data: unknown[] }>(await bob.api("/api/v1/voice-conversions"));
		expect(list.data).toEqual([]);
	});

	it("lists newest first with a status filter, a limit and a cursor", async () => {
		const alice = await user();
		const voiceId = await insertVoice();
		const pending = await insertAudioFile(alice.accountId, "pending");
		const ids: string[] = [];
		for (let i = 0; i < 5; i++)
			ids.push((await alice.convert({ audio_file_id: pending.id, voice_model_id: voiceId })).id);
		// One of them fails, so the filter has something to tell apart.
		await env.DB.prepare(
			"UPDATE voice_conversions SET status = 'failed', error_message = 'x', failed_at = updated_at WHERE id = ?",
		)
			.bind(ids[1])
			.run();

		const seen: string[] = [];
		let cursor: string | null = null;
		let pages = 0;
		do {
			const query: string = cursor ? `?limit=2&cursor=${encodeURIComponent(cursor)}` : "?limit=2";
			const page = await json<{ data: { id: string }[]; next_cursor: string | null }>(
				await alice.api(`/api/v1/voice-conversions${query}`),
			);
			expect(page.data.length).toBeLessThanOrEqual(2);
			seen.push(...page.data.map((c) => c.id));
			cursor = page.next_cursor;
			pages++;
		} while (cursor && pages < 10);
		// Newest first; rows created in the same millisecond are ordered by id, as the cursor is.
		const expected = await env.DB.prepare(
			"SELECT id FROM voice_conversions WHERE account_id = ? ORDER BY created_at DESC, id DESC",
		)
			.bind(alice.accountId)
			.all<{ id: string }>();
		expect(seen).toEqual(expected.results.map((row) => row.id));
		expect(new Set(seen)).toEqual(new Set(ids));
		expect(pages).toBe(3);

		const failed = await json<{ data: { id: string; status: string }[] }>(
			await alice.api("/api/v1/voice-conversions?status=failed"),
		);
		expect(failed.data.map((c) => c.id)).toEqual([ids[1]]);
		const bad = await alice.api("/api/v1/voice-conversions?status=done");
		expect(bad.status).toBe(400);
		expect(((await json(bad)) as { message: string }).message).toContain("pending_preprocessing");
		expect((await alice.api("/api/v1/voice-conversions?limit=0")).status).toBe(400);
		expect((await alice.api("/api/v1/voice-conversions?limit=101")).status).toBe(400);
		expect((await alice.api("/api/v1/voice-conversions?cursor=garbage")).status).toBe(400);
	});
});

describe("OpenAPI", () => {
	it("documents the conversion endpoints, with Idempotency-Key on creation, and hides the runner API", async () => {
		const alice = await user();
		const doc = await json<{ paths: Record<string, Record<string, { parameters?: { name: string }[] }>> }>(
			await alice.api("/openapi.json"),
		);
		expect(Object.keys(doc.paths)).toEqual(
			expect.arrayContaining(["/api/v1/voice-conversions", "/api/v1/voice-conversions/{id}"]),
		);
		expect(doc.paths["/api/v1/voice-conversions"]?.post?.parameters?.map((p) => p.name)).toContain("Idempotency-Key");
		expect(Object.keys(doc.paths).some((path) => path.startsWith("/internal"))).toBe(false);
	});
});
