/**
 * Local runs stay local: the wrangler commands that `npm run dev`, the tests and the admin tool run post no usage
 * metrics to Cloudflare (`send_metrics = false` in wrangler.toml), for a developer who never chose either way.
 */
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../../gpu-runner/test/helpers/scratch.ts";

const ROOT = path.join(import.meta.dirname, "..", "..");

describe("wrangler usage metrics", () => {
	it("are not sent by the project's wrangler commands", async () => {
		const { WRANGLER_SEND_METRICS: _, XDG_CONFIG_HOME: __, ...inherited } = process.env;
		// A home of its own: no earlier answer to wrangler's metrics question, which wrangler takes as a yes.
		const env = { ...inherited, HOME: scratchDir("wrangler-home"), WRANGLER_LOG: "debug" };
		const persist = scratchDir("wrangler-state");
		const { stdout, stderr } = await promisify(execFile)(
			"npx",
			["wrangler", "d1", "migrations", "apply", "DB", "--local", "--persist-to", persist],
			{ cwd: ROOT, env, maxBuffer: 16 * 1024 * 1024 },
		);
		const log = stdout + stderr;
		expect(log).toMatch(/Migrations to be applied/);
		expect(log).toMatch(/Metrics dispatcher: Dispatching disabled/);
		expect(log).not.toMatch(/Metrics dispatcher: Posting data/);
	}, 60_000);
});
