/**
 * Local runs stay local: the wrangler commands that `npm run dev`, the tests and the admin tool run post no usage
 * metrics to Cloudflare (`keepLocalRunsLocal`, and `send_metrics = false` in wrangler.toml), for a developer who
 * never answered wrangler's question, which wrangler takes as a yes.
 */
import { execFile, spawn } from "node:child_process";
import { createServer } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../../gpu-runner/test/helpers/scratch.ts";
import { keepLocalRunsLocal } from "../../scripts/lib/local-only.ts";

const ROOT = path.join(import.meta.dirname, "..", "..");

/** The environment `npm run dev` gives wrangler, in a home of its own where no answer to the question was given. */
function localEnv(): NodeJS.ProcessEnv {
	const { WRANGLER_SEND_METRICS: _, CLOUDFLARE_CF_FETCH_ENABLED: __, XDG_CONFIG_HOME: ___, ...inherited } = process.env;
	return keepLocalRunsLocal({ ...inherited, HOME: scratchDir("wrangler-home"), WRANGLER_LOG: "debug" });
}

function freePort(): Promise<number> {
	return new Promise((resolve, reject) => {
		const server = createServer().listen(0, "127.0.0.1", () => {
			const { port } = server.address() as { port: number };
			server.close(() => resolve(port));
		});
		server.on("error", reject);
	});
}

/** What wrangler's metrics dispatcher logged: no event posted, and at least one held back. */
function expectNothingPosted(log: string): void {
	expect(log).toMatch(/Metrics dispatcher: Dispatching disabled/);
	expect(log).not.toMatch(/Metrics dispatcher: Posting data/);
}

describe("wrangler usage metrics", () => {
	it("are not sent by the migrations that npm run dev applies", async () => {
		const { stdout, stderr } = await promisify(execFile)(
			"npx",
			["wrangler", "d1", "migrations", "apply", "DB", "--local", "--persist-to", scratchDir("wrangler-state")],
			{ cwd: ROOT, env: localEnv(), maxBuffer: 16 * 1024 * 1024 },
		);
		expect(stdout + stderr).toMatch(/Migrations to be applied/);
		expectNothingPosted(stdout + stderr);
	}, 60_000);

	it("are not sent by wrangler dev", async () => {
		const port = await freePort();
		const args = ["wrangler", "dev", "--ip", "127.0.0.1", "--port", String(port)];
		const child = spawn("npx", [...args, "--persist-to", scratchDir("wrangler-state")], {
			cwd: ROOT,
			env: localEnv(),
			detached: true,
		});
		let log = "";
		const ready = new Promise<void>((resolve, reject) => {
			const read = (chunk: Buffer) => {
				log += chunk.toString();
				if (log.includes("Ready on")) resolve();
			};
			child.stdout.on("data", read);
			child.stderr.on("data", read);
			child.on("exit", (code) => reject(new Error(`wrangler dev exited (${code}):\n${log}`)));
		});
		try {
			await ready;
			// The events sent as a session starts follow its start; give them time to be dispatched.
			await new Promise((resolve) => setTimeout(resolve, 3000));
		} finally {
			const exited = new Promise((resolve) => child.on("exit", resolve));
			process.kill(-(child.pid as number), "SIGTERM");
			await exited;
		}
		expectNothingPosted(log);
	}, 90_000);
});
