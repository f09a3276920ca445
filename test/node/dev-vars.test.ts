/** `npm run dev`'s `.dev.vars`: secrets generated once, the playground's demo credentials kept there, owner-only. */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ensureDevVars, setDevVars } from "../../scripts/lib/dev-vars.ts";

const dir = mkdtempSync(path.join(tmpdir(), "vc-dev-vars-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const read = (file: string) =>
	Object.fromEntries(
		readFileSync(file, "utf8")
			.trim()
			.split("\n")
			.map((l) => l.split("=", 2)),
	);

describe(".dev.vars", () => {
	it("gets each missing secret once, keeps those already there, and is readable by its owner only", async () => {
		const file = path.join(dir, "fresh.dev.vars");
		writeFileSync(file, "TOKEN_SIGNING_KEY=mine:abc\nOTHER=1", { mode: 0o644 });
		await ensureDevVars(file);
		const first = read(file);
		expect(first.TOKEN_SIGNING_KEY).toBe("mine:abc");
		expect(first.OTHER).toBe("1");
		expect(first.STORAGE_SIGNING_KEY).toMatch(/^local-1:[\w-]{43}$/);
		expect(first.ALLOW_LOCAL_WEBHOOK_URLS).toBe("true");
		expect(statSync(file).mode & 0o777).toBe(0o600);
		await ensureDevVars(file);
		expect(read(file)).toEqual(first);
	});

	it("holds the playground's credentials, replaced on each run, every other line kept", async () => {
		const file = path.join(dir, "playground.dev.vars");
		await ensureDevVars(file);
		const secrets = read(file);
		await setDevVars(file, { PLAYGROUND_CLIENT_ID: "id-1", PLAYGROUND_CLIENT_SECRET: "secret-1" });
		await setDevVars(file, { PLAYGROUND_CLIENT_ID: "id-2", PLAYGROUND_CLIENT_SECRET: "secret-2" });
		const text = readFileSync(file, "utf8");
		expect(text.match(/PLAYGROUND_CLIENT_SECRET=/g)).toHaveLength(1);
		expect(read(file)).toEqual({ ...secrets, PLAYGROUND_CLIENT_ID: "id-2", PLAYGROUND_CLIENT_SECRET: "secret-2" });
		expect(statSync(file).mode & 0o777).toBe(0o600);
	});
});
