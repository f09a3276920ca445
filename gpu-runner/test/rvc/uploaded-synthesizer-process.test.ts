/**
 * An account's uploaded ONNX synthesizer runs in a process the runner kills at its limits (`session-host-process.ts`):
 * a graph that passes validation's cost rule but blows up only at a conversion's longer windows
 * (`fixtures/onnx/late-matmul.onnx`, `make-hostile-onnx.py`) is stopped, its job fails for good as the voice's fault
 * (`voice_model_limits`, naming the model and the limit), and the next job converts on a fresh process. A genuine
 * uploaded synthesizer converts there to the same output as on the model thread; service voices and `.pth` voices stay
 * on the model thread. Limits come from the runner's settings (`RUNNER_RVC_ONNX_*`, `loadConfig`), set small here.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { VoiceDescriptor } from "../../../src/contracts/runner.ts";
import { loadConfig } from "../../src/config.ts";
import type { Engine } from "../../src/engines/engine.ts";
import { createRvcEngine } from "../../src/engines/rvc/index.ts";
import { inspectModelFile } from "../../src/engines/rvc/model-inspection.ts";
import { ModelLimitError, ProcessSessionHost } from "../../src/engines/rvc/session-host-process.ts";
import { ThreadStoppedError } from "../../src/engines/rvc/thread-client.ts";
import { type FakeJob, FakeRunnerApi } from "../helpers/fake-runner-api.ts";
import { startTestRunner, wavJob } from "../helpers/runner-harness.ts";
import { buildTinyContentVec, buildTinySynthesizer } from "./support/tiny-models.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
const LATE_MATMUL = join(FIXTURES, "onnx", "late-matmul.onnx");
const RVC_EXPORT = join(FIXTURES, "onnx", "rvc-export-v2-f0-40k.onnx");

let api: FakeRunnerApi;
let engine: Engine | undefined;
let runner: ReturnType<typeof startTestRunner> | undefined;

beforeEach(async () => {
	api = await new FakeRunnerApi().start();
});
afterEach(async () => {
	await runner?.dispose();
	runner = undefined;
	await engine?.dispose();
	engine = undefined;
	await api.close();
});

/** The rvc engine on the CPU with the uploaded synthesizers' limits from these `RUNNER_RVC_ONNX_*` settings. */
async function engineWith(settings: Record<string, string>, noiseSeed?: number): Promise<Engine> {
	const config = loadConfig({
		RUNNER_API_BASE_URL: "https://api.example.com",
		RUNNER_CLIENT_ID: "id",
		RUNNER_CLIENT_SECRET: "secret",
		...settings,
	});
	engine = createRvcEngine({
		executionProviders: ["cpu"],
		uploadedSynthesizerLimits: config.rvcUploadedSynthesizerLimits,
		...(noiseSeed !== undefined ? { noiseSeed } : {}),
	});
	await engine.init();
	return engine;
}

/** A job of `seconds` with an rvc voice of these files and params. */
function voiceJob(
	seconds: number,
	synthesizer: Uint8Array,
	params: Record<string, unknown>,
	voice: Partial<VoiceDescriptor> = {},
): FakeJob {
	return wavJob(seconds, {
		voice: {
			engine: "rvc",
			params,
			artifacts: [
				api.serveArtifact("contentvec", buildTinyContentVec()),
				api.serveArtifact("synthesizer", synthesizer),
			],
			account_voice: true,
			...voice,
		},
	});
}

/**
 * The late-matmul voice: one window of about 1 500 frames (14 s, `chunk_seconds` 20), past its 1000-frame threshold:
 * two 10 000 x 10 000 matrices, 400 MB each, and 10^12 multiply-adds.
 */
const hostileJob = () =>
	voiceJob(14, readFileSync(LATE_MATMUL), { sample_rate: 40_000, chunk_seconds: 20, chunk_search_seconds: 1 });

