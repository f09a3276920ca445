import { existsSync, utimesSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ArtifactCache } from "../src/artifacts/artifact-cache.ts";
import { DspEngine } from "../src/engines/dsp/dsp-engine.ts";
import type { AudioBlock, EngineJob } from "../src/engines/engine.ts";
import { FakeRunnerApi } from "./helpers/fake-runner-api.ts";
import { readWavHeader, startTestRunner, wavJob } from "./helpers/runner-harness.ts";
import { harmonicTone } from "./helpers/signals.ts";
import { makeWav } from "./helpers/wav-files.ts";

let api: FakeRunnerApi;
let runner: ReturnType<typeof startTestRunner> | undefined;

/** Wait for a condition on the API's side, then for the runner to finish its bookkeeping of that job. */
async function waitUntil(condition: () => boolean): Promise<void> {
	await api.waitFor(condition);
	await api.waitFor(() => runner?.loop.activeJobs === 0);
}

beforeEach(async () => {
	api = await new FakeRunnerApi().start();
});
afterEach(async () => {
	await runner?.dispose();
	runner = undefined;
	await api.close();
});

describe("lease loop against the runner API", () => {
	it("leases, converts, uploads and completes a job", async () => {
		const job = wavJob(2);
		api.enqueue(job);
		runner = startTestRunner(api);
		await waitUntil(() => api.uploads.has(job.conversionId) && api.events.some((e) => e.type === "complete"));

		const lease = api.leaseFor(job.conversionId);
		const report = api.finalReport(lease?.lease_id ?? "");
		expect(report?.type).toBe("complete");
		const upload = api.uploads.get(job.conversionId);
		expect(upload?.contentType).toBe("audio/wav");
		expect(upload?.contentLength).toBe(upload?.body.length);
		const header = readWavHeader(upload?.body ?? new Uint8Array());
		expect(header).toMatchObject({ riff: "RIFF", wave: "WAVE", channels: 1, sampleRate: 22_050, bits: 16 });
		expect(Math.abs(header.seconds - 2)).toBeLessThanOrEqual(0.01);
		if (report?.type === "complete") {
			expect(report.body.output.size_bytes).toBe(upload?.body.length);
			expect(report.body.output.duration_seconds).toBeCloseTo(header.seconds, 6);
			expect(report.body.metrics?.execution_provider).toBe("cpu");
		}
		expect(api.leaseRequests[0]).toMatchObject({ runner_id: "test-runner", capacity: 1, engines: ["dsp"] });
		expect(await runner.outcomes()).toEqual({ completed: 1 });
	});

	it("acknowledges each lease with a heartbeat as it arrives, as its lease request says it will", async () => {
		api.heartbeatIntervalSeconds = 60;
		const job = wavJob(1, { trickleBytesPer50ms: 8_000 });
		api.enqueue(job);
		runner = startTestRunner(api);
		await api.waitFor(() => api.leaseFor(job.conversionId) !== undefined);
		const lease = api.leaseFor(job.conversionId);
		expect(api.leaseRequests[0]).toMatchObject({ acknowledges: true });
		// Long before the 60 s interval: the acknowledgement, while the job still downloads its trickling source.
		await api.waitFor(() => api.eventsFor(lease?.lease_id ?? "").some((e) => e.type === "heartbeat"));
		expect(api.finalReport(lease?.lease_id ?? "")).toBeUndefined();
		await waitUntil(() => api.finalReport(lease?.lease_id ?? "") !== undefined);
		expect(api.finalReport(lease?.lease_id ?? "")?.type).toBe("complete");
	});

	it("retries a lease's acknowledgement that fails, long before the heartbeat interval", async () => {
		api.heartbeatIntervalSeconds = 60;
		api.faults.set("heartbeat", { status: 503, remaining: 2 });
		// A source that takes about 4 s to arrive: the job outlasts two refused tries a second apart.
		const job = wavJob(2, { trickleBytesPer50ms: 1_000 });
		api.enqueue(job);
		runner = startTestRunner(api);
		await waitUntil(() => api.finalReport(api.leaseFor(job.conversionId)?.lease_id ?? "") !== undefined);
		const events = api.eventsFor(api.leaseFor(job.conversionId)?.lease_id ?? "").map((e) => e.type);
		// With the interval at 60 s, only a retried acknowledgement can have got through before the report.
		expect(events.indexOf("heartbeat")).toBeGreaterThanOrEqual(0);
		expect(events.indexOf("heartbeat")).toBeLessThan(events.indexOf("complete"));
		expect(api.faults.get("heartbeat")?.remaining).toBe(0);
	});

	it("runs jobs concurrently up to its capacity and no further", async () => {
		const jobs = [1, 2, 3].map(() => wavJob(1, { trickleBytesPer50ms: 8_000 }));
		for (const job of jobs) api.enqueue(job);
		runner = startTestRunner(api, { capacity: 2 });
		let peak = 0;
		await api.waitFor(() => {
			peak = Math.max(peak, runner?.loop.activeJobs ?? 0);
			return api.events.filter((e) => e.type === "complete").length === 3;
		});
		await waitUntil(() => true);
		expect(peak).toBe(2);
		expect(Math.max(...api.leaseRequests.map((r) => r.capacity))).toBe(2);
		expect(await runner.outcomes()).toEqual({ completed: 3 });
	});

	it("backs off and retries when the API answers 5xx, then succeeds", async () => {
		api.faults.set("leases", { status: 503, remaining: 3 });
		api.faults.set("complete", { status: 502, remaining: 2 });
		const job = wavJob(0.5);
		api.enqueue(job);
		runner = startTestRunner(api);
		await waitUntil(() => api.events.some((e) => e.type === "complete"));
		const errors = Object.fromEntries(
			(await runner.metrics.apiErrors.get()).values.map((v) => [v.labels.operation, v.value]),
		);
		expect(errors).toEqual({ lease: 3, complete: 2 });
		expect(await runner.outcomes()).toEqual({ completed: 1 });
	});

	it("keeps reporting a finished job through an API outage within the report window", async () => {
		// 30 failed tries (about a second here) is past the 5 attempts, within the window: the output is not lost.
		api.faults.set("complete", { status: 503, remaining: 30 });
		api.enqueue(wavJob(0.5));
		const started = startTestRunner(api, { reportWindowMs: 20_000 });
		runner = started;
		await waitUntil(() => api.events.some((e) => e.type === "complete"));
		expect(await started.outcomes()).toEqual({ completed: 1 });
		const errors = (await started.metrics.apiErrors.get()).values.find((v) => v.labels.operation === "complete");
		expect(errors?.value).toBe(30);
	});

	it("counts a job whose final report never reached the Worker as not_reported", async () => {
		api.faults.set("complete", { status: 502, remaining: 1_000 });
		api.enqueue(wavJob(0.5));
		const started = startTestRunner(api);
		runner = started;
		await expect.poll(async () => (await started.outcomes()).not_reported, { timeout: 10_000 }).toBe(1);
		expect(await started.outcomes()).toEqual({ not_reported: 1 });
		expect(api.events.some((e) => e.type === "complete")).toBe(false);
	});

	it("fails a corrupt source permanently as corrupted_source", async () => {
		const job = wavJob(1);
		job.source = new Uint8Array([
			...new TextEncoder().encode("RIFF\x10\0\0\0WAVEfmt "),
			...new Uint8Array(200).fill(7),
		]);
		api.enqueue(job);
		runner = startTestRunner(api);
		await waitUntil(() => api.events.some((e) => e.type === "fail"));
		const report = api.events.find((e) => e.type === "fail");
		expect(report?.type === "fail" && report.body).toMatchObject({ kind: "permanent", reason: "corrupted_source" });
		expect(api.uploads.size).toBe(0);
		expect(await runner.outcomes()).toEqual({ failed_permanent: 1 });
	});

	it("fails an unsupported container permanently as unsupported_format", async () => {
		const job = wavJob(1);
		job.source = new Uint8Array([0x4f, 0x67, 0x67, 0x53, ...new Uint8Array(300)]); // Ogg
		api.enqueue(job);
		runner = startTestRunner(api);
		await waitUntil(() => api.events.some((e) => e.type === "fail"));
		const report = api.events.find((e) => e.type === "fail");
		expect(report?.type === "fail" && report.body).toMatchObject({ kind: "permanent", reason: "unsupported_format" });
	});

	it("fails a job at once as internal where an older Worker does not know its reason, instead of leaving it unreported", async () => {
		// The reasons of a Worker from before `output_too_large`: it answers that one 400 invalid_request.
		api.failReasons = ["corrupted_source", "unsupported_format", "too_large", "internal"];
		// 14 hours of 22,050 Hz mono is a 2.2 GB WAV, over the 2 GiB an output may have: refused before converting.
		const job = wavJob(1, { durationSeconds: 14 * 3600 });
		api.enqueue(job);
		runner = startTestRunner(api);
		await waitUntil(() => api.events.some((e) => e.type === "fail"));
		const report = api.finalReport(api.leaseFor(job.conversionId)?.lease_id ?? "");
		expect(report?.type === "fail" && report.body).toMatchObject({
			kind: "permanent",
			reason: "internal",
			message: expect.stringMatching(/output too large: 14\.00 h of 22050 Hz/),
		});
		expect(api.uploads.size).toBe(0);
		expect(await runner.outcomes()).toEqual({ failed_permanent: 1 });
	});

	/** Run one job to its final report and return it, with the runner's outcome counts. */
	async function finalReportOf(job: ReturnType<typeof wavJob>) {
		api.enqueue(job);
		runner = startTestRunner(api);
		await waitUntil(() => api.events.some((e) => e.type === "fail" || e.type === "complete"));
		const lease = api.leaseFor(job.conversionId);
		return { report: api.finalReport(lease?.lease_id ?? ""), outcomes: await runner.outcomes() };
	}

	it("fails a header that declares 4,000,000,000 Hz permanently, before any engine allocates for it", async () => {
		const job = wavJob(1);
		new DataView(job.source.buffer).setUint32(24, 4_000_000_000, true); // fmt sample rate
		const { report, outcomes } = await finalReportOf(job);
		expect(report?.type === "fail" && report.body).toMatchObject({
			kind: "permanent",
			reason: "unsupported_format",
			message: expect.stringMatching(/4000000000 Hz/),
		});
		expect(outcomes).toEqual({ failed_permanent: 1 });
		expect(api.uploads.size).toBe(0);
	});

	it("fails a float WAV holding NaN permanently as corrupted_source", async () => {
		const job = wavJob(1);
		job.source = makeWav([harmonicTone(180, 1, 22_050)], 22_050, { kind: "float", bits: 32 });
		new DataView(job.source.buffer).setFloat32(44 + 4 * 11_025, Number.NaN, true);
		const { report, outcomes } = await finalReportOf(job);
		expect(report?.type === "fail" && report.body).toMatchObject({
			kind: "permanent",
			reason: "corrupted_source",
			message: expect.stringMatching(/NaN sample at 0\.500 s/),
		});
		expect(outcomes).toEqual({ failed_permanent: 1 });
	});

	it("fails a source that decodes to less audio than its metadata states, instead of a short output", async () => {
		const { report, outcomes } = await finalReportOf(wavJob(1, { durationSeconds: 2 }));
		expect(report?.type === "fail" && report.body).toMatchObject({
			kind: "permanent",
			reason: "corrupted_source",
			message: expect.stringMatching(/decodes to 1\.000 s of audio but its metadata says 2\.000 s/),
		});
		expect(outcomes).toEqual({ failed_permanent: 1 });
		expect(api.uploads.size).toBe(0);
	});

	it("fits the output to the stated duration when the decoded length is within a frame of it", async () => {
		const { report } = await finalReportOf(wavJob(1, { durationSeconds: 1.02 }));
		expect(report?.type === "complete" && report.body.output.duration_seconds).toBe(1.02);
	});

	it("fails transiently when the source cannot be downloaded", async () => {
		api.enqueue(wavJob(1, { sourceStatus: 503 }));
		runner = startTestRunner(api);
		await waitUntil(() => api.events.some((e) => e.type === "fail"));
		const report = api.events.find((e) => e.type === "fail");
		expect(report?.type === "fail" && report.body).toMatchObject({ kind: "transient", reason: "internal" });
		expect(await runner.outcomes()).toEqual({ failed_transient: 1 });
	});

	it("keeps heartbeating through API errors and completes the job", async () => {
		api.heartbeatIntervalSeconds = 0.05;
		api.faults.set("heartbeat", { status: 503, remaining: 2 });
		const job = wavJob(1, { trickleBytesPer50ms: 4_000 }); // about 0.6 s
		api.enqueue(job);
		runner = startTestRunner(api);
		await waitUntil(() => api.events.some((e) => e.type === "complete"));
		const lease = api.leaseFor(job.conversionId);
		expect(api.eventsFor(lease?.lease_id ?? "").filter((e) => e.type === "heartbeat").length).toBeGreaterThan(0);
		const errors = (await runner.metrics.apiErrors.get()).values.find((v) => v.labels.operation === "heartbeat");
		expect(errors?.value).toBe(2);
		expect(await runner.outcomes()).toEqual({ completed: 1 });
	});

	it("downloads a voice's artifacts, verified, and then asks for that voice's jobs first", async () => {
		const voiceId = "33333333-3333-4333-8333-333333333333";
		const artifact = api.serveArtifact("synthesizer", new TextEncoder().encode("pretend model weights"));
		api.enqueue(wavJob(0.5, { voice: { id: voiceId, artifacts: [artifact] } }));
		runner = startTestRunner(api);
		await waitUntil(() => api.events.some((e) => e.type === "complete"));
		await api.waitFor(() => (api.leaseRequests.at(-1)?.loaded_voice_ids ?? []).includes(voiceId));
		expect(api.leaseRequests[0]?.loaded_voice_ids).toEqual([]);
	});

	it("keeps a job's artifacts while it runs; past the budget they go after, and the voice is no longer preferred", async () => {
		const voiceId = "44444444-4444-4444-8444-444444444444";
		const artifact = api.serveArtifact(
			"synthesizer",
			new TextEncoder().encode("pretend model weights, held by the job"),
		);
		const seen: { during?: boolean; removedDuring?: string[] } = {};
		let cache: ArtifactCache | undefined;
		/** The real dsp engine; before converting, it ages the job's artifact and trims the cache. */
		class TrimmingDsp extends DspEngine {
			override async *convert(input: AsyncIterable<AudioBlock>, job: EngineJob, signal: AbortSignal) {
				const path = job.artifactPaths.get("synthesizer") as string;
				const old = new Date(Date.now() - 60 * 60_000);
				utimesSync(path, old, old);
				seen.removedDuring = (await cache?.trim())?.removed;
				seen.during = existsSync(path);
				yield* super.convert(input, job, signal);
			}
		}
		api.enqueue(wavJob(0.5, { voice: { id: voiceId, artifacts: [artifact] } }));
		runner = startTestRunner(api, {
			artifactBudgetBytes: 1,
			engines: new Map([["dsp", { engine: new TrimmingDsp(), info: { name: "dsp", executionProvider: "cpu" } }]]),
		});
		cache = runner.artifacts;
		await waitUntil(() => api.events.some((e) => e.type === "complete"));
		expect(seen).toEqual({ during: true, removedDuring: [] });
		await api.waitFor(() => (api.leaseRequests.at(-1)?.loaded_voice_ids ?? []).includes(voiceId));
		expect((await runner.artifacts.trim()).removed).toEqual([artifact.sha256]);
		expect(existsSync(runner.artifacts.pathFor(artifact))).toBe(false);
		const requests = api.leaseRequests.length;
		await api.waitFor(() => api.leaseRequests.length > requests + 1);
		expect(api.leaseRequests.at(-1)?.loaded_voice_ids).toEqual([]);
	});

	it("fails transiently when an artifact does not match its checksum", async () => {
		api.artifacts.set("model.bin", new Uint8Array([1, 2, 3]));
		const artifact = {
			name: "synthesizer",
			url: `${api.baseUrl}/storage/artifact/model.bin`,
			sha256: "a".repeat(64),
			size_bytes: 3,
		};
		api.enqueue(wavJob(0.5, { voice: { artifacts: [artifact] } }));
		runner = startTestRunner(api);
		await waitUntil(() => api.events.some((e) => e.type === "fail"));
		const report = api.events.find((e) => e.type === "fail");
		expect(report?.type === "fail" && report.body).toMatchObject({ kind: "transient", reason: "internal" });
		expect(report?.type === "fail" && report.body.message).toMatch(/failed verification/);
	});

	it("answers a lease that breaks the contract with a transient failure instead of dropping it", async () => {
		api.enqueueMalformedLease("lease-malformed");
		runner = startTestRunner(api);
		await api.waitFor(() => api.finalReport("lease-malformed") !== undefined);
		const report = api.finalReport("lease-malformed");
		expect(report?.type === "fail" && report.body).toMatchObject({ kind: "transient", reason: "internal" });
		expect(report?.type === "fail" && report.body.message).toMatch(/could not read the lease/);
	});

	it("heartbeats with progress and stops work when the lease is lost", async () => {
		api.heartbeatIntervalSeconds = 0.1;
		const slow = wavJob(2, { trickleBytesPer50ms: 2_000 }); // ~88 KB: about 2 s to download
		let lostLease = "";
		api.onLeased = (lease) => {
			if (lease.conversion_id !== slow.conversionId) return;
			lostLease = lease.lease_id;
			setTimeout(() => api.lostLeases.add(lease.lease_id), 350);
		};
		api.enqueue(slow);
		runner = startTestRunner(api);
		await api.waitFor(() => runner !== undefined && lostLease !== "" && api.lostLeases.has(lostLease));
		await api.waitFor(() => runner?.loop.activeJobs === 0);
		const beats = api.eventsFor(lostLease).filter((e) => e.type === "heartbeat");
		expect(beats.length).toBeGreaterThanOrEqual(2);
		expect(beats.some((e) => e.type === "heartbeat" && (e.progress ?? 0) > 0)).toBe(true);
		expect(api.finalReport(lostLease)).toBeUndefined(); // the broker took it back: nothing to report
		expect(api.uploads.has(slow.conversionId)).toBe(false);
		expect(await runner.outcomes()).toEqual({ lease_lost: 1 });

		// The runner carries on with the next job.
		const next = wavJob(0.5);
		api.enqueue(next);
		await api.waitFor(() => api.uploads.has(next.conversionId) && api.events.some((e) => e.type === "complete"));
	});

	it("on shutdown stops leasing and lets a running job finish within the grace period", async () => {
		const job = wavJob(1, { trickleBytesPer50ms: 6_000 }); // about 0.4 s
		api.enqueue(job);
		runner = startTestRunner(api);
		await api.waitFor(() => runner?.loop.activeJobs === 1);
		const stopped = runner.loop.stop(20_000);
		expect(runner.loop.state).toBe("stopping");
		const requestsAtStop = api.leaseRequests.length;
		api.enqueue(wavJob(1)); // must not be leased any more
		await stopped;
		await runner.done;
		expect(api.events.filter((e) => e.type !== "heartbeat").map((e) => e.type)).toEqual(["complete"]);
		expect(api.leaseRequests.length).toBe(requestsAtStop);
	});

	it("on shutdown releases the jobs still running when the grace period ends", async () => {
		const job = wavJob(3, { trickleBytesPer50ms: 1_000 }); // about 13 s: cannot finish
		api.enqueue(job);
		runner = startTestRunner(api);
		await api.waitFor(() => runner?.loop.activeJobs === 1);
		await runner.loop.stop(300);
		const lease = api.leaseFor(job.conversionId);
		const report = api.finalReport(lease?.lease_id ?? "");
		expect(report).toMatchObject({ type: "release", reason: "runner shutting down" });
		expect(await runner.outcomes()).toEqual({ released: 1 });
	});
});
