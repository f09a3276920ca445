/**
 * The GPU runner as its own process (CPU `dsp` engine), pointed at a local stack: what end-to-end tests need to
 * see conversions actually run. Its output is kept so a failing test can show it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Credentials } from "./local-stack.ts";
import { ROOT } from "./local-stack.ts";

export interface RunnerProcess {
	process: ChildProcess;
	/** Everything the runner printed so far (stdout and stderr). */
	log(): string;
	/** SIGTERM, then wait for the exit (the runner finishes or releases what it holds). */
	stop(): Promise<void>;
}

export function startRunner(
	baseUrl: string,
	runnerClient: Credentials,
	env: Record<string, string> = {},
): RunnerProcess {
	let output = "";
	// Its own artifact cache (and recent-voices list), so no test leaves files in the checkout or reuses another's.
	const cacheDir = mkdtempSync(path.join(tmpdir(), "runner-cache-"));
	const child = spawn(process.execPath, ["--import", "./src/resolve-fallback.ts", "src/main.ts"], {
		cwd: path.join(ROOT, "gpu-runner"),
		env: {
			...process.env,
			RUNNER_API_BASE_URL: baseUrl,
			RUNNER_CLIENT_ID: runnerClient.clientId,
			RUNNER_CLIENT_SECRET: runnerClient.clientSecret,
			RUNNER_ENGINES: "dsp",
			RUNNER_CAPACITY: "2",
			RUNNER_HEALTH_HOST: "127.0.0.1",
			RUNNER_HEALTH_PORT: "0",
			RUNNER_LEASE_WAIT_SECONDS: "5",
			RUNNER_SHUTDOWN_GRACE_SECONDS: "10",
			RUNNER_CACHE_DIR: cacheDir,
			...env,
		},
		stdio: ["ignore", "pipe", "pipe"],
	});
	const append = (chunk: Buffer) => {
		output += chunk;
	};
	child.stdout?.on("data", append);
	child.stderr?.on("data", append);
	child.once("exit", () => rmSync(cacheDir, { recursive: true, force: true }));
	return {
		process: child,
		log: () => output,
		async stop() {
			if (child.exitCode !== null || child.signalCode !== null) return;
			const exited = new Promise((resolve) => child.once("exit", resolve));
			child.kill("SIGTERM");
			await exited;
		},
	};
}
