/**
 * An account voice when things happen at the wrong time: changed, deleted or completed twice while its upload or
 * its validation is under way. Real Worker, D1, R2 and JobBroker; the runner is driven through its API.
 */

import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import type { JobBroker } from "../../durable-objects/job-broker.ts";
import type { VoiceUpload } from "../../src/contracts/voices.ts";
import { runSafetyNet } from "../../src/cron/safety-net.ts";
import { findVoiceById } from "../../src/voices/voice-store.ts";
import {
	createVoice,
	declare,
	getVoice,
	INDEX,
	MODEL,
	type Owner,
	type Problem,
	patchVoice,
	readyReport,
	upload,
	uploadedVoice,
	type Voice,
	validationLease,
} from "./account-voice-helpers.ts";
import { broker, json, resetBroker, user } from "./conversion-fixtures.ts";
import { call } from "./helpers.ts";

beforeEach(async () => {
	await resetBroker();
});

/** A voice's params once a PATCH of `protect` 0.2 and a ready report both landed: its defaults and its model's facts. */
const PARAMS_AFTER_BOTH = { index_rate: 0.5, protect: 0.2, sample_rate: 40_000, f0: true, feature_dim: 768 };

/**
 * Twelve voices, each validating under a lease, and each round's PATCH sent as its runner reports `ready`: the PATCH
 * starts a little later each round, so that its read and its write fall on each side of the report's at least once.
 */
async function patchesRacingReports(
	owner: Owner,
	voiceOf: () => Promise<Voice>,
	change: (round: number) => Record<string, unknown>,
	withIndex: boolean,
) {
	const leased = [];
	for (let i = 0; i < 12; i++) {
		const voice = await voiceOf();
		leased.push({ voice, ...(await validationLease(voice.id)) });
	}
	return Promise.all(
		leased.map(async ({ voice, lease, worker }, i) => {
			const [report, patched] = await Promise.all([
				worker.post(`/internal/v1/leases/${lease.lease_id}/voice-validation`, readyReport(withIndex)),
				scheduler.wait(i).then(() => patchVoice(owner, voice.id, change(i))),
			]);
			return { voice, patched, report };
		}),
	);
}

describe("an account voice changed while it is validated", () => {
	it("does not become ready with default settings its validation never saw and the model cannot honour", async () => {
		const alice = await user();
		const voice = await uploadedVoice(alice, { model: MODEL });
		const { lease, worker } = await validationLease(voice.id);
		expect(lease.voice_settings).toEqual({});
		// Before validation ends, validation is what checks the defaults: the change is taken.
		const patched = await patchVoice(alice, voice.id, { voice_settings: { index_rate: 0.7, formant_shift: 3 } });
		expect(patched.status).toBe(200);
		// The runner checked the settings its lease carried (none) and found the model good.
		const report = await worker.post(`/internal/v1/leases/${lease.lease_id}/voice-validation`, readyReport(false));
		expect(report.status).toBe(200);
		expect((await json<{ data: unknown }>(report)).data).toEqual({ voice_id: voice.id, status: "failed" });
		const current = await getVoice(alice, voice.id);
		expect(current).toMatchObject({ status: "failed", voice_settings: { index_rate: 0.7, formant_shift: 3 } });
		expect(current.error_message).toContain("voice_settings.index_rate");
		expect(current.error_message).toContain("voice_settings.formant_shift");
		const event = await env.DB.prepare("SELECT type FROM events WHERE subject_id = ?").bind(voice.id).all();
		expect(event.results).toEqual([{ type: "voice.failed" }]);
	});
});

