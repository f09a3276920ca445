/**
 * An account's own RVC voice end to end over real HTTP: the Worker under wrangler's test harness, the GPU runner as
 * its own process with the rvc engine, the committed RVC fixtures, and a real webhook receiver. The client creates a
 * voice, uploads the checkpoint in parts and the index in one PUT, a runner validates it (`voice.ready` arrives
 * signed), and a conversion with the voice completes with the model's sample rate and the source's length. A voice
 * whose index does not fit its model fails validation with the reason.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratchDir } from "../../gpu-runner/test/helpers/scratch.ts";
import { buildTinyContentVec, buildTinyRmvpe } from "../../gpu-runner/test/rvc/support/tiny-models.ts";
import { runAdmin } from "../../scripts/lib/admin-commands.ts";
import { VoiceConversionClient, VoiceConversionError } from "../../sdk/index.ts";
import { verifyWebhook } from "../../sdk/verify-webhook.ts";
import { runCli } from "../support/cli-process.ts";
import {
	type ApiCall,
	type Credentials,
	callApi,
	type LocalStack,
	ROOT,
	startLocalStack,
	uploadWav,
} from "../support/local-stack.ts";
import { type RunnerProcess, startRunner } from "../support/runner-process.ts";
import { makeWav } from "../support/wav-generator.ts";
import { readWav } from "../support/wav-reader.ts";
import { startReceiver } from "../support/webhook-receiver.ts";

const FIXTURES = path.join(ROOT, "gpu-runner/test/rvc/fixtures");
const fixture = (name: string) => new Uint8Array(readFileSync(path.join(FIXTURES, name)));
const MODEL = fixture("v2-f0-40k.pth");
const INDEX = fixture("index/voice-v2-768.index");
const V1_MODEL = fixture("v1-f0-40k.pth");

let stack: LocalStack;
let runner: RunnerProcess;
let token: string;
let client: VoiceConversionClient;
let credentials: Credentials;

const receiver = startReceiver();
let secret: string;

const cli = (args: string[]) => runCli(args, { url: stack.url, credentials });

type Upload =
	| { method: "PUT"; upload_url: string }
	| {
			method: "parts";
			part_size_bytes: number;
			parts: { part_number: number; upload_url: string }[];
			complete_url: string;
	  };
type Voice = { id: string; status: string; error_message: string | null; uploads: Record<string, Upload> };

const api = <T = Record<string, unknown>>(route: string, init?: ApiCall) => callApi<T>(stack, token, route, init);

async function upload(plan: Upload, bytes: Uint8Array) {
	if (plan.method === "PUT") {
		const put = await fetch(plan.upload_url, { method: "PUT", body: Buffer.from(bytes) });
		expect(put.status, await put.clone().text()).toBe(200);
		return;
	}
	for (const part of plan.parts) {
		const start = (part.part_number - 1) * plan.part_size_bytes;
		const put = await fetch(part.upload_url, {
			method: "PUT",
			body: Buffer.from(bytes.subarray(start, start + plan.part_size_bytes)),
		});
		expect(put.status, await put.clone().text()).toBe(200);
	}
	await api(plan.complete_url, { method: "POST" });
}

async function createAndUpload(name: string, files: Record<string, Uint8Array>): Promise<Voice> {
	const voice = await api<Voice>("/api/v1/voices", {
		method: "POST",
		body: {
			name,
			voice_settings: { index_rate: 0.5 },
			files: Object.fromEntries(
				Object.entries(files).map(([role, bytes]) => [role, { file_name: `${role}.bin`, size_bytes: bytes.length }]),
			),
		},
	});
	for (const [role, bytes] of Object.entries(files)) await upload(voice.uploads[role] as Upload, bytes);
	return voice;
}

/** Two seconds of tone converted with the voice (full length, no preview): the output WAV. */
async function convertTwoSeconds(voiceId: string) {
	const source = makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000 * 2, encoding: "pcm", bits: 16 });
	const file = await uploadWav(stack, token, source);
	const conversion = await api<{ id: string }>("/api/v1/voice-conversions", {
		method: "POST",
		body: { audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "same_octave", use_preview: false },
	});
	let current: Record<string, unknown> = {};
	for (const deadline = Date.now() + 90_000; Date.now() < deadline; ) {
		current = await api(`/api/v1/voice-conversions/${conversion.id}`);
		if (current.status === "completed" || current.status === "failed") break;
		await new Promise((r) => setTimeout(r, 300));
	}
	expect(current, runner.log().slice(-3000)).toMatchObject({ status: "completed" });
	return readWav(new Uint8Array(await (await fetch(String(current.output_url))).arrayBuffer()));
}

