/**
 * Per-conversion `voice_settings`, `pitch_shift: "auto"` and the deployment's base models, through the API and the
 * runner API: validation with ranges, refusal of what the voice cannot honour, storage, the conversion and event
 * payload, and what a lease carries.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { type Lease, LeaseResponse } from "../../src/contracts/runner.ts";
import { VoiceConversion } from "../../src/contracts/voice-conversions.ts";
import { utf8 } from "../../src/lib/encoding.ts";
import { INDEX, MODEL, patchVoice, readyReport, uploadedVoice, validationLease } from "./account-voice-helpers.ts";
import {
	clearBaseModels,
	eventsFor,
	insertAudioFile,
	insertVoice,
	json,
	makeWav,
	resetBroker,
	runner,
	setBaseModel,
	user,
} from "./conversion-fixtures.ts";
import { call } from "./helpers.ts";

beforeEach(async () => {
	await resetBroker();
	await clearBaseModels();
});

type Problem = { success: false; code: string; message: string; errors: { field: string; message: string }[] };

/** An rvc voice with a synthesizer and a feature index of its own, and a typical range of 165–330 Hz. */
const rvcVoiceWithIndex = () =>
	insertVoice({
		engine: "rvc",
		params: { sample_rate: 40_000, index_rate: 0.6 },
		artifacts: ["synthesizer", "index"],
		pitchRangeHz: { low: 165, high: 330 },
	});

/** Leases until this conversion's job comes (another test's queue message may reach the broker late). */
async function leaseFor(conversionId: string): Promise<Lease> {
	const worker = await runner();
	for (let round = 0; round < 5; round++) {
		const response = await worker.post("/internal/v1/leases", {
			runner_id: worker.runnerId,
			capacity: 8,
			wait_seconds: 10,
			engines: ["dsp", "rvc"],
		});
		const { leases } = LeaseResponse.parse((await json<{ data: unknown }>(response)).data);
		const lease = leases.find((granted) => granted.conversion_id === conversionId);
		if (lease) return lease;
	}
	throw new Error("the conversion was not leased");
}

async function completeWith(lease: Lease, report: Record<string, unknown>): Promise<Response> {
	const worker = await runner();
	const wav = makeWav(0.25);
	await call(lease.output.url, {
		method: "PUT",
		headers: { "Content-Type": "audio/wav", "Content-Length": String(wav.byteLength) },
		body: wav,
	});
	return worker.post(`/internal/v1/leases/${lease.lease_id}/complete`, {
		output: { size_bytes: wav.byteLength, duration_seconds: 0.25, sample_rate: 16_000, channels: 1 },
		...report,
	});
}