describe("a validation report sent twice", () => {
	it("answers two identical reports sent at once (a retry after a lost answer) alike, and refuses a different one", async () => {
		const alice = await user();
		for (let round = 0; round < 4; round++) {
			const voice = await uploadedVoice(alice, { model: MODEL, index: INDEX });
			const { lease, worker } = await validationLease(voice.id);
			const report = (body: unknown) => worker.post(`/internal/v1/leases/${lease.lease_id}/voice-validation`, body);
			const answers = await Promise.all([report(readyReport(true)), report(readyReport(true))]);
			for (const answer of answers) {
				expect(answer.status).toBe(200);
				expect((await json<{ data: unknown }>(answer)).data).toEqual({ voice_id: voice.id, status: "ready" });
			}
			expect((await getVoice(alice, voice.id)).status).toBe("ready");
			const events = await env.DB.prepare("SELECT type FROM events WHERE subject_id = ?").bind(voice.id).all();
			expect(events.results).toEqual([{ type: "voice.ready" }]);
			// The same report once more is answered alike; another outcome for the same lease is not taken.
			expect((await report(readyReport(true))).status).toBe(200);
			const other = await report({ outcome: "failed", problem: "self_test", message: "The model failed its test" });
			expect(other.status).toBe(409);
			expect(await json(other)).toMatchObject({ code: "lease_lost" });
			expect(await getVoice(alice, voice.id)).toMatchObject({ status: "ready", error_message: null });
		}
	});
});

describe("an account voice changed as its validation ends", () => {
	it("keeps both the change and the model's facts when a PATCH and the report land together", async () => {
		const alice = await user();
		const rounds = await patchesRacingReports(
			alice,
			() => uploadedVoice(alice, { model: MODEL, index: INDEX }, { index_rate: 0.5 }),
			(i) => ({ voice_settings: { protect: 0.2 }, tags: [`round-${i}`] }),
			true,
		);
		for (const { voice, patched, report } of rounds) {
			expect(patched.status).toBe(200);
			expect(report.status).toBe(200);
			const current = await getVoice(alice, voice.id);
			expect(current).toMatchObject({ status: "ready", voice_settings: { index_rate: 0.5, protect: 0.2 } });
			expect((await findVoiceById(env, voice.id))?.engineParams).toEqual(PARAMS_AFTER_BOTH);
		}
	}, 30_000);

	it("does not drop the model's facts for a PATCH that read the voice validating", async () => {
		const alice = await user();
		// A rename reads the account's names between the PATCH's read of the voice and its write.
		const rounds = await patchesRacingReports(
			alice,
			() => uploadedVoice(alice, { model: MODEL, index: INDEX }, { index_rate: 0.5 }),
			(i) => ({ name: `Renamed ${i}`, voice_settings: { protect: 0.2 } }),
			true,
		);
		for (const { voice, patched, report } of rounds) {
			expect(patched.status).toBe(200);
			expect(report.status).toBe(200);
			const stored = await findVoiceById(env, voice.id);
			expect(stored?.status).toBe("ready");
			expect(stored?.engineParams).toEqual(PARAMS_AFTER_BOTH);
		}
	}, 30_000);

	it("never leaves a ready voice with defaults it cannot honour, whichever of a PATCH and the report lands first", async () => {
		const alice = await user();
		const rounds = await patchesRacingReports(
			alice,
			() => uploadedVoice(alice, { model: MODEL }),
			(i) => ({ name: `Shifted ${i}`, voice_settings: { formant_shift: 3 } }),
			false,
		);
		for (const { voice, patched, report } of rounds) {
			expect(report.status).toBe(200);
			const current = await getVoice(alice, voice.id);
			if (patched.status === 200) {
				// Taken while validating: the validation's end saw it, and the voice failed for it.
				expect(current).toMatchObject({ status: "failed", voice_settings: { formant_shift: 3 } });
				expect(current.error_message).toContain("voice_settings.formant_shift");
			} else {
				// The voice was ready first: the change is checked as a ready voice's, and refused.
				expect(patched.status).toBe(400);
				expect(current).toMatchObject({ status: "ready", voice_settings: {} });
			}
		}
	}, 30_000);
});

