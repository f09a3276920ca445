/**
 * The real runner process (src/main.ts) against the fake API: signals are delivered to a real child process,
 * as an orchestrator would send them.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CLIENT_ID, CLIENT_SECRET, FakeRunnerApi } from "./helpers/fake-runner-api.ts";
import { wavJob } from "./helpers/runner-harness.ts";

let api: FakeRunnerApi;
let dir: string;
let child: ChildProcess | undefined;
let output = "";

beforeEach(async () => {
	api = await new FakeRunnerApi().start();
	dir = mkdtempSync(join(tmpdir(), "runner-process-"));
	output = "";
});
afterEach(async () => {
	if (child && child.exitCode === null) child.kill("SIGKILL");
	await api.close();
	rmSync(dir, { recursive: true, force: true });
});

function startRunnerProcess(graceSeconds: number): Promise<number | null> {
	child = spawn(process.execPath, ["--import", "./src/resolve-fallback.ts", "src/main.ts"], {
		cwd: join(import.meta.dirname, ".."),
		env: {
			PATH: process.env.PATH,
			RUNNER_API_BASE_URL: api.baseUrl,
			RUNNER_CLIENT_ID: CLIENT_ID,
			RUNNER_CLIENT_SECRET: CLIENT_SECRET,
			RUNNER_HEALTH_HOST: "127.0.0.1",
			RUNNER_HEALTH_PORT: "0",
			RUNNER_CACHE_DIR: join(dir, "cache"),
			RUNNER_WORK_DIR: join(dir, "work"),
			RUNNER_LEASE_WAIT_SECONDS: "1",
			RUNNER_SHUTDOWN_GRACE_SECONDS: String(graceSeconds),
		},
		stdio: ["ignore", "pipe", "pipe"],
	});
	child.stdout?.on("data", (chunk: Buffer) => {
		output += chunk.toString();
	});
	child.stderr?.on("data", (chunk: Buffer) => {
		output += chunk.toString();
	});
	return new Promise((resolve) => child?.once("exit", (code) => resolve(code)));
}

async function leasedJob(seconds: number, trickle: number) {
	const job = wavJob(seconds, { trickleBytesPer50ms: trickle });
	api.enqueue(job);
	await api.waitFor(() => api.leaseFor(job.conversionId) !== undefined);
	return api.leaseFor(job.conversionId)?.lease_id ?? "";
}

describe("runner process signals", () => {
	it("SIGTERM mid-job: finishes the job within the grace period, reports it, exits 0", async () => {
		const exited = startRunnerProcess(30);
		const leaseId = await leasedJob(1, 4_000); // about 0.6 s of download
		child?.kill("SIGTERM");
		expect(await exited).toBe(0);
		expect(api.finalReport(leaseId)?.type).toBe("complete");
		expect(output).toContain("signal received: stopping gracefully");
		expect(output).not.toContain(CLIENT_SECRET);
		expect(output).not.toContain("sig=");
	});

	it("SIGTERM mid-job past the grace period: releases the lease, exits 0", async () => {
		const exited = startRunnerProcess(0.3);
		const leaseId = await leasedJob(3, 1_000); // about 13 s of download
		child?.kill("SIGTERM");
		expect(await exited).toBe(0);
		expect(api.finalReport(leaseId)).toMatchObject({ type: "release" });
	});

	it("a second signal exits at once", async () => {
		const exited = startRunnerProcess(60);
		await leasedJob(3, 1_000);
		child?.kill("SIGTERM");
		await api.waitFor(() => output.includes("stopping gracefully"));
		const started = Date.now();
		child?.kill("SIGTERM");
		expect(await exited).toBe(130);
		expect(Date.now() - started).toBeLessThan(2_000);
	});

	it("refuses to start with bad configuration and says why", async () => {
		child = spawn(process.execPath, ["--import", "./src/resolve-fallback.ts", "src/main.ts"], {
			cwd: join(import.meta.dirname, ".."),
			env: { PATH: process.env.PATH, RUNNER_API_BASE_URL: "nope" },
			stdio: ["ignore", "pipe", "pipe"],
		});
		child.stderr?.on("data", (chunk: Buffer) => {
			output += chunk.toString();
		});
		const code = await new Promise((resolve) => child?.once("exit", resolve));
		expect(code).toBe(2);
		expect(output).toContain("RUNNER_CLIENT_SECRET");
	});
});
