/**
 * An RVC voice through the whole service: the operator sets the base models and creates a voice from RVC's own
 * files (a `.pth` checkpoint and an `.index` written by PyTorch and faiss, committed under
 * gpu-runner/test/rvc/fixtures/) with the admin commands; a client converts with `pitch_shift: "auto"` and voice
 * settings; the Worker leases the job with the voice's files and the base models to the GPU runner, a real process
 * running the rvc engine on the CPU; the client downloads the WAV. ContentVec and RMVPE are the tiny stand-ins the
 * runner's tests build (real ONNX with RVC's tensor names), so no model is downloaded.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTinyContentVec, buildTinyRmvpe } from "../../gpu-runner/test/rvc/support/tiny-models.ts";
import { runAdmin } from "../../scripts/lib/admin-commands.ts";
import { type ApiCall, callApi, type LocalStack, ROOT, startLocalStack, uploadWav } from "../support/local-stack.ts";
import { type RunnerProcess, startRunner } from "../support/runner-process.ts";
import { makeWav } from "../support/wav-generator.ts";
import { readWav } from "../support/wav-reader.ts";

const FIXTURES = path.join(ROOT, "gpu-runner/test/rvc/fixtures");
const SOURCE_SECONDS = 3;
let stack: LocalStack;
let runner: RunnerProcess;
let token: string;
let voiceId: string;
let dir: string;

const api = <T = Record<string, unknown>>(route: string, init?: ApiCall) => callApi<T>(stack, token, route, init);

/** A 3 s mono WAV of 44.1 kHz registered and uploaded as the account's audio file. */
async function uploadSource(): Promise<{ id: string }> {
	const sampleRate = 44_100;
	const source = makeWav({ sampleRate, channels: 1, frames: sampleRate * SOURCE_SECONDS, encoding: "pcm", bits: 16 });
	return uploadWav(stack, token, source);
}

/** The conversion once it completed or failed, polled every 0.5 s for up to 2 minutes. */
async function settled(id: string): Promise<Record<string, unknown>> {
	let conversion: Record<string, unknown> = {};
	for (let waited = 0; waited < 120_000; waited += 500) {
		conversion = await api(`/api/v1/voice-conversions/${id}`);
		if (conversion.status === "completed" || conversion.status === "failed") break;
		await new Promise((r) => setTimeout(r, 500));
	}
	return conversion;
}

beforeAll(async () => {
	dir = await mkdtemp(path.join(tmpdir(), "rvc-e2e-"));
	stack = await startLocalStack();
	const client = await stack.provision("api");
	token = await stack.token(client);

	// The operator's part, through the admin commands against this stack's D1 and R2.
	const admin = (...argv: string[]) => runAdmin(argv, stack.admin);
	await writeFile(path.join(dir, "contentvec.onnx"), buildTinyContentVec({ featureDim: 256 }));
	await writeFile(path.join(dir, "rmvpe.onnx"), buildTinyRmvpe({ pitchBin: 180 }));
	await admin("base-model", "set", "contentvec", path.join(dir, "contentvec.onnx"));
	await admin("base-model", "set", "rmvpe", path.join(dir, "rmvpe.onnx"));
	const voice = (await admin(
		"voice",
		"create",
		"--name",
		"E2E RVC",
		"--engine",
		"rvc",
		"--model",
		path.join(FIXTURES, "v1-f0-40k.pth"),
		"--index",
		path.join(FIXTURES, "index/voice-v1-256.index"),
		"--params",
		JSON.stringify({ index_rate: 0.6, protect: 0.33 }),
		"--pitch-range",
		"165-330",
	)) as { voice_id: string };
	voiceId = voice.voice_id;

	runner = startRunner(stack.url, await stack.provision("runner", client.accountId), { RUNNER_ENGINES: "rvc,dsp" });
}, 120_000);

afterAll(async () => {
	await runner?.stop();
	await stack?.close();
	if (dir) await rm(dir, { recursive: true, force: true });
});

describe("an RVC .pth + .index voice end to end", () => {
	it("converts with auto pitch and voice settings, at the model's sample rate and the source's duration", async () => {
		const file = await uploadSource();
		const settings = { index_rate: 0.5, protect: 0.2, rms_mix_rate: 0.5, f0_method: "rmvpe" };
		const created = await api<{ id: string }>("/api/v1/voice-conversions", {
			method: "POST",
			body: { audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "auto", voice_settings: settings },
		});

		const conversion = await settled(created.id);
		expect(conversion, `runner log:\n${runner.log().slice(-3000)}`).toMatchObject({
			status: "completed",
			pitch_shift: "auto",
			// The 220 Hz source sits 1 semitone below the centre of 165..330 Hz: no shift brings it closer.
			pitch_shift_applied: "same_octave",
			voice_settings: settings,
			error_message: null,
		});
		const download = await fetch(String(conversion.output_url));
		expect(download.status).toBe(200);
		const wav = readWav(new Uint8Array(await download.arrayBuffer()));
		expect(wav.sampleRate).toBe(40_000);
		expect(wav.channels).toBe(1);
		expect(Math.abs(wav.durationSeconds - SOURCE_SECONDS)).toBeLessThan(0.02);
		expect(wav.samples.some((sample) => sample !== 0)).toBe(true);
		expect(runner.log()).toMatch(/"engine":"rvc"/);
	});

	it("converts with the voice's pitch model in a deployment without RMVPE, tracking pitch with yin", async () => {
		// As where the operator never set one (runs after the test above, which needs it).
		await stack.admin.execute(["DELETE FROM base_models WHERE name = 'rmvpe'"]);
		const file = await uploadSource();
		const refused = await fetch(`${stack.url}/api/v1/voice-conversions`, {
			method: "POST",
			headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
			body: JSON.stringify({ audio_file_id: file.id, voice_model_id: voiceId, voice_settings: { f0_method: "rmvpe" } }),
		});
		expect(refused.status).toBe(400);
		const created = await api<{ id: string }>("/api/v1/voice-conversions", {
			method: "POST",
			body: { audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "third_up" },
		});
		const conversion = await settled(created.id);
		expect(conversion, `runner log:\n${runner.log().slice(-3000)}`).toMatchObject({
			status: "completed",
			error_message: null,
		});
		const download = await fetch(String(conversion.output_url));
		const wav = readWav(new Uint8Array(await download.arrayBuffer()));
		expect(Math.abs(wav.durationSeconds - SOURCE_SECONDS)).toBeLessThan(0.02);
		expect(wav.samples.some((sample) => sample !== 0)).toBe(true);
	});
});
