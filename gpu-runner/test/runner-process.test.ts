/**
 * The real runner process (src/main.ts) against the fake API: signals are delivered to a real child process,
 * as an orchestrator would send them.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RecentVoices } from "../src/loop/recent-voices.ts";
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

/** Starts the runner's entry point with `env` (and PATH only); its output is gathered, and it resolves to the exit code. */
function spawnRunner(env: NodeJS.ProcessEnv): Promise<number | null> {
	child = spawn(process.execPath, ["--import", "./src/resolve-fallback.ts", "src/main.ts"], {
		cwd: join(import.meta.dirname, ".."),
		env: { PATH: process.env.PATH, ...env },
		stdio: ["ignore", "pipe", "pipe"],
	});
	for (const stream of [child.stdout, child.stderr]) {
		stream?.on("data", (chunk: Buffer) => {
			output += chunk.toString();
		});
	}
	return new Promise((resolve) => child?.once("exit", (code) => resolve(code)));
}

/** The runner against the fake API, with `overrides` to its configuration. */
function startRunnerProcess(graceSeconds: number, overrides: NodeJS.ProcessEnv = {}): Promise<number | null> {
	return spawnRunner({
		RUNNER_API_BASE_URL: api.baseUrl,
		RUNNER_CLIENT_ID: CLIENT_ID,
		RUNNER_CLIENT_SECRET: CLIENT_SECRET,
		RUNNER_HEALTH_HOST: "127.0.0.1",
		RUNNER_HEALTH_PORT: "0",
		RUNNER_CACHE_DIR: join(dir, "cache"),
		RUNNER_WORK_DIR: join(dir, "work"),
		RUNNER_LEASE_WAIT_SECONDS: "1",
		RUNNER_SHUTDOWN_GRACE_SECONDS: String(graceSeconds),
		...overrides,
	});
}

/**
 * A job the runner is working on: it has acknowledged the lease (its first heartbeat, sent as the job starts). The
 * fake API's handing out the lease is not enough: a signal that reaches the runner while the answer is still on its
 * way stops it before the job starts, and the lease goes back unstarted (released, or dropped with the request).
 */
async function leasedJob(seconds: number, trickle: number) {
	const job = wavJob(seconds, { trickleBytesPer50ms: trickle });
	api.enqueue(job);
	const leaseId = () => api.leaseFor(job.conversionId)?.lease_id ?? "";
	await api.waitFor(() => api.eventsFor(leaseId()).some((e) => e.type === "heartbeat"));
	return leaseId();
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

	it("removes what a killed runner left in the work dir at start, writes in a folder of its own, removes it at exit", async () => {
		const work = join(dir, "work");
		const killed = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
		await new Promise((resolve) => killed.once("exit", resolve));
		mkdirSync(join(work, `runner-${killed.pid}`), { recursive: true });
		writeFileSync(join(work, `runner-${killed.pid}`, "output-a.wav"), new Uint8Array(4096));
		writeFileSync(join(work, "output-b.wav"), new Uint8Array(1000));
		writeFileSync(join(work, "keep.txt"), "not the runner's");

		const exited = startRunnerProcess(30);
		await leasedJob(1, 4_000); // about 0.6 s of download
		const own = join(work, `runner-${child?.pid}`);
		await api.waitFor(() => existsSync(own) && readdirSync(own).some((name) => /^output-.+\.wav$/.test(name)));
		expect(readdirSync(work).sort()).toEqual(["keep.txt", `runner-${child?.pid}`]);
		const cleaned = output.split("\n").find((line) => line.includes("work dir cleaned"));
		expect(JSON.parse(cleaned ?? "{}")).toMatchObject({ level: "info", removed_files: 2, removed_bytes: 5096 });

		child?.kill("SIGTERM");
		expect(await exited).toBe(0);
		expect(readdirSync(work)).toEqual(["keep.txt"]);
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
		expect(readdirSync(join(dir, "work"))).toEqual([]);
	});

	it("refuses to start with bad configuration and says why", async () => {
		expect(await spawnRunner({ RUNNER_API_BASE_URL: "nope" })).toBe(2);
		expect(output).toContain("RUNNER_CLIENT_SECRET");
	});

	it("refuses to start when the work or cache folder cannot be written, naming each variable", async () => {
		const file = join(dir, "a-file");
		writeFileSync(file, "");
		const code = await startRunnerProcess(60, {
			RUNNER_CACHE_DIR: join(file, "cache"),
			RUNNER_WORK_DIR: join(file, "work"),
		});
		expect(code).toBe(2);
		expect(output).toContain("RUNNER_WORK_DIR");
		expect(output).toContain("RUNNER_CACHE_DIR");
		expect(api.leaseRequests).toHaveLength(0);
	});
});

describe("runner process and deleted voices", () => {
	it("removes a deleted voice's own files and its warm-up entry, keeping the base models it shared", async () => {
		const cache = join(dir, "cache");
		mkdirSync(join(cache, "artifacts"), { recursive: true });
		const file = (name: string, byte: number) => {
			// Named by its checksum, as a download leaves it: the start-up checks what it finds before offering it.
			const bytes = new Uint8Array(100).fill(byte);
			const sha256 = createHash("sha256").update(bytes).digest("hex");
			writeFileSync(join(cache, "artifacts", `${sha256}.bin`), bytes);
			// Last used before the runner stopped, over ten minutes ago: a use since then may be another runner's,
			// sharing the folder, and keeps the files for ten minutes.
			const used = new Date(Date.now() - 11 * 60_000);
			utimesSync(join(cache, "artifacts", `${sha256}.bin`), used, used);
			return { name, sha256, url: "https://artifact.invalid/", size_bytes: 100 };
		};
		const deleted = "6b1c2c8e-0000-4000-8000-00000000000d";
		const artifacts = [file("synthesizer", 1), file("index", 2), file("contentvec", 3), file("rmvpe", 4)];
		writeFileSync(join(cache, "artifacts", `${artifacts[0]?.sha256}.synthesizer.onnx`), "built from it");
		// As a runner that converted with the voice before it stopped leaves its cache.
		await new RecentVoices(cache).remember({ id: deleted, name: "Gone", engine: "rvc", params: {}, artifacts });
		api.deletedVoices.add(deleted);

		const exited = startRunnerProcess(5);
		await api.waitFor(() => output.includes("deleted voice removed"));
		expect(api.leaseRequests[0]?.loaded_voice_ids).toEqual([deleted]);
		// The base models stay, each with the verification record of the start-up's check (for the runners sharing
		// the folder).
		expect(readdirSync(join(cache, "artifacts")).sort()).toEqual(
			[2, 3].flatMap((i) => [`${artifacts[i]?.sha256}.bin`, `${artifacts[i]?.sha256}.verified`]).sort(),
		);
		expect(await new RecentVoices(cache).load()).toEqual([]);
		// Forgotten: not listed again.
		const asked = api.leaseRequests.length;
		await api.waitFor(() => api.leaseRequests.length > asked);
		expect(api.leaseRequests.at(-1)?.loaded_voice_ids).toEqual([]);
		child?.kill("SIGTERM");
		expect(await exited).toBe(0);
	});
});
