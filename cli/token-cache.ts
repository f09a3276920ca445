/**
 * The CLI's access tokens between runs, so a script that calls it in a loop asks for one token an hour, not one a
 * run (the token endpoint allows 60 a minute per client). One file, `voice-conversion-cli/tokens.json` in
 * `$XDG_CACHE_HOME` (else `~/.cache`), readable by its owner only. Entries are keyed by a SHA-256 of the token
 * endpoint, the client id and the secret, so the secret is not stored and a changed secret fetches a new token;
 * expired entries are dropped at each write. `VOICE_API_TOKEN_CACHE=off` turns it off.
 */
import { createHash, randomUUID } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import type { CachedToken, TokenStore } from "../sdk/index.ts";

export const TOKEN_CACHE_ENV = "VOICE_API_TOKEN_CACHE";

type Entries = Record<string, CachedToken>;

export function tokenCacheFile(env: NodeJS.ProcessEnv = process.env): string {
	const base = env.XDG_CACHE_HOME || path.join(homedir(), ".cache");
	return path.join(base, "voice-conversion-cli", "tokens.json");
}

function readEntries(file: string): Entries {
	try {
		const parsed = JSON.parse(readFileSync(file, "utf8")) as unknown;
		return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Entries) : {};
	} catch {
		return {};
	}
}

/** The store for one client at one token endpoint, or undefined where the cache is turned off. */
export function tokenCache(
	connection: { tokenUrl: string; clientId: string; clientSecret: string },
	env: NodeJS.ProcessEnv = process.env,
	now: () => number = Date.now,
): TokenStore | undefined {
	if (env[TOKEN_CACHE_ENV] === "off") return undefined;
	const file = tokenCacheFile(env);
	const key = createHash("sha256")
		.update(`${connection.tokenUrl}\n${connection.clientId}\n${connection.clientSecret}`)
		.digest("hex");
	return {
		load: () => readEntries(file)[key],
		// Written at once (not after an await), so a run that ends right after its last call still keeps its token.
		save: (token) => {
			const entries = readEntries(file);
			for (const [name, entry] of Object.entries(entries)) {
				if (!(typeof entry?.renewAt === "number" && entry.renewAt > now())) delete entries[name];
			}
			if (token) entries[key] = token;
			else delete entries[key];
			mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
			const temporary = `${file}.${randomUUID()}.tmp`;
			try {
				writeFileSync(temporary, `${JSON.stringify(entries)}\n`, { mode: 0o600 });
				chmodSync(temporary, 0o600);
				renameSync(temporary, file);
			} finally {
				rmSync(temporary, { force: true });
			}
		},
	};
}