/** The webhook delivery about voice `id` (the tests' voices each announce one, in whatever order they settle). */
async function voiceDelivery(id: string, timeoutMs = 30_000) {
	for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
		const found = receiver.received.find((r) => r.path === "/voices" && JSON.parse(r.body).data?.voice?.id === id);
		if (found) return found;
		await new Promise((r) => setTimeout(r, 100));
	}
	throw new Error(`no webhook delivery for voice ${id} within ${timeoutMs} ms`);
}

async function waitForVoice(id: string, timeoutMs = 60_000): Promise<Voice> {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		const voice = await api<Voice>(`/api/v1/voices/${id}`);
		if (voice.status === "ready" || voice.status === "failed") return voice;
		await new Promise((r) => setTimeout(r, 250));
	}
	throw new Error(`voice ${id} was not validated; runner log:\n${runner.log().slice(-3000)}`);
}

beforeAll(async () => {
	// Voice files over 200 kB go up in parts: the index takes that path, the checkpoint one PUT.
	stack = await startLocalStack({ vars: { ALLOW_LOCAL_WEBHOOK_URLS: "true", VOICE_SINGLE_UPLOAD_BYTES: "200000" } });
	credentials = await stack.provision("api");
	const runnerClient = await stack.provision("runner", credentials.accountId);
	token = await stack.token(credentials);
	client = new VoiceConversionClient({
		baseUrl: stack.url,
		clientId: credentials.clientId,
		clientSecret: credentials.clientSecret,
	});
	// The operator's part: the deployment's base models, set with the admin command against this stack.
	const models = scratchDir("account-voices-models");
	writeFileSync(path.join(models, "contentvec.onnx"), buildTinyContentVec());
	writeFileSync(path.join(models, "contentvec_v1.onnx"), buildTinyContentVec({ featureDim: 256 }));
	writeFileSync(path.join(models, "rmvpe.onnx"), buildTinyRmvpe({ pitchBin: 168 }));
	for (const name of ["contentvec", "contentvec_v1", "rmvpe"]) {
		await runAdmin(["base-model", "set", name, path.join(models, `${name}.onnx`)], stack.admin);
	}
	runner = startRunner(stack.url, runnerClient, {
		RUNNER_ENGINES: "dsp,rvc",
		RUNNER_CACHE_DIR: scratchDir("account-voices-e2e"),
	});
	const receiverUrl = `http://127.0.0.1:${await receiver.listen()}`;
	secret = (
		await api<{ secret: string }>("/api/v1/webhooks/subscriptions", {
			method: "POST",
			body: { url: `${receiverUrl}/voices`, events: ["voice_ready", "voice_failed"] },
		})
	).secret;
}, 120_000);

afterAll(async () => {
	await runner?.stop();
	await receiver.close();
	await stack?.close();
});

