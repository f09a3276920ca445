/**
 * An account's uploaded ONNX synthesizer runs in a process the runner kills at its limits (`session-host-process.ts`):
 * a graph that passes validation's cost rule but blows up only at a conversion's longer windows
 * (`fixtures/onnx/late-matmul.onnx`, `make-hostile-onnx.py`) is stopped, its job fails for good as the voice's fault
 * (`voice_model_limits`, naming the model and the limit), and the next job converts on a fresh process. A genuine
 * uploaded synthesizer converts there to the same output as on the model thread; service voices and `.pth` voices stay
 * on the model thread. Limits come from the runner's settings (`RUNNER_RVC_ONNX_*`, `loadConfig`), set small here.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { VoiceDescriptor } from "../../../src/contracts/runner.ts";
import { loadConfig } from "../../src/config.ts";
import type { Engine } from "../../src/engines/engine.ts";
import { createRvcEngine, type RvcEngineOptions } from "../../src/engines/rvc/index.ts";
import { inspectModelFile } from "../../src/engines/rvc/model-inspection.ts";
import { ModelCache } from "../../src/engines/rvc/models.ts";
import { ModelLimitError, ProcessSessionHost } from "../../src/engines/rvc/session-host-process.ts";
import { ThreadStoppedError } from "../../src/engines/rvc/thread-client.ts";
import { type FakeJob, FakeRunnerApi } from "../helpers/fake-runner-api.ts";
import { startTestRunner, wavJob } from "../helpers/runner-harness.ts";
import { blocksOf, collect } from "../helpers/streams.ts";
import { childrenRunning, gone, peakMiB, statOf } from "./support/processes.ts";
import { buildTinyContentVec, buildTinySynthesizer, writeModels } from "./support/tiny-models.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
const LATE_MATMUL = join(FIXTURES, "onnx", "late-matmul.onnx");
const RVC_EXPORT = join(FIXTURES, "onnx", "rvc-export-v2-f0-40k.onnx");
/** A synthesizer whose session takes hours to load (onnxruntime folds a large convolution as it creates it). */
const SLOW_LOAD = join(FIXTURES, "onnx", "slow-load.onnx");
/** A synthesizer whose session takes seconds to load (slow-load's convolution, smaller). */
const SECONDS_LOAD = join(FIXTURES, "onnx", "seconds-load.onnx");

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

/**
 * The rvc engine on the CPU with the uploaded synthesizers' limits from these `RUNNER_RVC_ONNX_*` settings, and any
 * other engine `options`.
 */