describe("voice_settings on POST /api/v1/voice-conversions", () => {
	it.each([
		[{ index_rate: 1.5 }, "voice_settings.index_rate", /from 0 to 1/],
		[{ protect: 0.6 }, "voice_settings.protect", /from 0 to 0.5/],
		[{ rms_mix_rate: -0.1 }, "voice_settings.rms_mix_rate", /from 0 to 1/],
		[{ formant_shift: 13 }, "voice_settings.formant_shift", /from -12 to 12/],
		[{ f0_method: "crepe" }, "voice_settings.f0_method", /rmvpe, yin/],
		[{ index_rate: "high" }, "voice_settings.index_rate", /a number/],
		[{ pitch: 2 }, "voice_settings", /unknown setting: pitch/],
	])("refuses %j with 400 naming %s", async (settings, field, message) => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const response = await alice.create({
			audio_file_id: file.id,
			voice_model_id: await rvcVoiceWithIndex(),
			voice_settings: settings,
		});
		expect(response.status).toBe(400);
		const problem = await json<Problem>(response);
		expect(problem).toMatchObject({ success: false, code: "invalid_request" });
		expect(problem.errors).toEqual([{ field, message: expect.stringMatching(message) }]);
		expect(problem.message).toContain(field);
	});

	it("refuses with 400 each setting the voice's engine cannot honour, naming it", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const dsp = await insertVoice({ name: "Plain dsp" });
		const rvcWithoutIndex = await insertVoice({
			name: "No index",
			engine: "rvc",
			params: { sample_rate: 40_000 },
			artifacts: ["synthesizer"],
		});
		const refused = async (voiceId: string, body: Record<string, unknown>) => {
			const response = await alice.create({ audio_file_id: file.id, voice_model_id: voiceId, ...body });
			expect(response.status).toBe(400);
			const problem = await json<Problem>(response);
			expect(problem.code).toBe("unsupported_voice_setting");
			return problem.errors;
		};
		expect(await refused(dsp, { voice_settings: { index_rate: 0.5, f0_method: "yin", formant_shift: 2 } })).toEqual([
			{
				field: "voice_settings.index_rate",
				message: expect.stringMatching(/dsp engine .* honours only formant_shift/),
			},
			{ field: "voice_settings.f0_method", message: expect.stringMatching(/honours only formant_shift/) },
		]);
		expect(await refused(rvcWithoutIndex, { voice_settings: { index_rate: 0.5, protect: 0.2 } })).toEqual([
			{ field: "voice_settings.index_rate", message: expect.stringMatching(/"No index" has no feature index/) },
			{ field: "voice_settings.protect", message: expect.stringMatching(/no feature index/) },
		]);
		expect(await refused(await rvcVoiceWithIndex(), { voice_settings: { formant_shift: 3 } })).toEqual([
			{ field: "voice_settings.formant_shift", message: expect.stringMatching(/cannot shift formants/) },
		]);
		// RMVPE comes from the deployment's base models; without one, only yin can track pitch.
		expect(await refused(rvcWithoutIndex, { voice_settings: { f0_method: "rmvpe" } })).toEqual([
			{ field: "voice_settings.f0_method", message: expect.stringMatching(/no RMVPE base model; use f0_method yin/) },
		]);
		// A model without pitch input (f0 = 0, as validation or the admin tool read it) tracks no pitch at all.
		const noPitch = await insertVoice({
			name: "No pitch",
			engine: "rvc",
			params: { sample_rate: 40_000, f0: false },
			artifacts: ["synthesizer"],
		});
		expect(await refused(noPitch, { voice_settings: { f0_method: "yin" } })).toEqual([
			{ field: "voice_settings.f0_method", message: expect.stringMatching(/"No pitch" has a model without pitch/) },
		]);
		// Nor does it protect unvoiced frames from the index blend (RVC protects only where the model takes pitch).
		const noPitchWithIndex = await insertVoice({
			name: "No pitch, indexed",
			engine: "rvc",
			params: { sample_rate: 40_000, f0: false },
			artifacts: ["synthesizer", "index"],
		});
		expect(await refused(noPitchWithIndex, { voice_settings: { index_rate: 0.5, protect: 0.2 } })).toEqual([
			{
				field: "voice_settings.protect",
				message: expect.stringMatching(/"No pitch, indexed" has a model without pitch input .* protect does not apply/),
			},
		]);
		await setBaseModel("rmvpe", utf8("rmvpe model"));
		const withRmvpe = await alice.create({
			audio_file_id: file.id,
			voice_model_id: rvcWithoutIndex,
			voice_settings: { f0_method: "rmvpe", rms_mix_rate: 0.5, formant_shift: 0 },
		});
		expect(withRmvpe.status).toBe(201);
		expect(await refused(dsp, { pitch_shift: "auto" })).toEqual([
			{ field: "pitch_shift", message: expect.stringMatching(/auto needs the voice's pitch range/) },
		]);
		// Nothing was stored for the refused requests.
		const stored = await env.DB.prepare("SELECT COUNT(*) AS n FROM voice_conversions WHERE audio_file_id = ?")
			.bind(file.id)
			.first<{ n: number }>();
		expect(stored?.n).toBe(1);
	});

	it("stores the settings, echoes them on the conversion and in the event, and carries them in the lease", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const voiceId = await rvcVoiceWithIndex();
		const settings = { index_rate: 0.3, protect: 0.5, rms_mix_rate: 1, f0_method: "yin" };
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId, voice_settings: settings });
		expect(VoiceConversion.parse(created)).toEqual(created);
		expect(created).toMatchObject({ voice_settings: settings, pitch_shift: "same_octave" });
		expect((await alice.get(created.id)).voice_settings).toEqual(settings);

		const lease = await leaseFor(created.id);
		expect(lease).toMatchObject({ voice_settings: settings, semitones: 0, pitch_shift: "same_octave" });
		expect((await completeWith(lease, {})).status).toBe(200);
		const [event] = await eventsFor(created.id);
		expect(event?.payload.conversion).toMatchObject({ voice_settings: settings, pitch_shift_applied: "same_octave" });
	});

	it("runs a conversion with the account voice's defaults it was accepted with, though the owner changed them before its lease", async () => {
		const alice = await user();
		await setBaseModel("rmvpe", utf8("rmvpe onnx bytes"));
		const voice = await uploadedVoice(alice, { model: MODEL, index: INDEX }, { index_rate: 0.5, rms_mix_rate: 0.3 });
		const { lease: validation, worker } = await validationLease(voice.id);
		const report = await worker.post(`/internal/v1/leases/${validation.lease_id}/voice-validation`, readyReport(true));
		expect(report.status).toBe(200);
		const file = await insertAudioFile(alice.accountId, "ready");
		const accepted = await alice.convert({
			audio_file_id: file.id,
			voice_model_id: voice.id,
			voice_settings: { protect: 0.2 },
		});
		// The owner changes the defaults while the conversion waits for a runner.
		const patched = await patchVoice(alice, voice.id, {
			voice_settings: { index_rate: 0.9, rms_mix_rate: 1, f0_method: "yin" },
		});
		expect(patched.status).toBe(200);
		const model = { sample_rate: 40_000, f0: true, feature_dim: 768 };
		const first = await leaseFor(accepted.id);
		expect(first.voice.params).toEqual({ index_rate: 0.5, rms_mix_rate: 0.3, ...model });
		expect(first.voice_settings).toEqual({ protect: 0.2 });
		// A retried job (a later lease of the same conversion) still gets what it was accepted with.
		expect((await (await runner()).release(first.lease_id)).status).toBe(200);
		expect((await leaseFor(accepted.id)).voice.params).toEqual({ index_rate: 0.5, rms_mix_rate: 0.3, ...model });
		// A conversion accepted after the change runs with the new defaults.
		const after = await alice.convert({ audio_file_id: file.id, voice_model_id: voice.id });
		const second = await leaseFor(after.id);
		expect(second.voice.params).toEqual({ index_rate: 0.9, rms_mix_rate: 1, f0_method: "yin", ...model });
	});

	it("keeps a service voice's settings as accepted through an operator's update, and takes the model's facts as they are", async () => {
		const alice = await user();
		await setBaseModel("rmvpe", utf8("rmvpe onnx bytes"));
		const voiceId = await insertVoice({
			engine: "rvc",
			params: { sample_rate: 40_000, f0: true, index_rate: 0.6, transpose_semitones: 12 },
			artifacts: ["synthesizer", "index"],
		});
		const file = await insertAudioFile(alice.accountId, "ready");
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId });
		// `voice update --model ... --params ...` between acceptance and lease: a new model, other defaults.
		await env.DB.prepare("UPDATE voices SET engine_params = ? WHERE id = ?")
			.bind(JSON.stringify({ sample_rate: 48_000, f0: true, index_rate: 0.1, transpose_semitones: -12 }), voiceId)
			.run();
		const lease = await leaseFor(created.id);
		expect(lease.voice.params).toEqual({ index_rate: 0.6, transpose_semitones: 12, sample_rate: 48_000, f0: true });
	});

	it("treats an empty object as no settings", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const created = await alice.convert({
			audio_file_id: file.id,
			voice_model_id: await insertVoice(),
			voice_settings: {},
		});
		expect(created.voice_settings).toBeNull();
		expect((await leaseFor(created.id)).voice_settings).toBeNull();
	});

	it("lets a dsp voice's formant_shift be overridden", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const created = await alice.convert({
			audio_file_id: file.id,
			voice_model_id: await insertVoice(),
			voice_settings: { formant_shift: -4.5 },
		});
		const lease = await leaseFor(created.id);
		expect(lease.voice_settings).toEqual({ formant_shift: -4.5 });
		expect(lease.voice.params).toEqual({ formant_shift: 1.1 });
	});
});

