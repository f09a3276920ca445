/**
 * A real local stack for end-to-end tests and benchmarks: the Worker from wrangler.toml (D1 with migrations
 * applied, R2, Queues, Durable Objects) served on a loopback port by wrangler's test harness, with fresh
 * secrets, and helpers to provision accounts, clients and voices through the same admin code as the CLI.
 */
import { randomBytes } from "node:crypto";
import path from "node:path";
import { createTestHarness, type TestHarness } from "wrangler";
import type { AdminBackend } from "../../scripts/lib/admin-backend.ts";
import { keepLocalRunsLocal } from "../../scripts/lib/local-only.ts";
import { createAccount, createClient, createVoice, type VoiceFields } from "../../scripts/lib/provisioning.ts";

export const ROOT = path.resolve(import.meta.dirname, "../..");

const key = (id: string) => `${id}:${randomBytes(32).toString("base64url")}`;

export interface Credentials {
	accountId: string;
	clientId: string;
	clientSecret: string;
	scope: string;
}

/** A D1 statement as the harness proxies it to Node: the parts tests and benchmarks use. */
interface StackStatement {
	bind(...values: unknown[]): StackStatement;
	run(): Promise<unknown>;
	all<T>(): Promise<{ results: T[] }>;
	first<T>(column: string): Promise<T | null>;
}

/** The bindings tests and benchmarks drive directly (typed here: they run in Node, not workerd). */
interface StackEnv {
	DB: { prepare(sql: string): StackStatement; batch(statements: StackStatement[]): Promise<unknown> };
	BUCKET: {
		put(
			key: string,
			value: Uint8Array | string,
			options?: { httpMetadata?: { contentType?: string } },
		): Promise<unknown>;
		head(key: string): Promise<{ size: number; etag: string } | null>;
		list(options: { prefix: string }): Promise<{ objects: { key: string }[] }>;
		delete(key: string): Promise<void>;
	};
	WEBHOOK_EVENTS_QUEUE: {
		send(body: unknown): Promise<void>;
		sendBatch(messages: { body: unknown }[]): Promise<void>;
	};
}

export interface LocalStack {
	/** Origin the Worker listens on, e.g. `http://127.0.0.1:40123` (no trailing slash). */
	url: string;
	harness: TestHarness;
	env: StackEnv;
	runSql(statements: string[]): Promise<void>;
	provision(kind?: "api" | "runner", accountId?: string): Promise<Credentials>;
	addVoice(fields: Omit<VoiceFields, "name" | "engine"> & { name: string; engine?: "dsp" | "rvc" }): Promise<string>;
	/** Where `npm run admin` commands act when run against this stack (its D1 and R2). */
	admin: AdminBackend;
	token(credentials: Credentials): Promise<string>;
	close(): Promise<void>;
}

export interface ApiCall {
	method?: string;
	body?: unknown;
}

/**
 * One JSON call to the stack's API with a bearer token: the response's `data`, or an Error naming the route,
 * status and message. `route` is a path on the stack, or a whole address the API handed out.
 */
export async function callApi<T = Record<string, unknown>>(
	stack: LocalStack,
	token: string,
	route: string,
	init: ApiCall = {},
): Promise<T> {
	const response = await fetch(route.startsWith("http") ? route : `${stack.url}${route}`, {
		method: init.method ?? "GET",
		headers: { Authorization: `Bearer ${token}`, ...(init.body ? { "Content-Type": "application/json" } : {}) },
		body: init.body ? JSON.stringify(init.body) : undefined,
	});
	const body = (await response.json()) as { success: boolean; data: T; message?: string };
	if (!response.ok) throw new Error(`${init.method ?? "GET"} ${route}: ${response.status} ${body.message}`);
	return body.data;
}

/** Registers `bytes` as one of the account's WAV audio files and uploads them to its address: the file's id. */
export async function uploadWav(
	stack: LocalStack,
	token: string,
	bytes: Uint8Array,
	fileName = "take.wav",
): Promise<{ id: string }> {
	const file = await callApi<{ id: string; upload_url: string }>(stack, token, "/api/v1/audio-files", {
		method: "POST",
		body: { file_name: fileName, mime_type: "audio/wav" },
	});
	const put = await fetch(file.upload_url, {
		method: "PUT",
		headers: { "Content-Type": "audio/wav" },
		body: Buffer.from(bytes),
	});
	if (put.status !== 200) throw new Error(`PUT of ${fileName}: ${put.status} ${await put.text()}`);
	return { id: file.id };
}

export async function startLocalStack(options: { vars?: Record<string, string> } = {}): Promise<LocalStack> {
	keepLocalRunsLocal();
	const harness = createTestHarness({
		root: ROOT,
		workers: [
			{
				configPath: "./wrangler.toml",
				vars: options.vars ?? {},
				secrets: {
					TOKEN_SIGNING_KEY: key("e2e-1"),
					STORAGE_SIGNING_KEY: key("e2e-1"),
					WEBHOOK_SECRET_KEY: key("1"),
				},
			},
		],
	});
	const listening = await harness.listen();
	const url = String(listening.url).replace(/\/+$/, "");
	const worker = harness.getWorker();
	await worker.applyD1Migrations("DB");
	const env = (await worker.getEnv()) as unknown as StackEnv;

	const runSql = async (statements: string[]) => {
		await env.DB.batch(statements.map((s) => env.DB.prepare(s)));
	};

	const stack: LocalStack = {
		url,
		harness,
		env,
		runSql,
		async provision(kind = "api", accountId) {
			const statements: string[] = [];
			let account = accountId;
			if (!account) {
				const plan = createAccount(`e2e ${randomBytes(4).toString("hex")}`);
				statements.push(...plan.statements);
				account = plan.output.account_id;
			}
			const client = await createClient(account, { name: `e2e ${kind}`, kind });
			await runSql([...statements, ...client.statements]);
			return {
				accountId: account,
				clientId: client.output.client_id,
				clientSecret: client.output.client_secret,
				scope: client.output.scope,
			};
		},
		async addVoice(fields) {
			const id = crypto.randomUUID();
			const plan = createVoice(id, { engine: "dsp", ...fields });
			await runSql(plan.statements);
			return id;
		},
		admin: {
			execute: runSql,
			query: async <T>(sql: string) => (await env.DB.prepare(sql).all<T>()).results,
			putObject: async (key, bytes, contentType) => {
				await env.BUCKET.put(key, bytes, { httpMetadata: { contentType } });
			},
			deleteObject: async (key) => {
				await env.BUCKET.delete(key);
			},
			close: async () => {},
		},
		async token(credentials) {
			const response = await fetch(`${url}/oauth2/token`, {
				method: "POST",
				headers: { "Content-Type": "application/x-www-form-urlencoded" },
				body: new URLSearchParams({
					grant_type: "client_credentials",
					client_id: credentials.clientId,
					client_secret: credentials.clientSecret,
					scope: credentials.scope,
				}),
			});
			if (!response.ok) throw new Error(`token: ${response.status} ${await response.text()}`);
			return ((await response.json()) as { access_token: string }).access_token;
		},
		close: () => harness.close(),
	};
	return stack;
}