async function engineWith(settings: Record<string, string>, options: RvcEngineOptions = {}): Promise<Engine> {
	const config = loadConfig({
		RUNNER_API_BASE_URL: "https://api.example.com",
		RUNNER_CLIENT_ID: "id",
		RUNNER_CLIENT_SECRET: "secret",
		...settings,
	});
	engine = createRvcEngine({
		executionProviders: ["cpu"],
		uploadedSynthesizerLimits: config.rvcUploadedSynthesizerLimits,
		...options,
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

/** The model processes this test's process started (`session-host-process-child.ts`). */
const modelProcesses = (): number[] => childrenRunning(process.pid, "session-host-process-child");

/** A model process whose peak memory is past `mib`, once one is. */
async function modelProcessPast(mib: number): Promise<number> {
	let found: number | undefined;
	await api.waitFor(() => {
		found = modelProcesses().find((pid) => peakMiB(pid) > mib);
		return found !== undefined;
	}, 60_000);
	return found as number;
}

/**
 * The model process in late-matmul's product (its 400 MB matrices allocated; a process alone holds about 100 MiB),
 * once one is.
 */
const processInProduct = (): Promise<number> => modelProcessPast(300);

/** Has the broker take `job` back (the next heartbeat of its lease is answered 409 lease_lost); its lease's id. */
function loseLease(job: FakeJob): string {
	const lease = api.leaseFor(job.conversionId);
	if (lease === undefined) throw new Error("the job was not leased");
	api.lostLeases.add(lease.lease_id);
	return lease.lease_id;
}

/** A runner of capacity 1 with the engine, its lease heartbeats every second. */
/**
 * A model cache whose isolated synthesizers load in processes of their own (`hosts`, in the order they start), with
 * a run deadline no test reaches and no memory ceiling to speak of.
 */
function processCache(run: string, loadSeconds: number): { cache: ModelCache; hosts: ProcessSessionHost[] } {
	const hosts: ProcessSessionHost[] = [];
	const cache = new ModelCache({ provider: "cpu", intraOpNumThreads: 1 }, 6, {
		newIsolatedHost: () => {
			const host = new ProcessSessionHost({
				runLimit: () => ({ seconds: 600, run }),
				loadSeconds,
				memoryBytes: 2 ** 40,
			});
			hosts.push(host);
			return host;
		},
	});
	return { cache, hosts };
}

function startRunner() {
	api.heartbeatIntervalSeconds = 1;
	runner = startTestRunner(api, {
		engines: new Map([["rvc", { engine: engine as Engine, info: { name: "rvc", executionProvider: "cpu" } }]]),
	});
	return runner;
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
		await engineWith({}, { noiseSeed: 7 });
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

describe("a job that ends while its uploaded synthesizer runs", () => {
	// A deadline of 600 s (at least; 10 s per audio second): only the job's end can stop late-matmul's run.
	const noDeadline = { RUNNER_RVC_ONNX_RUN_MIN_SECONDS: "600" };

	it("stops the run when the lease is lost: its process is killed, the job ends as lost, the voice's next job converts in a fresh one", async () => {
		await engineWith(noDeadline);
		const { loop, outcomes } = startRunner();
		const hostile = hostileJob();
		api.enqueue(hostile);
		const pid = await processInProduct();
		// The broker takes the job back: the next heartbeat is answered 409 lease_lost.
		const leaseId = loseLease(hostile);
		await api.waitFor(() => gone(pid), 30_000);
		await api.waitFor(() => loop.activeJobs === 0);
		expect(await outcomes()).toEqual({ lease_lost: 1 });
		// Nothing reported for a lease the runner no longer holds: not a failure of the voice.
		expect(api.finalReport(leaseId)).toBeUndefined();
		const next = voiceJob(2, readFileSync(LATE_MATMUL), { sample_rate: 40_000 });
		api.enqueue(next);
		await api.waitFor(() => {
			const l = api.leaseFor(next.conversionId);
			return l !== undefined && api.finalReport(l.lease_id) !== undefined;
		}, 60_000);
		expect(api.finalReport(api.leaseFor(next.conversionId)?.lease_id ?? "")?.type).toBe("complete");
		expect(modelProcesses()).not.toContain(pid);
		expect(modelProcesses()).toHaveLength(1);
		await api.waitFor(() => loop.activeJobs === 0);
		expect(await outcomes()).toEqual({ lease_lost: 1, completed: 1 });
	});

	it("stops the run when the runner shuts down past its grace: the job is released, its process gone", async () => {
		await engineWith(noDeadline);
		const { loop, outcomes } = startRunner();
		const hostile = hostileJob();
		api.enqueue(hostile);
		const pid = await processInProduct();
		// No grace: the job is aborted at once, and its lease given back.
		const stopped = loop.stop(0);
		await api.waitFor(() => gone(pid), 30_000);
		await stopped;
		const lease = api.leaseFor(hostile.conversionId);
		expect(api.finalReport(lease?.lease_id ?? "")).toMatchObject({ type: "release", reason: "runner shutting down" });
		expect(await outcomes()).toEqual({ released: 1 });
	});
});

describe("a job that ends while its uploaded synthesizer loads", () => {
	// A load deadline of 600 s: only the job's end can stop slow-load's load.
	const noDeadline = { RUNNER_RVC_ONNX_RUN_MIN_SECONDS: "600" };
	const slowLoadJob = () => voiceJob(2, readFileSync(SLOW_LOAD), { sample_rate: 40_000, f0_method: "yin" });

	/**
	 * The model process in slow-load's load (onnxruntime folding its convolution, whose 144 MB of image, kernel and output
	 * it holds on top of the 100 MiB or so of a process with a small session loaded), once one is.
	 */
	const loadingProcess = (): Promise<number> => modelProcessPast(200);

	it("stops waiting for the load when the lease is lost: the job ends as lost, and the loading process is killed", async () => {
		await engineWith(noDeadline);
		const { loop, outcomes } = startRunner();
		const job = slowLoadJob();
		api.enqueue(job);
		const pid = await loadingProcess();
		const leaseId = loseLease(job);
		await api.waitFor(() => loop.activeJobs === 0, 30_000);
		expect(await outcomes()).toEqual({ lease_lost: 1 });
		expect(api.finalReport(leaseId)).toBeUndefined();
		// No job waits for that load any more: its process is gone, not left loading for up to the load's deadline.
		await api.waitFor(() => gone(pid), 30_000);
		expect(modelProcesses()).toEqual([]);
	});

	it("stops waiting for the load when the runner shuts down past its grace: the job is released, its process gone", async () => {
		await engineWith(noDeadline);
		const { loop, outcomes } = startRunner();
		const job = slowLoadJob();
		api.enqueue(job);
		const pid = await loadingProcess();
		await loop.stop(0);
		const lease = api.leaseFor(job.conversionId);
		expect(api.finalReport(lease?.lease_id ?? "")).toMatchObject({ type: "release", reason: "runner shutting down" });
		expect(await outcomes()).toEqual({ released: 1 });
		await api.waitFor(() => gone(pid), 30_000);
	});

	it("stops the voice's loads on idle model threads, begun for a long job's later windows, with the job", async () => {
		// Two model threads, each lendable to the other's job for a run once it holds the voice.
		await engineWith(noDeadline, { capacity: 2, modelThreads: 2, intraOpNumThreads: 1 });
		const contentvec = writeModels({ contentvec: buildTinyContentVec() }).get("contentvec") as string;
		const job = {
			voice: {
				id: "0b7c9e52-6f1d-4a3e-9c8b-2d4e6f8a0c1e",
				name: "seconds-load",
				engine: "rvc" as const,
				params: { sample_rate: 40_000, f0_method: "yin", chunk_seconds: 1.5 },
				artifacts: [],
				account_voice: true,
			},
			semitones: 0,
			artifactPaths: new Map([
				["contentvec", contentvec],
				["synthesizer", SECONDS_LOAD],
			]),
			input: { sampleRate: 16_000, channels: 1 },
			// Four seconds: more than one window, so the voice is loaded on the idle thread too.
			inputFrames: 64_000,
		};
		const tone = Float32Array.from({ length: 64_000 }, (_, i) => 0.3 * Math.sin((i * 2 * Math.PI * 150) / 16_000));
		const controller = new AbortController();
		const converted = collect((engine as Engine).convert(blocksOf([tone], 16_000, 1600), job, controller.signal)).then(
			() => "converted",
			(error: unknown) => error,
		);
		// The job's own load (seconds), then the same voice's on the idle thread, in a second process.
		await api.waitFor(() => modelProcesses().length === 1, 30_000);
		const own = modelProcesses()[0] as number;
		await api.waitFor(() => modelProcesses().length === 2, 60_000);
		const idleLoad = modelProcesses().find((pid) => pid !== own) as number;
		const reason = new Error("lease lost");
		controller.abort(reason);
		expect(await converted).toBe(reason);
		// Nobody wants that load now: its process is killed, not left to load and then hold the voice there.
		await api.waitFor(() => gone(idleLoad), 30_000);
	});

	it("goes on loading for another job that waits for it; the process is killed once no job does", async () => {
		const contentvec = writeModels({ contentvec: buildTinyContentVec() }).get("contentvec") as string;
		// One cache lent to both jobs, as on a GPU at capacity 2.
		const { cache, hosts } = processCache("slow-load's run", 600);
		try {
			const paths = { contentvec, synthesizer: SLOW_LOAD, isolateSynthesizer: true };
			const [first, second] = [new AbortController(), new AbortController()];
			const outcome = (acquired: ReturnType<ModelCache["acquire"]>) =>
				acquired.then(
					() => "loaded",
					(error: unknown) => error,
				);
			const a = outcome(cache.acquire(paths, { signal: first.signal }));
			const b = outcome(cache.acquire(paths, { signal: second.signal }));
			// Loaded once, in one process, for both.
			await api.waitFor(() => hosts.length > 0);
			expect(hosts).toHaveLength(1);
			const loading = hosts[0] as ProcessSessionHost;
			const pid = loading.pid as number;
			expect(await loadingProcess()).toBe(pid);
			const reason = new Error("lease lost");
			first.abort(reason);
			// The aborted job stops waiting at once, with its abort's reason; the load goes on for the other.
			expect(await a).toBe(reason);
			expect(loading.stopped).toBe(false);
			expect(gone(pid)).toBe(false);
			second.abort(reason);
			expect(await b).toBe(reason);
			// Nobody waits for the load now: its process is killed.
			await api.waitFor(() => gone(pid), 30_000);
			expect(loading.stopped).toBe(true);
			// The voice's next job loads it in a fresh process.
			const third = new AbortController();
			const c = outcome(cache.acquire(paths, { signal: third.signal }));
			await api.waitFor(() => hosts.length === 2);
			const fresh = (hosts[1] as ProcessSessionHost).pid as number;
			expect(fresh).not.toBe(pid);
			expect(gone(fresh)).toBe(false);
			third.abort(reason);
			expect(await c).toBe(reason);
			await api.waitFor(() => gone(fresh), 30_000);
		} finally {
			await cache.dispose();
		}
	});
});

describe("a model process whose runner dies hard", () => {
	it("ends itself when its parent is killed in the middle of a native load", async () => {
		// A runner-like parent: a process host loading slow-load (hours of onnxruntime folding its convolution).
		const parent = spawn(
			process.execPath,
			[join(import.meta.dirname, "support", "runner-like-parent.ts"), "host", SLOW_LOAD],
			{
				stdio: ["ignore", "pipe", "inherit"],
			},
		);
		let pid: number | undefined;
		try {
			let said = "";
			parent.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
				said += chunk;
			});
			await api.waitFor(() => /^\d+\n/.test(said), 30_000);
			pid = Number.parseInt(said, 10);
			const modelPid = pid;
			// In the load: its main thread inside onnxruntime, where neither its `disconnect` handler nor the parent's
			// exit hook can act.
			await api.waitFor(() => peakMiB(modelPid) > 200, 60_000);
			expect(Number(statOf(modelPid)?.[1])).toBe(parent.pid);
			// The runner's process dies as SIGKILL, the out-of-memory killer or a crash end it: no hook of its own runs.
			const exited = new Promise((resolve) => parent.once("exit", resolve));
			parent.kill("SIGKILL");
			await exited;
			// The model process notices its parent's death and ends itself, rather than loading on for hours.
			await api.waitFor(() => gone(modelPid), 20_000);
		} finally {
			parent.kill("SIGKILL");
			if (pid !== undefined && !gone(pid)) process.kill(pid, "SIGKILL");
		}
	});
});

describe("an aborted run in a voice's process that two jobs hold", () => {
	const contentvec = writeModels({ contentvec: buildTinyContentVec() }).get("contentvec") as string;
	/** late-matmul's inputs (no pitch) for `frames` frames. */
	const inputs = (frames: number) => ({
		phone: new Float32Array(frames * 768).fill(0.01),
		frames,
		speakerId: 0,
		rnd: new Float32Array(frames * 192),
	});

	it("is left to the other job, and killed once neither holds the process; a job alone has its run killed at once", async () => {
		// One cache lent to both jobs, as on a GPU at capacity 2; runs with no deadline to speak of.
		const { cache, hosts } = processCache("late-matmul's product", 60);
		try {
			const paths = { contentvec, synthesizer: LATE_MATMUL, isolateSynthesizer: true };
			const [a, b] = [await cache.acquire(paths), await cache.acquire(paths)];
			expect(hosts).toHaveLength(1);
			const first = hosts[0] as ProcessSessionHost;
			const pid = first.pid as number;
			const aborting = new AbortController();
			const run = a.models.synthesizer.synthesize(inputs(1500), 400, undefined, aborting.signal).then(
				() => "finished",
				(error: unknown) => error,
			);
			await processInProduct();
			const reason = new Error("lease lost");
			aborting.abort(reason);
			// The aborted job stops waiting at once, as itself: not the voice's failure.
			expect(await run).toBe(reason);
			a.release();
			// The other job still holds the process: it is not killed under it.
			expect(first.stopped).toBe(false);
			expect(first.abandonedRun).toBe(true);
			expect(gone(pid)).toBe(false);
			// Once no job holds it, the run nobody waits for is ended with its process.
			b.release();
			await api.waitFor(() => gone(pid), 30_000);

			// A job alone with its voice's process: its aborted run is killed at once, and the next job loads the voice
			// in a fresh process, where it runs.
			const c = await cache.acquire(paths);
			expect(hosts).toHaveLength(2);
			const second = hosts[1] as ProcessSessionHost;
			const alone = new AbortController();
			const lone = c.models.synthesizer.synthesize(inputs(1500), 400, undefined, alone.signal).then(
				() => "finished",
				(error: unknown) => error,
			);
			await processInProduct();
			alone.abort(reason);
			expect(await lone).toBe(reason);
			await api.waitFor(() => gone(second.pid as number), 30_000);
			expect(second.stopped).toBe(true);
			c.release();
			const d = await cache.acquire(paths);
			expect(hosts).toHaveLength(3);
			const audio = await d.models.synthesizer.synthesize(inputs(100), 400);
			expect(audio.length).toBeGreaterThanOrEqual(100 * 400);
			d.release();
		} finally {
			await cache.dispose();
		}
	});

	it("drops a run waiting behind the other job's at once when its job ends: never sent, and the other finishes", async () => {
		const { cache, hosts } = processCache("late-matmul's product", 60);
		try {
			const paths = { contentvec, synthesizer: LATE_MATMUL, isolateSynthesizer: true };
			const [a, b] = [await cache.acquire(paths), await cache.acquire(paths)];
			const host = hosts[0] as ProcessSessionHost;
			// The first job's window: two 6000 x 6000 matrices (144 MB each), seconds of onnxruntime.
			let firstSettled = false;
			const first = a.models.synthesizer.synthesize(inputs(1300), 400).finally(() => {
				firstSettled = true;
			});
			await processInProduct();
			// The second job's run waits for its turn behind it, on the same session.
			const aborting = new AbortController();
			const second = b.models.synthesizer.synthesize(inputs(100), 400, undefined, aborting.signal).then(
				() => "finished",
				(error: unknown) => error,
			);
			const reason = new Error("lease lost");
			aborting.abort(reason);
			// It fails with its job's reason while the first run is still under way, not when its turn comes.
			expect(await second).toBe(reason);
			expect(firstSettled).toBe(false);
			b.release();
			// The first job's run is not disturbed: its process is not killed, nor its run abandoned.
			expect(host.abandonedRun).toBe(false);
			const audio = await first;
			expect(audio.length).toBeGreaterThanOrEqual(1300 * 400);
			expect(host.stopped).toBe(false);
			a.release();
		} finally {
			await cache.dispose();
		}
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
	/** What a run came to: "finished", or the error it failed with. */
	const outcome = (run: Promise<unknown>) =>
		run.then(
			() => "finished",
			(error: unknown) => error,
		);
	/**
	 * A host whose runs may take `seconds`, with a session of slow-matmul.onnx (200 products of 2000 x 2000 matrices,
	 * tens of seconds whatever the frames), and its process's id.
	 */
	async function slowSession(seconds: number) {
		const host = new ProcessSessionHost({
			runLimit: () => ({ seconds, run: "the slow model" }),
			loadSeconds: 60,
			memoryBytes: 2 ** 40,
		});
		const session = await host.create(join(FIXTURES, "onnx", "slow-matmul.onnx"), options);
		return { host, session, pid: host.pid as number };
	}

	it("kills its process when a run outlasts its deadline: that run fails at the limit, the queued one as stopped", async () => {
		const { host, session, pid } = await slowSession(1);
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

	it("fails an aborted run with its job's reason: one still queued fails at once, the one running is killed with its process", async () => {
		const { host, session, pid } = await slowSession(600);
		const [first, second] = [new AbortController(), new AbortController()];
		const running = outcome(session.run(feeds(4), { signal: first.signal }));
		const queued = outcome(session.run(feeds(4), { signal: second.signal }));
		await new Promise((resolve) => setTimeout(resolve, 200));
		// The queued run's job ends: it fails at once, and the run ahead of it goes on.
		second.abort(new Error("second job's lease lost"));
		expect(await queued).toMatchObject({ message: "second job's lease lost" });
		expect(host.stopped).toBe(false);
		expect(gone(pid)).toBe(false);
		first.abort(new Error("first job's lease lost"));
		expect(await running).toMatchObject({ message: "first job's lease lost" });
		expect(host.stopped).toBe(true);
		await api.waitFor(() => gone(pid), 30_000);
		await expect(session.run(feeds(4))).rejects.toBeInstanceOf(ThreadStoppedError);
		await host.close();
	});

	it("offers its process first to the out-of-memory killer, and says when the process was killed by something else", async () => {
		const { host, session, pid } = await slowSession(600);
		// The kernel's badness is adjusted to the most: where memory runs out, this process goes before the runner.
		expect(readFileSync(`/proc/${pid}/oom_score_adj`, "utf8").trim()).toBe("1000");
		const running = outcome(session.run(feeds(4)));
		// The run under way, its process's memory read by the host meanwhile (every 50 ms).
		await new Promise((resolve) => setTimeout(resolve, 200));
		// A SIGKILL the runner did not send, as the out-of-memory killer sends it.
		process.kill(pid, "SIGKILL");
		const stopped = await running;
		expect(stopped).toBeInstanceOf(ThreadStoppedError);
		expect(stopped).toMatchObject({
			message: expect.stringMatching(
				/^the model process exited \(SIGKILL, not by the runner: most likely the system's out-of-memory killer \(its memory last read \d+ MiB, the ceiling 1048576 MiB\)\)/,
			),
		});
		expect(host.stopped).toBe(true);
		await host.close();
	});

	it("ends its process on close without waiting for the run in progress", async () => {
		const { host, session, pid } = await slowSession(600);
		const running = outcome(session.run(feeds(4)));
		// The run under way (its request sent), then the close: the engine's dispose, the runner's shutdown.
		await new Promise((resolve) => setTimeout(resolve, 200));
		await host.close();
		expect(await running).toBeInstanceOf(ThreadStoppedError);
		expect(() => process.kill(pid, 0)).toThrow(/ESRCH/);
	});
});