describe("an account voice whose last upload did not get as far as its validation", () => {
	it("starts the validation from the safety net once every file is in, rather than waiting forever", async () => {
		const alice = await user();
		const minutesAgo = new Date(Date.now() - 10 * 60_000).toISOString();
		/**
		 * A voice whose model went up through the API, and whose index was then stored and marked uploaded by a request
		 * that stopped there (what `acceptStoredFile` does before it moves the voice on): every file in, the voice still
		 * waiting for them, no job anywhere.
		 */
		const stalled = async () => {
			const created = (
				await json<{ data: Voice }>(await createVoice(alice, { files: declare({ model: MODEL, index: INDEX }) }))
			).data;
			expect((await upload(alice, created.uploads.model as VoiceUpload, MODEL)).status).toBe(200);
			const key = `account-voices/${created.id}/index.upload-${crypto.randomUUID()}`;
			await env.BUCKET.put(key, INDEX);
			await env.DB.prepare(
				`UPDATE voice_files SET object_key = ?, upload_status = 'uploaded', kind = 'faiss_index', size_bytes = ?,
				 uploaded_at = ? WHERE voice_id = ? AND role = 'index'`,
			)
				.bind(key, INDEX.byteLength, minutesAgo, created.id)
				.run();
			await env.DB.prepare("UPDATE voice_files SET uploaded_at = ? WHERE voice_id = ?")
				.bind(minutesAgo, created.id)
				.run();
			return created;
		};
		const voice = await stalled();
		expect((await getVoice(alice, voice.id)).status).toBe("awaiting_upload");
		// Neither the upload nor new addresses get it on: every file is in.
		expect((await alice.api(`/api/v1/voices/${voice.id}/upload-urls`, { method: "POST" })).status).toBe(409);
		// Beside it: a voice still waiting for its index, and one left the same way but deleted since.
		const waiting = (
			await json<{ data: Voice }>(await createVoice(alice, { files: declare({ model: MODEL, index: INDEX }) }))
		).data;
		expect((await upload(alice, waiting.uploads.model as VoiceUpload, MODEL)).status).toBe(200);
		await env.DB.prepare("UPDATE voice_files SET uploaded_at = ? WHERE voice_id = ?")
			.bind(minutesAgo, waiting.id)
			.run();
		const deleted = await stalled();
		expect((await alice.api(`/api/v1/voices/${deleted.id}`, { method: "DELETE" })).status).toBe(200);

		const report = await runSafetyNet(env);
		expect((await getVoice(alice, voice.id)).status).toBe("validating");
		expect(report.validationsStarted).toBe(1);
		const { lease, worker } = await validationLease(voice.id);
		const ended = await worker.post(`/internal/v1/leases/${lease.lease_id}/voice-validation`, readyReport(true));
		expect(ended.status).toBe(200);
		expect((await getVoice(alice, voice.id)).status).toBe("ready");
		expect((await getVoice(alice, waiting.id)).status).toBe("awaiting_upload");
		expect((await runSafetyNet(env)).validationsStarted).toBe(0);
	});
});

describe("an account voice file uploaded in parts over more than a week", () => {
	/** What R2 does to a multipart upload left unfinished for 7 days: aborts it, with its parts. */
	async function expireMultipartUpload(voiceId: string) {
		const row = await env.DB.prepare("SELECT object_key, multipart_upload_id FROM voice_files WHERE voice_id = ?")
			.bind(voiceId)
			.first<{ object_key: string; multipart_upload_id: string }>();
		await env.BUCKET.resumeMultipartUpload(row?.object_key ?? "", row?.multipart_upload_id ?? "").abort();
	}

	const sendPart = (plan: VoiceUpload & { method: "parts" }, n: number) => {
		const part = plan.parts[n - 1];
		const chunk = MODEL.subarray((n - 1) * plan.part_size_bytes, n * plan.part_size_bytes);
		return call(part?.upload_url ?? "", {
			method: "PUT",
			headers: { "Content-Length": String(chunk.byteLength) },
			body: chunk,
		});
	};

	it("starts the upload again when storage dropped it, so that the file can still be completed", async () => {
		const alice = await user();
		for (const when of ["at a part", "at completion"] as const) {
			const voice = (await json<{ data: Voice }>(await createVoice(alice, { files: declare({ model: MODEL }) }))).data;
			const plan = voice.uploads.model as VoiceUpload & { method: "parts" };
			expect(plan.method).toBe("parts");
			const complete = () => alice.api(new URL(plan.complete_url).pathname, { method: "POST" });
			if (when === "at completion") {
				for (const part of plan.parts) expect((await sendPart(plan, part.part_number)).status).toBe(200);
			}
			await expireMultipartUpload(voice.id);
			const refused = when === "at a part" ? await sendPart(plan, 1) : await complete();
			expect(refused.status).toBe(409);
			expect(await json<Problem>(refused)).toMatchObject({
				code: "voice_file_upload_expired",
				message: expect.stringContaining("send every part again"),
			});
			// Every part again, to the same addresses, and the file completes.
			for (const part of plan.parts) expect((await sendPart(plan, part.part_number)).status).toBe(200);
			const completed = await complete();
			expect(completed.status).toBe(200);
			expect((await json<{ data: Voice }>(completed)).data.status).toBe("validating");
			const stored = await env.BUCKET.get(`account-voices/${voice.id}/model`);
			expect(new Uint8Array(await (stored as R2ObjectBody).arrayBuffer())).toEqual(MODEL);
		}
	});
});

