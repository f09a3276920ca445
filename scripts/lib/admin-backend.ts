/**
 * Where admin commands act: the local D1 and R2 that `wrangler dev` uses (through wrangler's platform proxy,
 * fast and offline), or the remote ones through the wrangler CLI (`--remote`).
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { getPlatformProxy } from "wrangler";

export const ROOT = path.resolve(import.meta.dirname, "../..");

export interface AdminBackend {
	execute(statements: string[]): Promise<void>;
	query<T>(sql: string): Promise<T[]>;
	putObject(key: string, bytes: Uint8Array, contentType: string): Promise<void>;
	deleteObject(key: string): Promise<void>;
	close(): Promise<void>;
}

export async function bucketName(): Promise<string> {
	const toml = await readFile(path.join(ROOT, "wrangler.toml"), "utf8");
	const match = /\[\[r2_buckets\]\][^[]*?bucket_name\s*=\s*"([^"]+)"/s.exec(toml);
	if (!match?.[1]) throw new Error("No [[r2_buckets]] bucket_name in wrangler.toml");
	return match[1];
}

/** The parts of the D1 and R2 bindings admin commands use (Node has no Workers types). */
interface LocalEnv {
	DB: {
		prepare(sql: string): { all<T>(): Promise<{ results: T[] }> };
		batch(statements: unknown[]): Promise<unknown>;
	};
	BUCKET: {
		put(key: string, value: Uint8Array, options: { httpMetadata: { contentType: string } }): Promise<unknown>;
		delete(key: string): Promise<void>;
	};
}

/**
 * The wrangler configuration the admin commands need: the Worker's name, date, D1 database and R2 bucket, nothing
 * else. With the whole wrangler.toml the platform proxy would also bind the Durable Objects, whose classes live in
 * the Worker's script, which it never loads: workerd then reports "no such Durable Object class" on every run.
 */
async function storageOnlyConfig(): Promise<string> {
	const toml = await readFile(path.join(ROOT, "wrangler.toml"), "utf8");
	const line = (key: string) => new RegExp(`^${key}\\s*=.*$`, "m").exec(toml)?.[0];
	const block = (table: string) => new RegExp(`^\\[\\[${table}\\]\\][^[]*`, "m").exec(toml)?.[0];
	const parts = [line("name"), line("compatibility_date"), block("d1_databases"), block("r2_buckets")];
	if (parts.some((part) => part === undefined)) throw new Error("wrangler.toml lacks name, date, D1 or R2");
	return parts.join("\n");
}

export async function localBackend(persistTo?: string): Promise<AdminBackend> {
	const dir = await mkdtemp(path.join(tmpdir(), "vc-admin-"));
	const configPath = path.join(dir, "wrangler.toml");
	await writeFile(configPath, await storageOnlyConfig());
	const proxy = await getPlatformProxy<LocalEnv>({
		configPath,
		// Where `wrangler dev` keeps its state (or `wrangler --persist-to DIR`, which stores under DIR/v3).
		persist: { path: persistTo ? path.join(persistTo, "v3") : path.join(ROOT, ".wrangler", "state", "v3") },
		remoteBindings: false,
	}).finally(() => rm(dir, { recursive: true, force: true }));
	const { DB, BUCKET } = proxy.env;
	return {
		async execute(statements) {
			if (statements.length) await DB.batch(statements.map((s) => DB.prepare(s)));
		},
		async query<T>(sql: string) {
			return (await DB.prepare(sql).all<T>()).results;
		},
		async putObject(key, bytes, contentType) {
			await BUCKET.put(key, bytes, { httpMetadata: { contentType } });
		},
		async deleteObject(key) {
			await BUCKET.delete(key);
		},
		close: () => proxy.dispose(),
	};
}

/** With `--json`, wrangler reports a failure as `{"error":{"text"}}` on stdout: its reason, for the message. */
function jsonErrorText(out: string): string | undefined {
	try {
		const text = (JSON.parse(out) as { error?: { text?: unknown } }).error?.text;
		return typeof text === "string" ? text : undefined;
	} catch {
		return undefined;
	}
}

function wrangler(args: string[]): Promise<string> {
	// `--json` output is printed at wrangler's "log" level, errors included: a quieter WRANGLER_LOG (the admin CLI
	// sets "error") would leave a failed query without its reason.
	const env = args.includes("--json") ? { ...process.env, WRANGLER_LOG: "log" } : process.env;
	return new Promise((resolve, reject) => {
		const child = spawn("npx", ["wrangler", ...args], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
		let out = "";
		let err = "";
		child.stdout.on("data", (d) => {
			out += d;
		});
		child.stderr.on("data", (d) => {
			err += d;
		});
		child.on("close", (code) =>
			code === 0
				? resolve(out)
				: reject(new Error(`wrangler ${args[0]} ${args[1]} failed:\n${jsonErrorText(out) ?? (err || out)}`)),
		);
	});
}

export function remoteBackend(environment?: string): AdminBackend {
	const envArgs = environment ? ["--env", environment] : [];
	return {
		async execute(statements) {
			if (!statements.length) return;
			const dir = await mkdtemp(path.join(tmpdir(), "vc-admin-"));
			const file = path.join(dir, "statements.sql");
			try {
				await writeFile(file, statements.join("\n"));
				await wrangler(["d1", "execute", "DB", "--remote", "--yes", "--file", file, ...envArgs]);
			} finally {
				await rm(dir, { recursive: true, force: true });
			}
		},
		async query<T>(sql: string) {
			const out = await wrangler(["d1", "execute", "DB", "--remote", "--json", "--command", sql, ...envArgs]);
			const parsed = JSON.parse(out) as { results: T[] }[];
			return parsed[0]?.results ?? [];
		},
		async putObject(key, bytes, contentType) {
			const dir = await mkdtemp(path.join(tmpdir(), "vc-admin-"));
			const file = path.join(dir, "object");
			try {
				await writeFile(file, bytes);
				const target = `${await bucketName()}/${key}`;
				await wrangler([
					"r2",
					"object",
					"put",
					target,
					"--file",
					file,
					"--content-type",
					contentType,
					"--remote",
					...envArgs,
				]);
			} finally {
				await rm(dir, { recursive: true, force: true });
			}
		},
		async deleteObject(key) {
			await wrangler(["r2", "object", "delete", `${await bucketName()}/${key}`, "--remote", ...envArgs]);
		},
		close: async () => {},
	};
}