/** Runs `jobs` one after another on a runner of capacity 1; their final reports, in order. */
async function reportsOf(jobs: FakeJob[]) {
	const current = engine as Engine;
	runner = startTestRunner(api, {
		engines: new Map([["rvc", { engine: current, info: { name: "rvc", executionProvider: "cpu" } }]]),
	});
	for (const job of jobs) api.enqueue(job);
	const finals = () => jobs.map((job) => api.leaseFor(job.conversionId)).map((l) => l && api.finalReport(l.lease_id));
	await api.waitFor(() => finals().every((report) => report !== undefined), 120_000);
	return finals();
}

describe("an account's uploaded ONNX synthesizer in a process of its own", () => {
	it("passes validation's graph and cost rules: it misbehaves only above 1000 frames", async () => {
		const result = await inspectModelFile(LATE_MATMUL);
		expect(result.refused).toBeUndefined();
		expect(result.role).toBe("synthesizer");
	});

	it("is killed past a run's deadline; the job fails as the voice's, and the next job converts on a fresh process", async () => {
		// Deadlines of 2 s (0.1 s per audio second, at least 2 s): the tiny models take milliseconds.
		await engineWith({ RUNNER_RVC_ONNX_RUN_MIN_SECONDS: "2", RUNNER_RVC_ONNX_RUN_SECONDS_PER_AUDIO_SECOND: "0.1" });
		const [hostile, again, genuine] = await reportsOf([
			hostileJob(),
			// The same voice on a window under its threshold: loaded again, in a fresh process, and fine there.
			voiceJob(2, readFileSync(LATE_MATMUL), { sample_rate: 40_000 }),
			voiceJob(2, readFileSync(RVC_EXPORT), { sample_rate: 40_000, f0_method: "yin" }),
		]);
		expect(hostile).toMatchObject({ type: "fail", body: { kind: "permanent", reason: "voice_model_limits" } });
		expect(again?.type).toBe("complete");
		const message = hostile?.type === "fail" ? hostile.body.message : "";
		expect(message).toMatch(
			/rvc voice [0-9a-f-]{36}: synthesizer model \S+ \(an account's uploaded ONNX\) was stopped: a run of 1\d{3} frames \(1\d\.\d s of audio\) did not finish within its deadline of 2 s/,
		);
		expect(genuine?.type).toBe("complete");
		await api.waitFor(() => runner?.loop.activeJobs === 0);
		expect(await runner?.outcomes()).toEqual({ failed_permanent: 1, completed: 2 });
	});

	it("is killed past its memory ceiling, and the next job converts", async () => {
		await engineWith({ RUNNER_RVC_ONNX_MEMORY_MB: "300", RUNNER_RVC_ONNX_RUN_MIN_SECONDS: "600" });
		const [hostile, genuine] = await reportsOf([
			hostileJob(),
			voiceJob(2, buildTinySynthesizer({ sampleRate: 40_000 }), { sample_rate: 40_000, f0_method: "yin" }),
		]);
		expect(hostile).toMatchObject({ type: "fail", body: { kind: "permanent", reason: "voice_model_limits" } });
		const message = hostile?.type === "fail" ? hostile.body.message : "";
		expect(message).toMatch(
			/rvc voice [0-9a-f-]{36}: synthesizer model \S+ \(an account's uploaded ONNX\) was stopped: its process reached \d+ MiB/,
		);
		expect(message).toMatch(/past the ceiling of 300 MiB \(RUNNER_RVC_ONNX_MEMORY_MB\)/);
		expect(genuine?.type).toBe("complete");
	});

	it("converts a genuine synthesizer to the same output as the model thread does", async () => {
		await engineWith({}, 7);
		const synthesizer = buildTinySynthesizer({ sampleRate: 40_000 });
		const params = { sample_rate: 40_000, f0_method: "yin", chunk_seconds: 2, chunk_search_seconds: 0.5 };
		const [inProcess, onThread] = [
			voiceJob(5, synthesizer, params, { account_voice: true }),
			voiceJob(5, synthesizer, params, { account_voice: false }),
		];
		const reports = await reportsOf([inProcess, onThread]);
		expect(reports.map((r) => (r?.type === "fail" ? r.body.message : r?.type))).toEqual(["complete", "complete"]);
		const [a, b] = [api.uploads.get(inProcess.conversionId), api.uploads.get(onThread.conversionId)];
		expect(a?.body.length).toBeGreaterThan(5 * 40_000 * 2);
		expect(Buffer.from(a?.body ?? []).equals(Buffer.from(b?.body ?? []))).toBe(true);
	});

	it("holds only an account's uploaded ONNX to the limits: a service voice's ONNX and a .pth voice run on the model thread", async () => {
		// A ceiling under what any process with onnxruntime loaded holds: only a synthesizer in a process can pass it.
		await engineWith({ RUNNER_RVC_ONNX_MEMORY_MB: "64" });
		const synthesizer = buildTinySynthesizer({ sampleRate: 40_000 });
		const params = { sample_rate: 40_000, f0_method: "yin" };
		const [account, service, checkpoint] = await reportsOf([
			voiceJob(1, synthesizer, params),
			voiceJob(1, synthesizer, params, { account_voice: false }),
			voiceJob(1, readFileSync(join(FIXTURES, "v2-f0-40k.pth")), params),
		]);
		expect(account).toMatchObject({ type: "fail", body: { kind: "permanent", reason: "voice_model_limits" } });
		expect(service?.type).toBe("complete");
		expect(checkpoint?.type).toBe("complete");
	});
});

describe("process session host", () => {
	/** RVC's synthesizer inputs without pitch, for `frames` frames. */
	const feeds = (frames: number) => ({
		phone: new ort.Tensor("float32", new Float32Array(frames * 768).fill(0.01), [1, frames, 768]),
		phone_lengths: new ort.Tensor("int64", BigInt64Array.of(BigInt(frames)), [1]),
		ds: new ort.Tensor("int64", BigInt64Array.of(0n), [1]),
		rnd: new ort.Tensor("float32", new Float32Array(frames * 192), [1, 192, frames]),
	});
	const options: ort.InferenceSession.SessionOptions = { executionProviders: ["cpu"], intraOpNumThreads: 1 };

	it("kills its process when a run outlasts its deadline: that run fails at the limit, the queued one as stopped", async () => {
		// slow-matmul.onnx: 200 products of 2000 x 2000 matrices, tens of seconds whatever the frames.
		const host = new ProcessSessionHost({
			runLimit: () => ({ seconds: 1, run: "the slow model" }),
			loadSeconds: 60,
			memoryBytes: 2 ** 40,
		});
		const session = await host.create(join(FIXTURES, "onnx", "slow-matmul.onnx"), options);
		const pid = host.pid as number;
		const outcome = (run: Promise<unknown>) =>
			run.then(
				() => "finished",
				(error: unknown) => error,
			);
		const [running, queued] = [outcome(session.run(feeds(4))), outcome(session.run(feeds(4)))];
		const stopped = await running;
		expect(stopped).toBeInstanceOf(ModelLimitError);
		expect(stopped).toMatchObject({
			limit: "time",
			message: expect.stringMatching(/a run of the slow model did not finish within its deadline of 1 s/),
		});
		expect(await queued).toBeInstanceOf(ThreadStoppedError);
		expect(host.stopped).toBe(true);
		await host.close();
		// The process is gone, not left computing.
		expect(() => process.kill(pid, 0)).toThrow(/ESRCH/);
		await expect(session.run(feeds(4))).rejects.toBeInstanceOf(ThreadStoppedError);
	});

	it("ends its process on close without waiting for the run in progress", async () => {
		const host = new ProcessSessionHost({
			runLimit: () => ({ seconds: 600, run: "the slow model" }),
			loadSeconds: 60,
			memoryBytes: 2 ** 40,
		});
		const session = await host.create(join(FIXTURES, "onnx", "slow-matmul.onnx"), options);
		const pid = host.pid as number;
		const running = session.run(feeds(4)).then(
			() => "finished",
			(error: unknown) => error,
		);
		// The run under way (its request sent), then the close: the engine's dispose, the runner's shutdown.
		await new Promise((resolve) => setTimeout(resolve, 200));
		await host.close();
		expect(await running).toBeInstanceOf(ThreadStoppedError);
		expect(() => process.kill(pid, 0)).toThrow(/ESRCH/);
	});
});
