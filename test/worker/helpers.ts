/** Test helpers: provision accounts and clients with the admin code, get tokens and call the Worker over HTTP. */
import { env, exports } from "cloudflare:workers";
import { createAccount, createClient } from "../../scripts/lib/provisioning.ts";
import { BASE_SCOPE, RUNNER_SCOPE } from "../../src/auth/scopes.ts";

export const ORIGIN = "https://api.test";

export async function runSql(statements: string[]): Promise<void> {
	await env.DB.batch(statements.map((s) => env.DB.prepare(s)));
}

export interface TestClient {
	accountId: string;
	clientId: string;
	clientSecret: string;
	scope: string;
}

export async function provisionClient(kind: "api" | "runner" = "api"): Promise<TestClient> {
	const account = createAccount(`test account ${crypto.randomUUID().slice(0, 8)}`);
	const client = await createClient(account.output.account_id, { name: "test client", kind });
	await runSql([...account.statements, ...client.statements]);
	return {
		accountId: account.output.account_id,
		clientId: client.output.client_id,
		clientSecret: client.output.client_secret,
		scope: client.output.scope,
	};
}

export function call(path: string, init: RequestInit = {}): Promise<Response> {
	return exports.default.fetch(new Request(new URL(path, ORIGIN), init));
}

export function requestToken(fields: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
	return call("/oauth2/token", {
		method: "POST",
		headers: { "Content-Type": "application/x-www-form-urlencoded", ...headers },
		body: new URLSearchParams(fields).toString(),
	});
}

export async function tokenFor(client: TestClient): Promise<string> {
	const response = await requestToken({
		grant_type: "client_credentials",
		client_id: client.clientId,
		client_secret: client.clientSecret,
		scope: client.scope,
	});
	if (response.status !== 200) throw new Error(`token request failed: ${response.status} ${await response.text()}`);
	return ((await response.json()) as { access_token: string }).access_token;
}

/** A fresh account with an API client, and a bearer token for it. */
export async function signedInClient(kind: "api" | "runner" = "api") {
	const client = await provisionClient(kind);
	const token = await tokenFor(client);
	const api = (path: string, init: RequestInit = {}) =>
		call(path, { ...init, headers: { Authorization: `Bearer ${token}`, ...(init.headers ?? {}) } });
	return { client, token, api };
}

export { BASE_SCOPE, RUNNER_SCOPE };

/** Keys of every object in the bucket under `prefix`: an upload keeps its bytes under the signed key and a suffix. */
export async function keysUnder(prefix: string): Promise<string[]> {
	const keys: string[] = [];
	let cursor: string | undefined;
	do {
		const page = await env.BUCKET.list({ prefix, ...(cursor ? { cursor } : {}) });
		keys.push(...page.objects.map((object) => object.key));
		cursor = page.truncated ? page.cursor : undefined;
	} while (cursor);
	return keys;
}
