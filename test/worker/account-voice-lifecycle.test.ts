/**
 * An account voice when things happen at the wrong time: changed, deleted or completed twice while its upload or
 * its validation is under way. Real Worker, D1, R2 and JobBroker; the runner is driven through its API.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import {
	getVoice,
	INDEX,
	MODEL,
	patchVoice,
	readyReport,
	uploadedVoice,
	validationLease,
} from "./account-voice-helpers.ts";
import { json, resetBroker, user } from "./conversion-fixtures.ts";

beforeEach(async () => {
	await resetBroker();
});

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

describe("an account voice changed as its validation ends", () => {
	it("keeps both the change and the model's facts when a PATCH and the report land together", async () => {
		const alice = await user();
		const leased = [];
		for (let i = 0; i < 12; i++) {
			const voice = await uploadedVoice(alice, { model: MODEL, index: INDEX }, { index_rate: 0.5 });
			leased.push({ voice, ...(await validationLease(voice.id)) });
		}
		const rounds = await Promise.all(
			leased.map(async ({ voice, lease, worker }, i) => {
				// The PATCH starts a little later each round, so that its read and its write fall on each side of the
				// report's at least once.
				const [report, patched] = await Promise.all([
					worker.post(`/internal/v1/leases/${lease.lease_id}/voice-validation`, readyReport(true)),
					scheduler
						.wait(i)
						.then(() => patchVoice(alice, voice.id, { voice_settings: { protect: 0.2 }, tags: [`round-${i}`] })),
				]);
				return { voice, patched, report };
			}),
		);
		for (const { voice, patched, report } of rounds) {
			expect(patched.status).toBe(200);
			expect(report.status).toBe(200);
			const current = await getVoice(alice, voice.id);
			expect(current).toMatchObject({ status: "ready", voice_settings: { index_rate: 0.5, protect: 0.2 } });
			const row = await env.DB.prepare("SELECT engine_params FROM voices WHERE id = ?")
				.bind(voice.id)
				.first<{ engine_params: string }>();
			expect(JSON.parse(row?.engine_params ?? "{}")).toEqual({
				index_rate: 0.5,
				protect: 0.2,
				sample_rate: 40_000,
				f0: true,
				feature_dim: 768,
			});
		}
	}, 30_000);

	it("does not drop the model's facts for a PATCH that read the voice validating", async () => {
		const alice = await user();
		const leased = [];
		for (let i = 0; i < 12; i++) {
			const voice = await uploadedVoice(alice, { model: MODEL, index: INDEX }, { index_rate: 0.5 });
			leased.push({ voice, ...(await validationLease(voice.id)) });
		}
		const rounds = await Promise.all(
			leased.map(async ({ voice, lease, worker }, i) => {
				// A rename reads the account's names between the PATCH's read of the voice and its write.
				const [patched, report] = await Promise.all([
					scheduler
						.wait(i)
						.then(() => patchVoice(alice, voice.id, { name: `Renamed ${i}`, voice_settings: { protect: 0.2 } })),
					worker.post(`/internal/v1/leases/${lease.lease_id}/voice-validation`, readyReport(true)),
				]);
				return { voice, patched, report };
			}),
		);
		for (const { voice, patched, report } of rounds) {
			expect(patched.status).toBe(200);
			expect(report.status).toBe(200);
			const row = await env.DB.prepare("SELECT status, engine_params FROM voices WHERE id = ?")
				.bind(voice.id)
				.first<{ status: string; engine_params: string }>();
			expect(row?.status).toBe("ready");
			expect(JSON.parse(row?.engine_params ?? "{}")).toEqual({
				index_rate: 0.5,
				protect: 0.2,
				sample_rate: 40_000,
				f0: true,
				feature_dim: 768,
			});
		}
	}, 30_000);

	it("never leaves a ready voice with defaults it cannot honour, whichever of a PATCH and the report lands first", async () => {
		const alice = await user();
		const leased = [];
		for (let i = 0; i < 12; i++) {
			const voice = await uploadedVoice(alice, { model: MODEL });
			leased.push({ voice, ...(await validationLease(voice.id)) });
		}
		const rounds = await Promise.all(
			leased.map(async ({ voice, lease, worker }, i) => {
				const [patched, report] = await Promise.all([
					scheduler
						.wait(i)
						.then(() => patchVoice(alice, voice.id, { name: `Shifted ${i}`, voice_settings: { formant_shift: 3 } })),
					worker.post(`/internal/v1/leases/${lease.lease_id}/voice-validation`, readyReport(false)),
				]);
				return { voice, patched, report };
			}),
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
