/**
 * What `npm run dev` saves for the CLI (scripts/lib/seed.ts), against a real local D1 and R2, read back the way the
 * CLI reads it (cli/config.ts).
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveConnection } from "../../cli/config.ts";
import { type AdminBackend, localBackend, ROOT } from "../../scripts/lib/admin-backend.ts";
import { seedDemo } from "../../scripts/lib/seed.ts";

let dir: string;
let backend: AdminBackend;

beforeAll(async () => {
	dir = await mkdtemp(path.join(tmpdir(), "vc-seed-test-"));
	execFileSync("npx", ["wrangler", "d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], {
		cwd: ROOT,
		stdio: "ignore",
	});
	process.env.WRANGLER_LOG = "error";
	backend = await localBackend(dir);
});

afterAll(async () => {
	await backend?.close();
	await rm(dir, { recursive: true, force: true });
});

describe("demo seed", () => {
	it("saves the address the dev stack listens on with the demo client, and the CLI connects there", async () => {
		const file = path.join(dir, ".wrangler", "demo-credentials.json");
		const first = await seedDemo(backend, file, "http://127.0.0.1:8941");
		expect(JSON.parse(await readFile(file, "utf8"))).toEqual({ ...first, base_url: "http://127.0.0.1:8941" });
		expect((await stat(file)).mode & 0o777).toBe(0o600);
		expect(resolveConnection({}, {}, file)).toMatchObject({
			baseUrl: "http://127.0.0.1:8941",
			clientId: first.client_id,
			clientSecret: first.client_secret,
			source: "local demo",
		});

		// The next start on another port keeps the client and moves the address.
		const second = await seedDemo(backend, file, "http://127.0.0.1:8787");
		expect(second).toEqual(first);
		expect(resolveConnection({}, {}, file).baseUrl).toBe("http://127.0.0.1:8787");
	}, 120_000);
});
