/**
 * Account voices through the real Worker (D1, R2, the JobBroker): create, upload in one PUT and in parts, the checks
 * on the bytes, validation as a `validate_voice` lease, the outcome and its event, conversions with the voice, other
 * accounts, limits, and deletion while a conversion runs.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import type { JobBroker } from "../../durable-objects/job-broker.ts";
import { LeaseResponse } from "../../src/contracts/runner.ts";
import type { VoiceUpload } from "../../src/contracts/voices.ts";
import { insertConversion } from "../../src/conversions/conversion-store.ts";
import { runSafetyNet } from "../../src/cron/safety-net.ts";
import {
	askForWork,
	bytesOf,
	createVoice,
	declare,
	INDEX,
	MODEL,
	type Owner,
	type Problem,
	readyReport,
	upload,
	uploadedVoice as uploadedVoiceWith,
	type Voice,
	validationLease,
} from "./account-voice-helpers.ts";
import { heldBody } from "./audio-files-helpers.ts";
import {
	broker,
	deliverJobs,
	insertAudioFile,
	insertVoice,
	json,
	resetBroker,
	runner,
	user,
} from "./conversion-fixtures.ts";
import { call, keysUnder } from "./helpers.ts";

beforeEach(async () => {
	await resetBroker();
});

const PNG = bytesOf([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 2_000);

const READY_REPORT = (sha: string) => ({
	outcome: "ready",
	files: [
		{ role: "model", sha256: sha, size_bytes: MODEL.byteLength },
		{ role: "index", sha256: "b".repeat(64), size_bytes: INDEX.byteLength },
	],
	model: { sample_rate: 40_000, f0: true, feature_dim: 768, version: "v2" },
	pitch_range_hz: { low: 150, high: 300 },
});

/** A voice created, uploaded (model in parts, index in one PUT) and now `validating`. */
const uploadedVoice = (owner: Owner) => uploadedVoiceWith(owner, { model: MODEL, index: INDEX }, { index_rate: 0.5 });

async function readyVoice(owner: Owner) {
	const voice = await uploadedVoice(owner);
	const { lease, worker } = await validationLease(voice.id);
	const report = await worker.post(
		`/internal/v1/leases/${lease.lease_id}/voice-validation`,
		READY_REPORT("a".repeat(64)),
	);
	expect(report.status).toBe(200);
	return voice;
}