describe("account voices end to end", () => {
	it("uploads with the SDK, validates on a real runner, announces voice.ready, and converts with the voice", async () => {
		// Over the (test) single-upload size: the SDK sends the index in parts, the checkpoint in one PUT.
		expect(INDEX.length).toBeGreaterThan(200_000);
		expect(MODEL.length).toBeLessThan(200_000);
		const progress: Record<string, number[]> = {};
		const created = await client.voices.create(
			{
				name: "My RVC voice",
				voice_settings: { index_rate: 0.5 },
				files: { model: { source: MODEL }, index: { source: INDEX } },
			},
			{
				onProgress: (role, { loaded, total }) => {
					progress[role] = [...(progress[role] ?? []), loaded / total];
				},
			},
		);
		expect(created.status).toBe("validating");
		expect(progress.model?.at(-1)).toBe(1);
		expect(progress.index?.at(-1)).toBe(1);
		const statuses: string[] = [];
		const voice = await client.waitForVoice(created.id, { intervalMs: 200, onUpdate: (v) => statuses.push(v.status) });
		expect(voice, runner.log().slice(-2000)).toMatchObject({ status: "ready", error_message: null });
		expect(voice.files.index).toMatchObject({ kind: "faiss_index", size_bytes: INDEX.length });
		expect(statuses.at(-1)).toBe("ready");

		const delivery = await voiceDelivery(created.id);
		expect(delivery?.headers["x-webhook-event"]).toBe("voice_ready");
		const verified = await verifyWebhook({ secret, headers: delivery?.headers ?? {}, body: delivery?.body ?? "" });
		expect(verified).toMatchObject({ ok: true, event: "voice_ready" });
		expect(JSON.parse(delivery?.body ?? "{}")).toMatchObject({
			event: "voice.ready",
			data: { voice: { id: created.id, name: "My RVC voice", status: "ready", error_message: null } },
		});

		const output = await convertTwoSeconds(created.id);
		expect(output.sampleRate).toBe(40_000);
		expect(output.durationSeconds).toBeCloseTo(2, 1);
	}, 180_000);

	it("sends a voice file again from fresh addresses when its connection drops, not the parts storage took", async () => {
		// The model's PUT loses its connection before anything is sent; the index's part reaches storage but its
		// answer is lost; then the index's completion loses its connection before it is sent. Each is tried again
		// from fresh addresses; the part is sent again only while no answer said storage took it.
		const sent: string[] = [];
		const dropped = new Set<string>();
		/** True the first time it is asked about `what`: that request is the one that fails. */
		const drop = (what: string) => {
			if (dropped.has(what)) return false;
			dropped.add(what);
			return true;
		};
		const flaky: typeof fetch = async (input, init) => {
			const url = new URL(input instanceof Request ? input.url : String(input));
			if (url.pathname.endsWith("/files/index/complete")) {
				sent.push("index complete");
				if (drop("complete")) throw new TypeError("fetch failed: connect ECONNRESET");
				return fetch(input, init);
			}
			if (init?.method !== "PUT") return fetch(input, init);
			// `.../{role}` for a file in one PUT, `.../{role}/{n}` for a part.
			const [parent = "", last = ""] = url.pathname.split("/").slice(-2);
			const what = /^\d+$/.test(last) ? `${parent}/${last}` : last;
			sent.push(what);
			if (what === "model" && drop(what)) throw new TypeError("fetch failed: socket hang up");
			const response = await fetch(input, init);
			if (what === "index/1" && drop(what)) {
				await response.body?.cancel();
				throw new TypeError("fetch failed: other side closed");
			}
			return response;
		};
		const flakyClient = new VoiceConversionClient({
			baseUrl: stack.url,
			clientId: credentials.clientId,
			clientSecret: credentials.clientSecret,
			fetch: flaky,
		});
		const retries: string[] = [];
		const created = await flakyClient.voices.create(
			{ name: "Sent twice", files: { model: { source: MODEL }, index: { source: INDEX } } },
			{ onRetry: (role, { attempt, error }) => retries.push(`${role} ${attempt} ${error.code}`) },
		);
		expect(created.status).toBe("validating");
		expect(retries).toEqual(["model 1 network_error", "index 1 network_error", "index 2 network_error"]);
		expect(sent).toEqual(["model", "model", "index/1", "index/1", "index complete", "index complete"]);
		const voice = await client.waitForVoice(created.id, { intervalMs: 200 });
		expect(voice, runner.log().slice(-2000)).toMatchObject({ status: "ready", error_message: null });
		expect(voice.files.model).toMatchObject({ size_bytes: MODEL.length });
		expect(voice.files.index).toMatchObject({ size_bytes: INDEX.length });
		await client.voices.delete(created.id);
	}, 120_000);

	it("fails a voice whose index does not fit its model, naming why, and announces voice.failed", async () => {
		const created = await createAndUpload("Mismatched", { model: V1_MODEL, index: INDEX });
		expect(created.uploads.model?.method).toBe("PUT");
		expect(created.uploads.index?.method).toBe("parts");
		const voice = await waitForVoice(created.id);
		expect(voice.status).toBe("failed");
		expect(voice.error_message).toMatch(/^The index holds 768-wide features but the model reads 256-wide ones/);
		const delivery = await voiceDelivery(created.id);
		expect(delivery?.headers["x-webhook-event"]).toBe("voice_failed");

		const truncated = await createAndUpload("Truncated", { model: fixture("refused-truncated.pth") });
		const cut = await waitForVoice(truncated.id);
		expect(cut.status).toBe("failed");
		expect(cut.error_message).toMatch(/^The model file cannot be used: .*truncated/i);
	}, 120_000);

	it("creates a voice from the CLI with a bar per file and the validation status live, and deletes it", async () => {
		const dir = scratchDir("voices-cli");
		const sample = path.join(dir, "sample.wav");
		writeFileSync(sample, makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 }));
		const args = ["voices", "create", "--name", "From the CLI", "--index-rate", "0.6"];
		const ok = await cli([
			...args,
			"--model",
			path.join(FIXTURES, "v2-f0-40k.pth"),
			"--index",
			path.join(FIXTURES, "index/voice-v2-768.index"),
			"--sample",
			sample,
		]);
		expect(ok.code, ok.stderr).toBe(0);
		expect(ok.stderr).toMatch(/Uploading model +100%/);
		expect(ok.stderr).toMatch(/Uploading index +100%/);
		expect(ok.stderr).toMatch(/Uploading sample +100%/);
		expect(ok.stderr).toMatch(/Status: (validating|ready)/);
		expect(ok.stdout).toMatch(/^Voice "From the CLI" is ready \(([0-9a-f-]{36})\), pitch range \d+-\d+ Hz/);
		const id = /\(([0-9a-f-]{36})\)/.exec(ok.stdout)?.[1] ?? "";
		expect((await cli(["voices"])).stdout).toMatch(/From the CLI\s+\S+\s+account\s+ready/);

		const failed = await cli([
			...args.slice(0, 3),
			"Mismatched from the CLI",
			"--model",
			path.join(FIXTURES, "v1-f0-40k.pth"),
			"--index",
			path.join(FIXTURES, "index/voice-v2-768.index"),
		]);
		expect(failed.code).toBe(1);
		expect(failed.stderr).toMatch(/Validation failed: The index holds 768-wide features but the model reads 256-wide/);

		const deleted = await cli(["voices", "delete", id]);
		expect(deleted.code, deleted.stderr).toBe(0);
		expect((await cli(["voices"])).stdout).not.toContain("From the CLI");
	}, 120_000);

	it("creates a voice from a published .zip with the CLI, and names what a zip given as the model holds", async () => {
		const archive = path.join(FIXTURES, "archive/published-voice.zip");
		const ok = await cli(["voices", "create", "--name", "From a zip", "--archive", archive]);
		expect(ok.code, ok.stderr).toBe(0);
		expect(ok.stderr).toContain(
			"From published-voice.zip: model Aurora/Aurora.pth, index Aurora/added_IVF13_Flat_nprobe_1_Aurora_v2.index; left out Aurora/ (a folder), Aurora/trained_IVF4_Flat_nprobe_1_Aurora_v2.index (RVC's trained_ index",
		);
		expect(ok.stderr).toMatch(/Uploading index +100%/);
		expect(ok.stdout).toMatch(/^Voice "From a zip" is ready \(([0-9a-f-]{36})\)/);
		const id = /\(([0-9a-f-]{36})\)/.exec(ok.stdout)?.[1] ?? "";
		const voice = await api<{ files: Record<string, Record<string, unknown>> }>(`/api/v1/voices/${id}`);
		expect(voice.files.model).toMatchObject({ file_name: "Aurora.pth", size_bytes: MODEL.length });
		expect(voice.files.index).toMatchObject({
			file_name: "added_IVF13_Flat_nprobe_1_Aurora_v2.index",
			size_bytes: INDEX.length,
		});

		// An archive of several models is refused naming them, and --model names the one to use.
		const several = path.join(FIXTURES, "archive/two-models.zip");
		const unnamed = await cli(["voices", "create", "--name", "Two", "--archive", several, "--no-wait"]);
		expect(unnamed.code).toBe(2);
		expect(unnamed.stderr).toContain("The archive holds several models (VoiceA/VoiceA.pth, VoiceB/VoiceB.pth)");
		const named = await cli([
			"voices",
			"create",
			"--name",
			"Two",
			"--archive",
			several,
			"--model",
			"VoiceB/VoiceB.pth",
			"--no-wait",
		]);
		expect(named.code, named.stderr).toBe(0);
		expect(named.stderr).toContain("From two-models.zip: model VoiceB/VoiceB.pth");
		const twoId = named.stdout.trim();
		const two = await api<{ files: Record<string, Record<string, unknown>> }>(`/api/v1/voices/${twoId}`);
		expect(two.files.model).toMatchObject({ file_name: "VoiceB.pth" });
		await api(`/api/v1/voices/${twoId}`, { method: "DELETE" });
		// Given as the model, the archive is refused before anything is sent.
		const asModel = await cli(["voices", "create", "--name", "Zip as model", "--model", archive]);
		expect(asModel.code).not.toBe(0);
		expect(asModel.stderr).toMatch(/The model file is a zip archive holding Aurora\/Aurora\.pth/);
		expect((await cli(["voices"])).stdout).not.toContain("Zip as model");
	}, 120_000);

	it("deletes a voice while its conversion runs: the conversion completes, its files go afterwards", async () => {
		const created = await client.voices.create({
			name: "Deleted while running",
			files: { model: { source: MODEL }, index: { source: INDEX } },
		});
		expect((await client.waitForVoice(created.id, { intervalMs: 200 })).status).toBe("ready");
		// Long enough to still be converting when the delete arrives.
		const seconds = 60;
		const source = makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000 * seconds, encoding: "pcm", bits: 16 });
		const file = await client.uploadAudio(source, { fileName: "long.wav", mimeType: "audio/wav" });
		const conversion = await client.conversions.create({
			audio_file_id: file.id,
			voice_model_id: created.id,
			pitch_shift: "same_octave",
			use_preview: false,
		});
		let status = "";
		for (const deadline = Date.now() + 30_000; status !== "processing" && Date.now() < deadline; ) {
			status = (await client.conversions.get(conversion.id)).status;
			if (status === "completed" || status === "failed") break;
			await new Promise((r) => setTimeout(r, 50));
		}
		expect(status, runner.log().slice(-2000)).toBe("processing");
		await client.voices.delete(created.id);
		await expect(client.voices.get(created.id)).rejects.toMatchObject({ status: 404 });
		await expect(
			client.conversions.create({ audio_file_id: file.id, voice_model_id: created.id, pitch_shift: "same_octave" }),
		).rejects.toMatchObject({ status: 404 });
		// The files' objects: each upload's bytes are kept under its signed key and a suffix of their own.
		const keysUnder = async (prefix: string) =>
			(await stack.env.BUCKET.list({ prefix })).objects.map((object) => object.key);
		expect(await keysUnder(`account-voices/${created.id}/model`)).toHaveLength(1);

		const done = await client.waitForConversion(conversion.id, { initialIntervalMs: 200, maxIntervalMs: 500 });
		expect(done, runner.log().slice(-2000)).toMatchObject({ status: "completed" });
		const output = readWav(new Uint8Array(await (await client.downloadConversion(done)).arrayBuffer()));
		expect(output.durationSeconds).toBeCloseTo(seconds, 1);
		// The cron safety net removes the files of a deleted voice once no conversion runs with it.
		await stack.harness.getWorker().scheduled({ cron: "* * * * *", scheduledTime: new Date() });
		expect(await keysUnder(`account-voices/${created.id}/`)).toEqual([]);
	}, 120_000);

	it("has the SDK refuse a file that is not what its role takes before sending anything", async () => {
		const before = (await client.voices.list({ owner: "account" })).length;
		const attempt = client.voices.create({ name: "Wrong", files: { model: { source: INDEX } } });
		await expect(attempt).rejects.toBeInstanceOf(VoiceConversionError);
		await expect(attempt).rejects.toMatchObject({
			message: "The model file is not an RVC checkpoint (.pth) or an RVC synthesizer exported to ONNX",
		});
		expect((await client.voices.list({ owner: "account" })).length).toBe(before);
	});

	it("serves an RVC v1 voice on the deployment's contentvec_v1, and fails an Applio voice of another embedder", async () => {
		const created = await client.voices.create({ name: "Old v1 voice", files: { model: { source: V1_MODEL } } });
		const voice = await waitForVoice(created.id);
		expect(voice, runner.log().slice(-2000)).toMatchObject({ status: "ready", error_message: null });
		const output = await convertTwoSeconds(created.id);
		expect(output.sampleRate).toBe(40_000);
		expect(output.durationSeconds).toBeCloseTo(2, 1);

		const hubert = await client.voices.create({
			name: "Chinese HuBERT voice",
			files: { model: { source: fixture("refused-embedder-chinese-hubert.pth") } },
		});
		const refused = await waitForVoice(hubert.id);
		expect(refused.status).toBe("failed");
		expect(refused.error_message).toMatch(
			/^The model file cannot be used: this voice was trained on "chinese-hubert-base" features/,
		);
	}, 180_000);
});