describe("pitch_shift auto", () => {
	it("leases the voice's range with semitones 0 and shows the runner's choice once completed", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const voiceId = await rvcVoiceWithIndex();
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "auto" });
		expect(created).toMatchObject({ pitch_shift: "auto", pitch_shift_applied: null });

		const lease = await leaseFor(created.id);
		expect(lease).toMatchObject({
			pitch_shift: "auto",
			semitones: 0,
			voice: { pitch_range_hz: { low: 165, high: 330 } },
		});
		expect((await alice.get(created.id)).pitch_shift_applied).toBeNull();

		expect((await completeWith(lease, { pitch_shift_applied: "higher_octave" })).status).toBe(200);
		const done = await alice.get(created.id);
		expect(done).toMatchObject({ status: "completed", pitch_shift: "auto", pitch_shift_applied: "higher_octave" });
		const [event] = await eventsFor(created.id);
		expect(event?.payload.conversion).toMatchObject({ pitch_shift: "auto", pitch_shift_applied: "higher_octave" });
	});

	it("records same_octave when the runner does not report a choice (it applied the lease's 0 semitones)", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const created = await alice.convert({
			audio_file_id: file.id,
			voice_model_id: await insertVoice({ pitchRangeHz: { low: 90, high: 180 } }),
			pitch_shift: "auto",
		});
		expect((await completeWith(await leaseFor(created.id), {})).status).toBe(200);
		expect((await alice.get(created.id)).pitch_shift_applied).toBe("same_octave");
	});

	it("keeps a pitch table value as applied whatever the runner reports", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const created = await alice.convert({
			audio_file_id: file.id,
			voice_model_id: await insertVoice(),
			pitch_shift: "third_down",
		});
		expect(created.pitch_shift_applied).toBe("third_down");
		const lease = await leaseFor(created.id);
		expect(lease).toMatchObject({ pitch_shift: "third_down", semitones: -4 });
		expect((await completeWith(lease, { pitch_shift_applied: "fifth_up" })).status).toBe(200);
		expect((await alice.get(created.id)).pitch_shift_applied).toBe("third_down");
	});
});