describe("account voices", () => {
	it("creates, uploads in one PUT and in parts, validates through a lease, and announces voice.ready", async () => {
		const alice = await user();
		const response = await createVoice(alice, {
			tags: ["mine"],
			description: "my singing voice",
			voice_settings: { index_rate: 0.5, protect: 0.4 },
			files: declare({ model: MODEL, index: INDEX, image: PNG }),
		});
		expect(response.status).toBe(201);
		const voice = (await json<{ data: Voice }>(response)).data;
		expect(voice).toMatchObject({ owner: "account", status: "awaiting_upload", description: "my singing voice" });
		expect(voice.voice_settings).toEqual({ index_rate: 0.5, protect: 0.4 });
		// 150 kB is over the (test) single-upload limit: parts; the others go in one PUT.
		expect(voice.uploads.model?.method).toBe("parts");
		expect(voice.uploads.index?.method).toBe("PUT");

		expect((await upload(alice, voice.uploads.model as VoiceUpload, MODEL)).status).toBe(200);
		expect((await upload(alice, voice.uploads.index as VoiceUpload, INDEX)).status).toBe(200);
		let current = (await json<{ data: Voice }>(await alice.api(`/api/v1/voices/${voice.id}`))).data;
		expect(current.status).toBe("awaiting_upload");
		expect((await upload(alice, voice.uploads.image as VoiceUpload, PNG)).status).toBe(200);
		current = (await json<{ data: Voice }>(await alice.api(`/api/v1/voices/${voice.id}`))).data;
		expect(current.status).toBe("validating");
		expect(current.files).toMatchObject({
			model: { upload_status: "uploaded", kind: "rvc_checkpoint", size_bytes: MODEL.byteLength },
			index: { upload_status: "uploaded", kind: "faiss_index" },
			image: { upload_status: "uploaded", kind: "png" },
		});

		const { lease, worker } = await validationLease(voice.id);
		expect(lease.files.map((file) => file.role).sort()).toEqual(["image", "index", "model"]);
		expect(lease.voice_settings).toEqual({ index_rate: 0.5, protect: 0.4 });
		const model = lease.files.find((file) => file.role === "model");
		const downloaded = new Uint8Array(await (await call(model?.url ?? "")).arrayBuffer());
		expect(downloaded).toEqual(MODEL);

		const report = await worker.post(
			`/internal/v1/leases/${lease.lease_id}/voice-validation`,
			READY_REPORT("c".repeat(64)),
		);
		expect(report.status).toBe(200);
		current = (await json<{ data: Voice }>(await alice.api(`/api/v1/voices/${voice.id}`))).data;
		expect(current).toMatchObject({ status: "ready", error_message: null, pitch_range_hz: { low: 150, high: 300 } });
		expect(current.image_url).toEqual(expect.stringContaining("/storage/v1/"));

		const events = await env.DB.prepare("SELECT type, account_id, payload FROM events WHERE subject_id = ?")
			.bind(voice.id)
			.all<{ type: string; account_id: string; payload: string }>();
		expect(events.results).toHaveLength(1);
		expect(events.results[0]).toMatchObject({ type: "voice.ready", account_id: alice.accountId });
		expect(JSON.parse(events.results[0]?.payload ?? "{}").voice).toMatchObject({ id: voice.id, status: "ready" });

		// The voice now converts, and its lease carries the uploaded model as the synthesizer with the runner's sha256.
		const file = await insertAudioFile(alice.accountId, "ready");
		const conversion = await alice.convert({ audio_file_id: file.id, voice_model_id: voice.id });
		await deliverJobs([conversion.id]);
		const [granted] = await worker.lease({ engines: ["rvc"], wait_seconds: 5 });
		expect(granted?.conversion_id).toBe(conversion.id);
		// The model's facts as validation read them: feature_dim picks the ContentVec its leases get.
		expect(granted?.voice.params).toMatchObject({ sample_rate: 40_000, index_rate: 0.5, f0: true, feature_dim: 768 });
		expect(granted?.voice.artifacts.find((a) => a.name === "synthesizer")?.sha256).toBe("c".repeat(64));
		expect(granted?.voice.pitch_range_hz).toEqual({ low: 150, high: 300 });
		// An account's voice: a runner runs its uploaded ONNX synthesizer in a process it can stop at its limits.
		expect(granted?.voice.account_voice).toBe(true);
	});

	it("lists the service's voices and only the caller's own, filtered by owner and status", async () => {
		const alice = await user();
		const bob = await user();
		const service = await insertVoice({ name: `Service ${crypto.randomUUID().slice(0, 6)}` });
		const mine = await uploadedVoice(alice);
		const theirs = await uploadedVoice(bob);
		const list = async (query = "") =>
			(await json<{ data: { id: string; owner: string }[] }>(await alice.api(`/api/v1/voices${query}`))).data;
		const ids = (await list()).map((voice) => voice.id);
		expect(ids).toContain(service);
		expect(ids).toContain(mine.id);
		expect(ids).not.toContain(theirs.id);
		expect((await list("?owner=account")).map((voice) => voice.id)).toEqual([mine.id]);
		expect((await list("?owner=service")).every((voice) => voice.owner === "service")).toBe(true);
		expect((await list("?status=validating")).map((voice) => voice.id)).toEqual([mine.id]);
	});

	it("answers 404 for another account's voice everywhere", async () => {
		const alice = await user();
		const bob = await user();
		const voice = await readyVoice(bob);
		for (const [method, body] of [
			["GET", undefined],
			["PATCH", { name: "stolen" }],
			["DELETE", undefined],
		] as const) {
			const response = await alice.api(`/api/v1/voices/${voice.id}`, {
				method,
				...(body ? { headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) } : {}),
			});
			expect(response.status).toBe(404);
			expect(await json<Problem>(response)).toMatchObject({ success: false, message: "Voice model not found" });
		}
		const file = await insertAudioFile(alice.accountId, "ready");
		const convert = await alice.create({ audio_file_id: file.id, voice_model_id: voice.id });
		expect(convert.status).toBe(404);
		const complete = await alice.api(`/api/v1/voices/${voice.id}/files/model/complete`, { method: "POST" });
		expect(complete.status).toBe(404);
	});

	it("refuses a conversion with a voice not ready yet (409) and with a failed one, naming why", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const created = (await json<{ data: Voice }>(await createVoice(alice, { files: declare({ model: MODEL }) }))).data;
		let response = await alice.create({ audio_file_id: file.id, voice_model_id: created.id });
		expect(response.status).toBe(409);
		expect(await json<Problem>(response)).toMatchObject({
			code: "voice_not_ready",
			message: expect.stringContaining("is not ready yet (status awaiting_upload)"),
		});

		const voice = await uploadedVoice(alice);
		response = await alice.create({ audio_file_id: file.id, voice_model_id: voice.id });
		expect(response.status).toBe(409);
		expect((await json<Problem>(response)).message).toContain("status validating");

		const { lease, worker } = await validationLease(voice.id);
		const message =
			"The index holds 256-wide features but the model reads 768-wide ones (an RVC v2 model needs a v2 index)";
		await worker.post(`/internal/v1/leases/${lease.lease_id}/voice-validation`, {
			outcome: "failed",
			problem: "index_width_mismatch",
			message,
		});
		const failed = (await json<{ data: Voice }>(await alice.api(`/api/v1/voices/${voice.id}`))).data;
		expect(failed).toMatchObject({ status: "failed", error_message: message });
		const event = await env.DB.prepare("SELECT type FROM events WHERE subject_id = ?").bind(voice.id).first();
		expect(event).toEqual({ type: "voice.failed" });
		response = await alice.create({ audio_file_id: file.id, voice_model_id: voice.id });
		expect(response.status).toBe(409);
		expect((await json<Problem>(response)).message).toContain(message);
	});

	it("takes a validation failure with a long message, shortened, and still refuses a malformed report", async () => {
		const alice = await user();
		const voice = await uploadedVoice(alice);
		const { lease, worker } = await validationLease(voice.id);
		const report = (body: unknown) => worker.post(`/internal/v1/leases/${lease.lease_id}/voice-validation`, body);
		for (const body of [
			{ outcome: "failed", problem: "self_test", message: "" },
			{ outcome: "failed", message: "no problem named" },
			{ outcome: "broken", problem: "self_test", message: "m" },
		]) {
			expect((await report(body)).status).toBe(400);
		}
		// An engine's error quoted whole (an ONNX Runtime message runs to thousands of characters).
		const message = `The model file cannot be used: Converting a test second failed: ${"node Gather: index out of range; ".repeat(60)}`;
		const answer = await report({ outcome: "failed", problem: "self_test", message });
		expect(answer.status).toBe(200);
		const failed = (await json<{ data: Voice }>(await alice.api(`/api/v1/voices/${voice.id}`))).data;
		expect(failed.status).toBe("failed");
		expect(failed.error_message).toHaveLength(1000);
		expect(failed.error_message).toBe(`${message.slice(0, 999)}…`);
	});

	it("refuses a ready report that leaves out the model or the index, or names files the voice does not hold", async () => {
		const alice = await user();
		const voice = await uploadedVoice(alice);
		const { lease, worker } = await validationLease(voice.id);
		const report = (files: unknown[]) =>
			worker.post(`/internal/v1/leases/${lease.lease_id}/voice-validation`, { ...readyReport(true), files });
		const model = { role: "model", sha256: "a".repeat(64), size_bytes: MODEL.byteLength };
		const index = { role: "index", sha256: "b".repeat(64), size_bytes: INDEX.byteLength };
		for (const [files, words] of [
			[[index], "leaves out the voice's model"],
			[[], "leaves out the voice's model"],
			[[model], "leaves out the voice's index"],
			[[model, index, { role: "image", sha256: "c".repeat(64), size_bytes: 10 }], "holds no image file"],
			[[model, index, model], "names the model twice"],
			[[{ ...model, size_bytes: 12 }, index], "the stored file has 150000"],
		] as const) {
			const refused = await report([...files]);
			expect(refused.status).toBe(400);
			const problem = await json<Problem>(refused);
			expect(problem).toMatchObject({ success: false, code: "invalid_request" });
			expect(problem.message).toContain(words);
		}
		// Nothing was applied: the voice still validates under the same lease, which the runner still holds.
		const still = (await json<{ data: Voice }>(await alice.api(`/api/v1/voices/${voice.id}`))).data;
		expect(still).toMatchObject({ status: "validating", error_message: null });
		expect((await worker.heartbeat(lease.lease_id)).status).toBe(200);
		const events = await env.DB.prepare("SELECT type FROM events WHERE subject_id = ?").bind(voice.id).all();
		expect(events.results).toEqual([]);
		// The report a runner makes of both files is taken.
		const taken = await report([model, index]);
		expect(taken.status).toBe(200);
		expect((await json<{ data: unknown }>(taken)).data).toEqual({ voice_id: voice.id, status: "ready" });
		const ready = await env.DB.prepare("SELECT artifacts FROM voices WHERE id = ?")
			.bind(voice.id)
			.first<{ artifacts: string }>();
		expect(JSON.parse(ready?.artifacts ?? "[]").map((artifact: { name: string }) => artifact.name)).toEqual([
			"synthesizer",
			"index",
		]);
	});

	it("keeps the upload it took when two go through one file's address at once, and nothing of the other", async () => {
		const alice = await user();
		const slow = MODEL.subarray(0, 3000);
		const response = await createVoice(alice, { files: declare({ model: slow }) });
		const voice = (await json<{ data: Voice }>(response)).data;
		const address = (voice.uploads.model as VoiceUpload & { method: "PUT" }).upload_url;
		const held = heldBody(slow, 1000);
		const slowResponse = call(address, {
			method: "PUT",
			headers: { "Content-Length": String(slow.byteLength) },
			body: held.stream,
		});
		await held.started;
		// Another file of the declared size: the one that finishes first is taken.
		const fast = MODEL.slice(0, slow.byteLength).fill(7, 64);
		expect((await upload(alice, voice.uploads.model as VoiceUpload, fast)).status).toBe(200);
		held.release();
		expect((await slowResponse).status).toBe(409);
		const keys = await keysUnder(`account-voices/${voice.id}/`);
		expect(keys).toHaveLength(1);
		const stored = await env.BUCKET.get(keys[0] as string);
		expect(new Uint8Array(await (stored as R2ObjectBody).arrayBuffer())).toEqual(fast);
		const row = await env.DB.prepare("SELECT object_key, size_bytes FROM voice_files WHERE voice_id = ?")
			.bind(voice.id)
			.first();
		expect(row).toEqual({ object_key: keys[0], size_bytes: fast.byteLength });
	});

	it("takes the right parts again after refusing a file completed from wrong ones", async () => {
		const alice = await user();
		const voice = (await json<{ data: Voice }>(await createVoice(alice, { files: declare({ model: MODEL }) }))).data;
		const plan = voice.uploads.model as VoiceUpload;
		expect(plan.method).toBe("parts");
		const refused = await upload(alice, plan, bytesOf("this is not a model", MODEL.byteLength));
		expect(refused.status).toBe(415);
		expect(await json<Problem>(refused)).toMatchObject({ code: "voice_file_unrecognised" });
		// The same addresses take the right parts, and the file completes.
		const completed = await upload(alice, plan, MODEL);
		expect(completed.status).toBe(200);
		const file = await env.DB.prepare("SELECT upload_status, size_bytes FROM voice_files WHERE voice_id = ?")
			.bind(voice.id)
			.first();
		expect(file).toEqual({ upload_status: "uploaded", size_bytes: MODEL.byteLength });
		const stored = await env.BUCKET.get(`account-voices/${voice.id}/model`);
		expect(new Uint8Array(await (stored as R2ObjectBody).arrayBuffer())).toEqual(MODEL);
	});

	it("tells an upload over its address's size what to do: the file's limit, or declaring the real size", async () => {
		const alice = await user();
		const voice = (
			await json<{ data: Voice }>(
				await createVoice(alice, {
					files: { model: { file_name: "m.pth", size_bytes: 1000 }, image: { file_name: "i.png", size_bytes: 1000 } },
				}),
			)
		).data;
		const declaredTooSmall = await call((voice.uploads.model as VoiceUpload & { method: "PUT" }).upload_url, {
			method: "PUT",
			headers: { "Content-Length": String(MODEL.byteLength) },
			body: MODEL,
		});
		expect(declaredTooSmall.status).toBe(413);
		expect(await json<Problem>(declaredTooSmall)).toMatchObject({
			code: "payload_too_large",
			message: expect.stringMatching(
				/larger than its declared size_bytes.*create it again declaring the file's real size/,
			),
		});
		const image = bytesOf([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 10_000_001);
		const overLimit = await call((voice.uploads.image as VoiceUpload & { method: "PUT" }).upload_url, {
			method: "PUT",
			headers: { "Content-Length": String(image.byteLength) },
			body: image,
		});
		expect(overLimit.status).toBe(413);
		expect((await json<Problem>(overLimit)).message).toBe(
			"The image file must be at most 10000000 bytes; this one has 10000001",
		);
	});

	it("takes a voice file only at its declared size: another size is refused at upload, keeping nothing", async () => {
		const alice = await user();
		const response = await createVoice(alice, { files: declare({ model: MODEL, index: INDEX }) });
		const voice = (await json<{ data: Voice }>(response)).data;
		const mismatch = (status: number, message: RegExp) => ({ status, code: "voice_file_size_mismatch", message });
		const refusal = async (answer: Response) => ({ status: answer.status, ...(await json<Problem>(answer)) });
		// One PUT: smaller and larger than declared (both under the address's limit) are refused before storing.
		for (const bytes of [INDEX.subarray(0, 30_000), bytesOf("IwFl", 45_000)]) {
			expect(await refusal(await upload(alice, voice.uploads.index as VoiceUpload, bytes))).toMatchObject(
				mismatch(400, new RegExp(`index file has ${bytes.byteLength} bytes.*size_bytes ${INDEX.byteLength}`)),
			);
		}
		// In parts: the last part of another size than the declaration leaves it.
		const plan = voice.uploads.model as VoiceUpload & { method: "parts" };
		const short = MODEL.subarray(0, 120_000);
		const part = await call(plan.parts[0]?.upload_url ?? "", {
			method: "PUT",
			headers: { "Content-Length": String(short.byteLength) },
			body: short,
		});
		expect(await refusal(part)).toMatchObject(mismatch(400, /Part 1 of the model file must have 150000 bytes/));
		expect(await keysUnder(`account-voices/${voice.id}/`)).toEqual([]);
		const current = (await json<{ data: Voice }>(await alice.api(`/api/v1/voices/${voice.id}`))).data;
		expect(current).toMatchObject({
			status: "awaiting_upload",
			files: {
				model: { upload_status: "awaiting_upload", size_bytes: MODEL.byteLength },
				index: { upload_status: "awaiting_upload", size_bytes: INDEX.byteLength },
			},
		});
		// The same addresses then take the declared files, and validation starts.
		expect((await upload(alice, voice.uploads.index as VoiceUpload, INDEX)).status).toBe(200);
		expect((await upload(alice, plan, MODEL)).status).toBe(200);
		const uploaded = (await json<{ data: Voice }>(await alice.api(`/api/v1/voices/${voice.id}`))).data;
		expect(uploaded.status).toBe("validating");
	});

	it("answers a part still arriving when its voice is deleted with 410, not with a resend", async () => {
		const alice = await user();
		const voice = (await json<{ data: Voice }>(await createVoice(alice, { files: declare({ model: MODEL }) }))).data;
		const part = (voice.uploads.model as VoiceUpload & { method: "parts" }).parts[0];
		const held = heldBody(MODEL, 1000);
		const arriving = call(part?.upload_url as string, {
			method: "PUT",
			headers: { "Content-Length": String(MODEL.byteLength) },
			body: held.stream,
		});
		await held.started;
		expect((await alice.api(`/api/v1/voices/${voice.id}`, { method: "DELETE" })).status).toBe(200);
		held.release();
		const answer = await arriving;
		expect(answer.status).toBe(410);
		expect(await json<Problem>(answer)).toMatchObject({ code: "voice_deleted" });
	});

	it("refuses wrong bytes at upload with 415, keeping nothing, and takes the right file after", async () => {
		const alice = await user();
		const text = new TextEncoder().encode("this is not a model at all, just some text in a file named model.pth");
		const response = await createVoice(alice, {
			files: {
				model: { file_name: "model.pth", size_bytes: text.byteLength },
				image: { file_name: "i.png", size_bytes: 2_000 },
			},
		});
		const voice = (await json<{ data: Voice }>(response)).data;
		const put = await upload(alice, voice.uploads.model as VoiceUpload, text);
		expect(put.status).toBe(415);
		expect(await json<Problem>(put)).toMatchObject({
			code: "voice_file_unrecognised",
			message: expect.stringContaining(
				"The model file is not an RVC checkpoint (.pth) or an RVC synthesizer exported to ONNX",
			),
		});
		expect(await keysUnder(`account-voices/${voice.id}/`)).toEqual([]);
		// A PNG sent as the model is refused too: the role decides what is accepted.
		const png = PNG.subarray(0, text.byteLength);
		expect((await upload(alice, voice.uploads.model as VoiceUpload, png)).status).toBe(415);
		// Fresh addresses for what is still missing (the first ones last 30 minutes).
		const renewed = await alice.api(`/api/v1/voices/${voice.id}/upload-urls`, { method: "POST" });
		expect(renewed.status).toBe(200);
		const uploads = (await json<{ data: Voice }>(renewed)).data.uploads;
		expect(Object.keys(uploads).sort()).toEqual(["image", "model"]);
		const model = MODEL.subarray(0, text.byteLength);
		expect((await upload(alice, uploads.model as VoiceUpload, model)).status).toBe(200);
		const again = await upload(alice, voice.uploads.model as VoiceUpload, model);
		expect(again.status).toBe(409);
		expect((await upload(alice, uploads.image as VoiceUpload, PNG)).status).toBe(200);
		const done = await alice.api(`/api/v1/voices/${voice.id}/upload-urls`, { method: "POST" });
		expect(done.status).toBe(409);
	});

	it("retires the older upload addresses, single PUT and parts, when they are regenerated", async () => {
		const alice = await user();
		const response = await createVoice(alice, { files: declare({ model: MODEL, index: INDEX }) });
		const voice = (await json<{ data: Voice }>(response)).data;
		const first = voice.uploads;
		expect(first.model?.method).toBe("parts");
		expect(first.index?.method).toBe("PUT");
		const renewed = await alice.api(`/api/v1/voices/${voice.id}/upload-urls`, { method: "POST" });
		expect(renewed.status).toBe(200);
		const current = (await json<{ data: Voice }>(renewed)).data.uploads;

		const staleSingle = await upload(alice, first.index as VoiceUpload, INDEX);
		expect(staleSingle.status).toBe(403);
		expect(await json<Problem>(staleSingle)).toMatchObject({ success: false, code: "upload_url_superseded" });
		const stalePart = first.model?.method === "parts" ? first.model.parts[0] : undefined;
		const part = await call(stalePart?.upload_url ?? "", {
			method: "PUT",
			headers: { "Content-Length": "1000" },
			body: MODEL.subarray(0, 1000),
		});
		expect(part.status).toBe(403);
		expect(await json<Problem>(part)).toMatchObject({ success: false, code: "upload_url_superseded" });

		expect((await upload(alice, current.index as VoiceUpload, INDEX)).status).toBe(200);
		expect((await upload(alice, current.model as VoiceUpload, MODEL)).status).toBe(200);
	});

	it("holds the 50-voice limit under concurrent creation: at 49 voices exactly one more is made", async () => {
		const carol = await user();
		const existing = await Promise.all(
			Array.from({ length: 49 }, (_, i) => createVoice(carol, { name: `c${i}`, files: declare({ model: PNG }) })),
		);
		expect(existing.map((r) => r.status)).toEqual(Array(49).fill(201));
		const racing = await Promise.all(
			Array.from({ length: 6 }, (_, i) => createVoice(carol, { name: `race${i}`, files: declare({ model: PNG }) })),
		);
		expect(racing.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
		for (const refused of racing.filter((r) => r.status === 409)) {
			expect(await json<Problem>(refused)).toMatchObject({ success: false, code: "voice_limit_reached" });
		}
		const listed = await carol.api("/api/v1/voices?owner=account");
		expect((await json<{ data: unknown[] }>(listed)).data).toHaveLength(50);
	});

	it("refuses files over the limits, a missing part, and the 51st voice", async () => {
		const alice = await user();
		let response = await createVoice(alice, { files: { model: { file_name: "big.pth", size_bytes: 200_000_001 } } });
		expect(response.status).toBe(400);
		expect((await json<Problem>(response)).message).toContain("files.model.size_bytes");
		response = await createVoice(alice, {
			files: {
				model: { file_name: "m.pth", size_bytes: 10 },
				index: { file_name: "i.index", size_bytes: 1_000_000_001 },
			},
		});
		expect(response.status).toBe(400);
		expect((await json<Problem>(response)).message).toContain("1000 MB");
		response = await createVoice(alice, { files: { model: { file_name: "empty.pth", size_bytes: 0 } } });
		expect(response.status).toBe(400);
		expect((await json<Problem>(response)).errors).toContainEqual({
			field: "files.model.size_bytes",
			message: "must be at least 1 byte: the model file is empty",
		});

		const parts = (await json<{ data: Voice }>(await createVoice(alice, { files: declare({ model: MODEL }) }))).data;
		const complete = await alice.api(new URL((parts.uploads.model as { complete_url: string }).complete_url).pathname, {
			method: "POST",
		});
		expect(complete.status).toBe(400);
		expect(await json<Problem>(complete)).toMatchObject({
			code: "invalid_parts",
			message: expect.stringContaining("no part"),
		});

		const bob = await user();
		for (let i = 0; i < 50; i++) {
			expect((await createVoice(bob, { name: `v${i}`, files: declare({ model: PNG }) })).status).toBe(201);
		}
		response = await createVoice(bob, { files: declare({ model: PNG }) });
		expect(response.status).toBe(409);
		expect(await json<Problem>(response)).toMatchObject({ code: "voice_limit_reached" });
		response = await createVoice(alice, { name: "v1", files: declare({ model: PNG }) });
		expect(response.status).toBe(201);
		response = await createVoice(alice, { name: "v1", files: declare({ model: PNG }) });
		expect(response.status).toBe(409);
		expect(await json<Problem>(response)).toMatchObject({ code: "voice_name_taken" });
	});

	it("keeps names unique under Unicode normalisation: a name typed decomposed is the same name", async () => {
		const alice = await user();
		const [composed, decomposed] = ["Zo\u00eb", "Zoe\u0308"];
		// Stored and shown composed (NFC), however it was typed.
		const first = await createVoice(alice, { name: decomposed, files: declare({ model: PNG }) });
		expect(first.status).toBe(201);
		expect((await json<{ data: Voice }>(first)).data.name).toBe(composed);
		for (const name of [composed, decomposed]) {
			const again = await createVoice(alice, { name, files: declare({ model: PNG }) });
			expect(again.status).toBe(409);
			expect(await json<Problem>(again)).toMatchObject({ code: "voice_name_taken" });
		}
		const other = (await json<{ data: Voice }>(await createVoice(alice, { files: declare({ model: PNG }) }))).data;
		const renamed = await alice.api(`/api/v1/voices/${other.id}`, {
			method: "PATCH",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ name: decomposed }),
		});
		expect(renamed.status).toBe(409);
		expect(await json<Problem>(renamed)).toMatchObject({ code: "voice_name_taken" });
		// Another account's names are its own.
		expect((await createVoice(await user(), { name: composed, files: declare({ model: PNG }) })).status).toBe(201);
		// A name stored before names were composed (in the form it was typed) is the same name too; the voice that has
		// it may take it composed.
		const bob = await user();
		const old = (await json<{ data: Voice }>(await createVoice(bob, { files: declare({ model: PNG }) }))).data;
		await env.DB.prepare("UPDATE voices SET name = ? WHERE id = ?").bind("Ame\u0301lie", old.id).run();
		const clash = await createVoice(bob, { name: "Am\u00e9lie", files: declare({ model: PNG }) });
		expect(clash.status).toBe(409);
		expect(await json<Problem>(clash)).toMatchObject({ code: "voice_name_taken" });
		const rename = (id: string) =>
			bob.api(`/api/v1/voices/${id}`, {
				method: "PATCH",
				headers: { "Content-Type": "application/json" },
				body: JSON.stringify({ name: "Am\u00e9lie" }),
			});
		const second = (await json<{ data: Voice }>(await createVoice(bob, { files: declare({ model: PNG }) }))).data;
		expect((await rename(second.id)).status).toBe(409);
		const own = await rename(old.id);
		expect(own.status).toBe(200);
		expect((await json<{ data: Voice }>(own)).data.name).toBe("Am\u00e9lie");
		// The reference says so, where a client reads the name's rules.
		type Schema = { properties?: Record<string, Schema>; description?: string };
		type Operation = { requestBody: { content: Record<string, { schema: Schema }> } };
		const doc = await json<{ paths: Record<string, { post?: Operation; patch?: Operation }> }>(
			await alice.api("/openapi.json"),
		);
		for (const operation of [doc.paths["/api/v1/voices"]?.post, doc.paths["/api/v1/voices/{id}"]?.patch]) {
			const name = operation?.requestBody.content["application/json"]?.schema.properties?.name;
			expect(name?.description).toMatch(/voice_name_taken.*composed form \(NFC\)/);
		}
	});

	it("takes voice_settings null on creation as none", async () => {
		const alice = await user();
		const response = await createVoice(alice, { voice_settings: null, files: declare({ model: PNG }) });
		expect(response.status).toBe(201);
	});

	it("refuses names, tags and file names with control characters, on creation and on change", async () => {
		const alice = await user();
		const escaped = { model: { file_name: "model\u001b[2J.pth", size_bytes: PNG.byteLength } };
		for (const body of [
			{ name: "null\u0000byte", files: declare({ model: PNG }) },
			{ name: "Fine", tags: ["two\nlines"], files: declare({ model: PNG }) },
			{ name: "Fine", files: escaped },
		]) {
			const response = await createVoice(alice, body);
			expect(response.status).toBe(400);
			expect(await json<Problem>(response)).toMatchObject({
				code: "invalid_request",
				message: expect.stringContaining("must not contain control characters"),
			});
		}
		const voice = (await json<{ data: Voice }>(await createVoice(alice, { files: declare({ model: PNG }) }))).data;
		const renamed = await alice.api(`/api/v1/voices/${voice.id}`, {
			method: "PATCH",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ name: "tab\there" }),
		});
		expect(renamed.status).toBe(400);
	});

	it("changes name, tags, description and default settings", async () => {
		const alice = await user();
		const voice = await readyVoice(alice);
		const response = await alice.api(`/api/v1/voices/${voice.id}`, {
			method: "PATCH",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ name: "Renamed", tags: ["a"], description: null, voice_settings: { protect: 0.2 } }),
		});
		expect(response.status).toBe(200);
		expect((await json<{ data: Voice }>(response)).data).toMatchObject({
			name: "Renamed",
			tags: ["a"],
			description: null,
			voice_settings: { index_rate: 0.5, protect: 0.2 },
		});
		const bad = await alice.api(`/api/v1/voices/${voice.id}`, {
			method: "PATCH",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ voice_settings: { protect: 0.9 } }),
		});
		expect(bad.status).toBe(400);
		const unfit = await alice.api(`/api/v1/voices/${voice.id}`, {
			method: "PATCH",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ voice_settings: { formant_shift: 2 } }),
		});
		expect(unfit.status).toBe(400);
		expect(await json<Problem>(unfit)).toMatchObject({
			code: "unsupported_voice_setting",
			message: expect.stringContaining("voice_settings.formant_shift: rvc voices cannot shift formants"),
		});
		// Another of the account's voices has the name: 409, and nothing changes.
		const other = (
			await json<{ data: Voice }>(await createVoice(alice, { name: "Taken", files: declare({ model: PNG }) }))
		).data;
		const taken = await alice.api(`/api/v1/voices/${voice.id}`, {
			method: "PATCH",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ name: other.name, tags: ["b"] }),
		});
		expect(taken.status).toBe(409);
		expect(await json<Problem>(taken)).toMatchObject({
			code: "voice_name_taken",
			message: expect.stringContaining('You already have a voice named "Taken"'),
		});
		expect((await json<{ data: Voice }>(await alice.api(`/api/v1/voices/${voice.id}`))).data).toMatchObject({
			name: "Renamed",
			tags: ["a"],
		});
	});

	it("deletes softly: a running conversion finishes, new ones are refused, the files go afterwards", async () => {
		const alice = await user();
		const voice = await readyVoice(alice);
		const file = await insertAudioFile(alice.accountId, "ready");
		const conversion = await alice.convert({ audio_file_id: file.id, voice_model_id: voice.id });
		await deliverJobs([conversion.id]);
		const worker = await runner();
		const lease = await worker.leaseOne({ engines: ["rvc"] });
		expect(lease.conversion_id).toBe(conversion.id);

		const deleted = await alice.api(`/api/v1/voices/${voice.id}`, { method: "DELETE" });
		expect(deleted.status).toBe(200);
		expect((await alice.api(`/api/v1/voices/${voice.id}`)).status).toBe(404);
		expect((await alice.create({ audio_file_id: file.id, voice_model_id: voice.id })).status).toBe(404);
		// Still running: the files stay for it, even through the safety net.
		await runSafetyNet(env);
		expect(await keysUnder(`account-voices/${voice.id}/model`)).toHaveLength(1);
		expect((await call(lease.voice.artifacts[0]?.url ?? "")).status).toBe(200);

		expect((await worker.finish(lease)).status).toBe(200);
		expect((await alice.get(conversion.id)).status).toBe("completed");
		const report = await runSafetyNet(env);
		expect(report.voiceFilesRemoved).toBe(1);
		expect(await keysUnder(`account-voices/${voice.id}/`)).toEqual([]);
	});

	it("accepts no conversion whose voice was deleted after the request found it, and keeps the files of one before", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const request = (voiceId: string) => ({
			audio_file_id: file.id,
			voice_model_id: voiceId,
			pitch_shift: "same_octave" as const,
			use_preview: false,
			audioFileName: "take.wav",
			voiceModelName: "mine",
		});
		// The create handler found the voice ready; the DELETE lands before its insert: nothing is inserted (the
		// handler answers 404), and the voice's files go at once, with no conversion left to need them.
		const gone = await readyVoice(alice);
		expect((await alice.api(`/api/v1/voices/${gone.id}`, { method: "DELETE" })).status).toBe(200);
		expect(await insertConversion(env, alice.accountId, request(gone.id))).toBeNull();
		const rows = await env.DB.prepare("SELECT id FROM voice_conversions WHERE voice_model_id = ?").bind(gone.id).all();
		expect(rows.results).toEqual([]);
		expect(await keysUnder(`account-voices/${gone.id}/`)).toEqual([]);
		// The insert lands first: the DELETE sees the conversion and leaves the files for it.
		const kept = await readyVoice(alice);
		const inserted = await insertConversion(env, alice.accountId, request(kept.id));
		expect(inserted?.conversion.status).toBe("pending_preprocessing");
		expect((await alice.api(`/api/v1/voices/${kept.id}`, { method: "DELETE" })).status).toBe(200);
		expect(await keysUnder(`account-voices/${kept.id}/model`)).toHaveLength(1);
	});

	it("answers a recorded deletion with 200 when the broker refuses to drop its validation; the lease drops it later", async () => {
		const alice = await user();
		const voice = await uploadedVoice(alice);
		const job = () =>
			runInDurableObject(broker(), (_: JobBroker, state) => {
				const rows = state.storage.sql.exec("SELECT state FROM jobs WHERE conversion_id = ?", voice.id).toArray();
				return rows[0]?.state;
			});
		expect(await job()).toBe("waiting");
		// The broker's own storage refuses to end this job, as a broker that fails does.
		const trigger = `refuse_discard_${voice.id.replaceAll("-", "")}`;
		await runInDurableObject(broker(), (_: JobBroker, state) => {
			state.storage.sql.exec(
				`CREATE TRIGGER ${trigger} BEFORE UPDATE OF state ON jobs WHEN OLD.conversion_id = '${voice.id}' AND NEW.state = 'done'
				 BEGIN SELECT RAISE(ABORT, 'the broker refuses'); END`,
			);
		});
		try {
			const deleted = await alice.api(`/api/v1/voices/${voice.id}`, { method: "DELETE" });
			expect(deleted.status).toBe(200);
			expect(await json<{ data: unknown }>(deleted)).toMatchObject({ data: { id: voice.id, deleted: true } });
			expect(await job()).toBe("waiting");
		} finally {
			await runInDurableObject(broker(), (_: JobBroker, state) => {
				state.storage.sql.exec(`DROP TRIGGER ${trigger}`);
			});
		}
		expect((await alice.api(`/api/v1/voices/${voice.id}`)).status).toBe(404);
		expect((await alice.api(`/api/v1/voices/${voice.id}`, { method: "DELETE" })).status).toBe(404);
		// Its files went all the same; the job still waiting is dropped when a runner asks, never handed out.
		expect(await keysUnder(`account-voices/${voice.id}/`)).toEqual([]);
		expect((await askForWork(await runner(), { waitSeconds: 0 })).validations).toEqual([]);
		expect(await job()).toBe("done");
	});

	it("answers a recorded deletion with 200 when removing its files fails; the safety net removes them", async () => {
		const alice = await user();
		const voice = await readyVoice(alice);
		// The database refuses to record the removal, so the clean-up throws after the deletion is written.
		const trigger = `refuse_removal_${voice.id.replaceAll("-", "")}`;
		await env.DB.prepare(
			`CREATE TRIGGER ${trigger} BEFORE UPDATE OF files_removed_at ON voices
			 WHEN NEW.id = '${voice.id}' AND NEW.files_removed_at IS NOT NULL BEGIN SELECT RAISE(ABORT, 'refused'); END`,
		).run();
		try {
			const deleted = await alice.api(`/api/v1/voices/${voice.id}`, { method: "DELETE" });
			expect(deleted.status).toBe(200);
			expect(await json<{ data: unknown }>(deleted)).toMatchObject({ data: { id: voice.id, deleted: true } });
			expect((await runSafetyNet(env)).voiceFilesRemoved).toBe(0);
		} finally {
			await env.DB.prepare(`DROP TRIGGER ${trigger}`).run();
		}
		expect((await alice.api(`/api/v1/voices/${voice.id}`, { method: "DELETE" })).status).toBe(404);
		expect((await runSafetyNet(env)).voiceFilesRemoved).toBe(1);
		expect(await keysUnder(`account-voices/${voice.id}/`)).toEqual([]);
	});

	it("tells a runner that holds a deleted voice's files to forget it, and not a voice that lives", async () => {
		const alice = await user();
		const gone = await readyVoice(alice);
		expect((await alice.api(`/api/v1/voices/${gone.id}`, { method: "DELETE" })).status).toBe(200);
		const kept = await readyVoice(alice);
		const service = await insertVoice();
		const unknown = crypto.randomUUID();
		const worker = await runner();
		const response = await worker.post("/internal/v1/leases", {
			runner_id: worker.runnerId,
			capacity: 1,
			wait_seconds: 0,
			loaded_voice_ids: [service, gone.id, kept.id, unknown],
		});
		expect(response.status).toBe(200);
		const { data } = await json<{ data: unknown }>(response);
		expect(LeaseResponse.parse(data).forget_voice_ids).toEqual([gone.id, unknown]);
	});

	it("gives validations only to runners that ask for them, and fails the voice when its job cannot run", async () => {
		const alice = await user();
		const voice = await uploadedVoice(alice);
		const older = await runner();
		const response = await older.post("/internal/v1/leases", {
			runner_id: older.runnerId,
			capacity: 4,
			wait_seconds: 0,
			engines: ["dsp", "rvc"],
		});
		expect((await json<{ data: unknown }>(response)).data).toEqual({
			leases: [],
			validations: [],
			forget_voice_ids: [],
		});

		const { lease, worker } = await validationLease(voice.id);
		const failed = await worker.fail(lease.lease_id, "permanent", "internal");
		expect(failed.status).toBe(200);
		const current = (await json<{ data: Voice }>(await alice.api(`/api/v1/voices/${voice.id}`))).data;
		expect(current).toMatchObject({ status: "failed" });
		expect(current.error_message).toBe(
			"The voice could not be validated: the service's check of it failed on our side, not because of its files (permanent failure reported by runner). Delete this voice and create it again to retry.",
		);
		const event = await env.DB.prepare("SELECT type FROM events WHERE subject_id = ?").bind(voice.id).first();
		expect(event).toEqual({ type: "voice.failed" });
	});

	it("leases previews before validations, validations like other full jobs", async () => {
		const alice = await user();
		const voice = await uploadedVoice(alice);
		const file = await insertAudioFile(alice.accountId, "ready");
		const preview = await alice.convert({
			audio_file_id: file.id,
			voice_model_id: await insertVoice(),
			use_preview: true,
		});
		await deliverJobs([preview.id]);
		const worker = await runner();
		const ask = () => askForWork(worker, { capacity: 1 });
		const first = await ask();
		expect(first.leases.map((lease) => lease.conversion_id)).toEqual([preview.id]);
		expect(first.validations).toEqual([]);
		const second = await ask();
		expect(second.validations.map((lease) => lease.voice_id)).toEqual([voice.id]);
	});
});
