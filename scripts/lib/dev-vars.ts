/** Local secrets for `wrangler dev`, generated once into `.dev.vars` (ignored by git), never printed. */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";

const key = (id: string) => `${id}:${randomBytes(32).toString("base64url")}`;

const REQUIRED: Record<string, () => string> = {
	TOKEN_SIGNING_KEY: () => key("local-1"),
	STORAGE_SIGNING_KEY: () => key("local-1"),
	WEBHOOK_SECRET_KEY: () => key("1"),
	// Local development only: lets webhooks reach a receiver on this machine.
	ALLOW_LOCAL_WEBHOOK_URLS: () => "true",
};

export async function ensureDevVars(file: string): Promise<void> {
	const existing = existsSync(file) ? await readFile(file, "utf8") : "";
	const present = new Set(existing.split("\n").map((line) => line.split("=")[0]?.trim()));
	const missing = Object.entries(REQUIRED).filter(([name]) => !present.has(name));
	if (missing.length === 0) return;
	const lines = missing.map(([name, make]) => `${name}=${make()}`);
	const prefix = existing && !existing.endsWith("\n") ? "\n" : "";
	await writeFile(file, `${existing}${prefix}${lines.join("\n")}\n`, { mode: 0o600 });
}
