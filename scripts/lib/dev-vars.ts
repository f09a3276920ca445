/** Local secrets for `wrangler dev`, kept in `.dev.vars` (ignored by git, mode 0600), never printed. */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, readFile, writeFile } from "node:fs/promises";

const key = (id: string) => `${id}:${randomBytes(32).toString("base64url")}`;

const REQUIRED: Record<string, () => string> = {
	TOKEN_SIGNING_KEY: () => key("local-1"),
	STORAGE_SIGNING_KEY: () => key("local-1"),
	WEBHOOK_SECRET_KEY: () => key("1"),
	// Local development only: lets webhooks reach a receiver on this machine.
	ALLOW_LOCAL_WEBHOOK_URLS: () => "true",
};

const nameOf = (line: string) => line.split("=")[0]?.trim();

async function readLines(file: string): Promise<string[]> {
	const existing = existsSync(file) ? await readFile(file, "utf8") : "";
	return existing.split("\n").filter((line, i, all) => line !== "" || i < all.length - 1);
}

async function writeLines(file: string, lines: string[]): Promise<void> {
	await writeFile(file, `${lines.join("\n")}\n`, { mode: 0o600 });
	// `mode` applies only to a file writeFile creates; one made by hand keeps the owner's eyes only too.
	await chmod(file, 0o600);
}

/** Adds the secrets the Worker needs that the file lacks, generated once; values already there are kept. */
export async function ensureDevVars(file: string): Promise<void> {
	const lines = await readLines(file);
	const present = new Set(lines.map(nameOf));
	const missing = Object.entries(REQUIRED).filter(([name]) => !present.has(name));
	if (missing.length === 0) return;
	await writeLines(file, [...lines, ...missing.map(([name, make]) => `${name}=${make()}`)]);
}

/**
 * Sets these variables in the file, replacing earlier values of theirs and keeping every other line. Values that
 * are secrets go here, not on `wrangler dev`'s command line, which any user of the machine can read (`ps`).
 */
export async function setDevVars(file: string, values: Record<string, string>): Promise<void> {
	const names = new Set(Object.keys(values));
	const kept = (await readLines(file)).filter((line) => !names.has(nameOf(line) ?? ""));
	await writeLines(file, [...kept, ...Object.entries(values).map(([name, value]) => `${name}=${value}`)]);
}