describe("an account voice that could not be validated", () => {
	it("says how to retry in a way that works: the failed voice keeps its name until it is deleted", async () => {
		const alice = await user();
		const voice = await uploadedVoice(alice, { model: MODEL });
		const { lease, worker } = await validationLease(voice.id);
		expect((await worker.fail(lease.lease_id, "permanent", "internal")).status).toBe(200);
		const failed = await getVoice(alice, voice.id);
		expect(failed.status).toBe("failed");
		expect(failed.error_message).toMatch(/Delete this voice and create it again to retry\.$/);
		// Creating it again with its name while the failed one is kept: the name is taken.
		const body = { name: failed.name, files: declare({ model: MODEL }) };
		const again = await createVoice(alice, body);
		expect(again.status).toBe(409);
		expect(await json<Problem>(again)).toMatchObject({ code: "voice_name_taken" });
		// As the message says: delete, then create.
		expect((await alice.api(`/api/v1/voices/${voice.id}`, { method: "DELETE" })).status).toBe(200);
		expect((await createVoice(alice, body)).status).toBe(201);
	});
});

describe("an account voice changed again and again while it validates", () => {
	const WAIT_LIMIT_MS = Number(env.CONVERSION_WAIT_LIMIT_SECONDS) * 1000;
	/**
	 * What a PATCH a minute before `at` leaves: its change, and the voice's `updated_at` at that minute. The change goes
	 * through the API; its time is written after it, since the Worker's clock cannot be moved.
	 */
	async function patchedMinuteBefore(owner: Owner, voiceId: string, at: number) {
		expect((await patchVoice(owner, voiceId, { description: `changed at ${at}` })).status).toBe(200);
		await env.DB.prepare("UPDATE voices SET updated_at = ? WHERE id = ?")
			.bind(new Date(at - 60_000).toISOString(), voiceId)
			.run();
	}

	it("still fails it at the wait limit counted from the start of its validation when no runner takes it", async () => {
		const alice = await user();
		const voice = await uploadedVoice(alice, { model: MODEL });
		expect((await getVoice(alice, voice.id)).status).toBe("validating");
		const pastLimit = Date.now() + WAIT_LIMIT_MS + 120_000;
		await patchedMinuteBefore(alice, voice.id, pastLimit);
		const report = await runSafetyNet(env, new Date(pastLimit));
		expect(report.validationWaitLimitFailed).toBeGreaterThanOrEqual(1);
		const failed = await getVoice(alice, voice.id);
		expect(failed.status).toBe("failed");
		expect(failed.error_message).toContain("no worker took it within 24 hours");
		expect(await broker().knownJobs([voice.id])).toEqual([]);
	});

	it("still hands its job to the broker again when the hand-over was lost", async () => {
		const alice = await user();
		const voice = await uploadedVoice(alice, { model: MODEL });
		// The hand-over to the broker did not happen (the request stopped after moving the voice on).
		await runInDurableObject(broker(), (_instance: JobBroker, state) => {
			state.storage.sql.exec("DELETE FROM jobs WHERE conversion_id = ?", voice.id);
		});
		expect(await broker().knownJobs([voice.id])).toEqual([]);
		const threeMinutesOn = Date.now() + 3 * 60_000;
		await patchedMinuteBefore(alice, voice.id, threeMinutesOn);
		const report = await runSafetyNet(env, new Date(threeMinutesOn));
		expect(report.validationsRedispatched).toBeGreaterThanOrEqual(1);
		expect(await broker().knownJobs([voice.id])).toEqual([voice.id]);
		const { lease } = await validationLease(voice.id);
		expect(lease.voice_id).toBe(voice.id);
	});
});