describe("base models in leases", () => {
	it("gives an rvc voice's lease the deployment's ContentVec and RMVPE, with checksums and signed addresses", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const contentvec = utf8("contentvec onnx bytes");
		const { sha256: contentvecSha } = await setBaseModel("contentvec", contentvec);
		const { sha256: rmvpeSha } = await setBaseModel("rmvpe", utf8("rmvpe onnx bytes"));
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: await rvcVoiceWithIndex() });
		const lease = await leaseFor(created.id);
		expect(lease.voice.artifacts.map((a) => a.name).sort()).toEqual(["contentvec", "index", "rmvpe", "synthesizer"]);
		const byName = new Map(lease.voice.artifacts.map((a) => [a.name, a]));
		expect(byName.get("contentvec")).toMatchObject({ sha256: contentvecSha, size_bytes: contentvec.byteLength });
		expect(byName.get("rmvpe")?.sha256).toBe(rmvpeSha);
		const download = await call(byName.get("contentvec")?.url ?? "missing");
		expect(new Uint8Array(await download.arrayBuffer())).toEqual(contentvec);
	});

	it("has a model with pitch track it with yin where no RMVPE model comes with the voice, unless a method is named", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const pitchVoice = await insertVoice({
			engine: "rvc",
			params: { sample_rate: 40_000, f0: true },
			artifacts: ["synthesizer"],
		});
		const leased = async (voiceId: string, settings?: Record<string, unknown>) => {
			const created = await alice.convert({
				audio_file_id: file.id,
				voice_model_id: voiceId,
				voice_settings: settings,
			});
			return (await leaseFor(created.id)).voice;
		};
		// No RMVPE in the deployment: the lease says yin, which the runner has built in (before, every conversion of
		// the voice failed at the runner for want of an rmvpe file).
		const lease = await leased(pitchVoice);
		expect(lease.params).toEqual({ sample_rate: 40_000, f0: true, f0_method: "yin" });
		expect(lease.artifacts.map((artifact) => artifact.name)).not.toContain("rmvpe");
		// Asking for rmvpe is still refused at once; a named yin is the conversion's own.
		const refused = await alice.create({
			audio_file_id: file.id,
			voice_model_id: pitchVoice,
			voice_settings: { f0_method: "rmvpe" },
		});
		expect(refused.status).toBe(400);
		expect(await json(refused)).toMatchObject({ code: "unsupported_voice_setting" });
		const named = await leased(pitchVoice, { f0_method: "yin" });
		expect(named.params).toEqual({ sample_rate: 40_000, f0: true });
		// A model without pitch input tracks none; a voice's own rmvpe file is used as RVC would.
		const noPitch = await insertVoice({
			engine: "rvc",
			params: { sample_rate: 40_000, f0: false },
			artifacts: ["synthesizer"],
		});
		expect((await leased(noPitch)).params).toEqual({ sample_rate: 40_000, f0: false });
		const ownRmvpe = await insertVoice({
			engine: "rvc",
			params: { sample_rate: 40_000, f0: true },
			artifacts: ["synthesizer", "rmvpe"],
		});
		expect((await leased(ownRmvpe)).params).toEqual({ sample_rate: 40_000, f0: true });
		// Once the deployment has RMVPE, the voice's conversions track pitch with it (RVC's default).
		await setBaseModel("rmvpe", utf8("rmvpe onnx bytes"));
		const withBase = await leased(pitchVoice);
		expect(withBase.params).toEqual({ sample_rate: 40_000, f0: true });
		expect(withBase.artifacts.map((artifact) => artifact.name)).toContain("rmvpe");
	});

	it("gives a v1 voice the deployment's contentvec_v1 as its ContentVec, and v2 voices the 768-wide one", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		const { sha256: v2Sha } = await setBaseModel("contentvec", utf8("768-wide contentvec"));
		const { sha256: rmvpeSha } = await setBaseModel("rmvpe", utf8("rmvpe onnx bytes"));
		const artifactsOf = async (params: Record<string, unknown>) => {
			const voice = await insertVoice({ engine: "rvc", params, artifacts: ["synthesizer"] });
			const lease = await leaseFor((await alice.convert({ audio_file_id: file.id, voice_model_id: voice })).id);
			return new Map(lease.voice.artifacts.map((a) => [a.name, a.sha256]));
		};
		const v1Params = { sample_rate: 40_000, feature_dim: 256 };

		// Without a contentvec_v1, a v1 voice gets what there is (a deployment may have set a 256-wide contentvec).
		expect((await artifactsOf(v1Params)).get("contentvec")).toBe(v2Sha);

		const { sha256: v1Sha } = await setBaseModel("contentvec_v1", utf8("256-wide contentvec"));
		const v1 = await artifactsOf(v1Params);
		expect([...v1.keys()].sort()).toEqual(["contentvec", "rmvpe", "synthesizer"]);
		expect(v1.get("contentvec")).toBe(v1Sha);
		expect(v1.get("rmvpe")).toBe(rmvpeSha);
		for (const params of [{ sample_rate: 40_000, feature_dim: 768 }, { sample_rate: 40_000 }]) {
			const v2 = await artifactsOf(params);
			expect([...v2.keys()].sort()).toEqual(["contentvec", "rmvpe", "synthesizer"]);
			expect(v2.get("contentvec")).toBe(v2Sha);
		}
	});

	it("keeps a voice's own copy of a base model, and gives dsp voices none", async () => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "ready");
		await setBaseModel("contentvec", utf8("deployment contentvec"));
		const own = await insertVoice({
			engine: "rvc",
			params: { sample_rate: 40_000 },
			artifacts: ["synthesizer", "contentvec"],
		});
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: own });
		const lease = await leaseFor(created.id);
		const [contentvec, ...more] = lease.voice.artifacts.filter((a) => a.name === "contentvec");
		expect(more).toEqual([]);
		const download = await call(contentvec?.url ?? "missing");
		expect(new TextDecoder().decode(await download.arrayBuffer())).toBe(`contentvec of ${own}`);

		const dsp = await alice.convert({ audio_file_id: file.id, voice_model_id: await insertVoice() });
		expect((await leaseFor(dsp.id)).voice.artifacts.map((a) => a.name)).toEqual(["params"]);
	});
});

