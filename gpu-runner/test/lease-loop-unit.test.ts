/**
 * The lease loop with an in-memory RunnerApi (the loop's collaborators are injectable): races that a real
 * server cannot be made to hit on cue.
 */
import { describe, expect, it } from "vitest";
import type { Lease } from "../../src/contracts/runner.ts";
import type { LeaseBatch, RunnerApi } from "../src/api/runner-api-client.ts";
import { silentLogger } from "../src/logger.ts";
import { LeaseLoop, type LeaseLoopOptions, MIN_LEASE_INTERVAL_MS } from "../src/loop/lease-loop.ts";
import { RunnerMetrics } from "../src/observability/metrics.ts";

const lease: Lease = {
	lease_id: "lease-late",
	conversion_id: "44444444-4444-4444-8444-444444444444",
	attempt: 1,
	lease_expires_at: new Date(Date.now() + 60_000).toISOString(),
	heartbeat_interval_seconds: 20,
	voice: { id: "55555555-5555-4555-8555-555555555555", name: "v", engine: "dsp", params: {}, artifacts: [] },
	source: {
		url: "http://127.0.0.1:9/source",
		mime_type: "audio/wav",
		format: "wav",
		sample_rate: 16_000,
		channels: 1,
		duration_seconds: 1,
		size_bytes: 32_044,
	},
	output: { url: "http://127.0.0.1:9/output", content_type: "audio/wav" },
	semitones: 0,
	use_preview: false,
	preview_seconds: 10,
};

/** A loop whose API answers lease requests with `lease` and takes every other call quietly; it never runs a job. */
function idleLoop(lease: RunnerApi["lease"], options: Partial<LeaseLoopOptions> = {}): LeaseLoop {
	const api: RunnerApi = {
		lease,
		heartbeat: async () => ({ lease_expires_at: new Date().toISOString() }),
		complete: async () => {},
		fail: async () => {},
		release: async () => {},
		reportValidation: async () => {},
		cancelWait: async () => {},
	};
	return new LeaseLoop(
		{ runnerId: "unit", capacity: 1, leaseWaitSeconds: 1, ...options },
		{
			api,
			engines: new Map(),
			processJob: async () => Promise.reject(new Error("unused")),
			metrics: new RunnerMetrics(),
			logger: silentLogger,
		},
	);
}

describe("lease loop with an in-memory API", () => {
	it("releases leases that arrive after the stop began instead of starting them, and cancels the wait", async () => {
		const reports: string[] = [];
		let deliver: ((batch: LeaseBatch) => void) | undefined;
		let waitId: string | undefined;
		const api: RunnerApi = {
			// Ignores the abort signal, like a response already on the wire when the stop comes.
			lease: (request) => {
				waitId = request.wait_id;
				return new Promise((resolve) => {
					deliver = resolve;
				});
			},
			cancelWait: async (id) => {
				reports.push(`cancel wait ${id}`);
			},
			heartbeat: async () => ({ lease_expires_at: new Date().toISOString() }),
			complete: async (id) => {
				reports.push(`complete ${id}`);
			},
			fail: async (id) => {
				reports.push(`fail ${id}`);
			},
			reportValidation: async () => {},
			release: async (id, reason) => {
				reports.push(`release ${id}: ${reason}`);
			},
		};
		let started = 0;
		const loop = new LeaseLoop(
			{ runnerId: "unit", capacity: 1, leaseWaitSeconds: 1 },
			{
				api,
				engines: new Map(),
				processJob: async () => {
					started++;
					throw new Error("a job must not start during shutdown");
				},
				metrics: new RunnerMetrics(),
				logger: silentLogger,
			},
		);
		const done = loop.start();
		await expect.poll(() => deliver).toBeDefined();
		const stopped = loop.stop(5_000);
		deliver?.({ leases: [lease], malformed: [] });
		await stopped;
		await done;
		expect(started).toBe(0);
		// The Worker is told the wait is over (it may not see the connection close), and the late lease goes back.
		expect(waitId).toMatch(/^[0-9a-f-]{36}$/);
		expect(reports.sort()).toEqual([`cancel wait ${waitId}`, "release lease-late: runner shutting down"].sort());
	});

	it("says whether the Worker answers its lease requests, since when it has not, and why", async () => {
		let answer: "fail" | "empty" = "fail";
		let requests = 0;
		const loop = idleLoop(
			async () => {
				requests++;
				if (answer === "fail") throw new Error("connect ECONNREFUSED 127.0.0.1:8787");
				return { leases: [], malformed: [] };
			},
			{ leaseWaitSeconds: 0, backoff: { baseMs: 5, maxMs: 10 } },
		);
		expect(loop.api).toEqual({ reachable: null, failing_since: null, error: null });
		const done = loop.start();
		await expect.poll(() => requests).toBeGreaterThanOrEqual(3);
		const failing = loop.api;
		expect(failing).toMatchObject({ reachable: false, error: expect.stringContaining("ECONNREFUSED") });
		// The first failure's time is kept while they go on.
		const seen = requests;
		await expect.poll(() => requests).toBeGreaterThanOrEqual(seen + 2);
		expect(loop.api.failing_since).toBe(failing.failing_since);
		answer = "empty";
		await expect.poll(() => loop.api.reachable).toBe(true);
		expect(loop.api).toEqual({ reachable: true, failing_since: null, error: null });
		await loop.stop(0);
		await done;
	});

	it("asks again no sooner than a second after an empty answer, even with a lease wait of 0", async () => {
		let requests = 0;
		// A Worker answering at once that nothing is there, as it does for wait_seconds 0.
		const loop = idleLoop(
			async () => {
				requests++;
				return { leases: [], malformed: [] };
			},
			{ leaseWaitSeconds: 0 },
		);
		const done = loop.start();
		await new Promise((resolve) => setTimeout(resolve, MIN_LEASE_INTERVAL_MS / 2));
		// One request in the first half second (a loop without a pause sent thousands).
		expect(requests).toBe(1);
		await loop.stop(0);
		await done;
	});

	it("fails a job for an engine this runner does not have, transiently, so another runner can take it", async () => {
		const reports: string[] = [];
		let leased = false;
		const api: RunnerApi = {
			lease: async () => {
				if (leased) return new Promise<LeaseBatch>(() => {});
				leased = true;
				return { leases: [{ ...lease, voice: { ...lease.voice, engine: "rvc" } }], malformed: [] };
			},
			heartbeat: async () => ({ lease_expires_at: new Date().toISOString() }),
			complete: async () => {},
			fail: async (id, body) => {
				reports.push(`${id} ${body.kind} ${body.reason}`);
			},
			release: async () => {},
			reportValidation: async () => {},
			cancelWait: async () => {},
		};
		const loop = new LeaseLoop(
			{ runnerId: "unit", capacity: 1, leaseWaitSeconds: 1 },
			{
				api,
				engines: new Map(),
				processJob: async () => Promise.reject(new Error("unused")),
				metrics: new RunnerMetrics(),
				logger: silentLogger,
			},
		);
		void loop.start();
		await expect.poll(() => reports).toEqual(["lease-late transient internal"]);
		void loop.stop(0);
	});
});