describe("OpenAPI", () => {
	it("documents voice_settings with their ranges, pitch_shift auto and pitch_shift_applied", async () => {
		const alice = await user();
		type Schema = { properties?: Record<string, Schema>; enum?: string[]; minimum?: number; maximum?: number };
		const doc = await json<{
			paths: Record<string, { post?: { requestBody: { content: Record<string, { schema: Schema }> } } }>;
		}>(await alice.api("/openapi.json"));
		const body = doc.paths["/api/v1/voice-conversions"]?.post?.requestBody.content["application/json"]?.schema;
		const settings = body?.properties?.voice_settings?.properties;
		expect(settings?.index_rate).toMatchObject({ minimum: 0, maximum: 1 });
		expect(settings?.protect).toMatchObject({ minimum: 0, maximum: 0.5 });
		expect(settings?.rms_mix_rate).toMatchObject({ minimum: 0, maximum: 1 });
		expect(settings?.formant_shift).toMatchObject({ minimum: -12, maximum: 12 });
		expect(settings?.f0_method?.enum).toEqual(["rmvpe", "yin"]);
		expect(body?.properties?.pitch_shift?.enum).toContain("auto");
		expect(JSON.stringify(doc)).toContain("pitch_shift_applied");
		expect(JSON.stringify(doc)).toContain("unsupported_voice_setting");
	});
});
