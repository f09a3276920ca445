/** Revoking a client ends its tokens within seconds, for both scopes; tokens from the future are refused. */
import { env } from "cloudflare:workers";
import { SignJWT } from "jose";
import { afterEach, describe, expect, it, vi } from "vitest";
import { revokeClient } from "../../scripts/lib/provisioning.ts";
import { TOKEN_CLOCK_SKEW_SECONDS } from "../../src/auth/access-tokens.ts";
import { CLIENT_STATUS_CACHE_MS } from "../../src/auth/client-status.ts";
import { TOKEN_LIFETIME_SECONDS } from "../../src/auth/scopes.ts";
import { parseKeySecret } from "../../src/lib/keys.ts";
import { BASE_SCOPE, call, provisionClient, runSql, type TestClient, tokenFor } from "./helpers.ts";

afterEach(() => {
	vi.useRealTimers();
});

const voices = (token: string) => call("/api/v1/voices", { headers: { Authorization: `Bearer ${token}` } });

const lease = (token: string) =>
	call("/internal/v1/leases", {
		method: "POST",
		headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
		body: JSON.stringify({ runner_id: "revocation-test", capacity: 1, wait_seconds: 0 }),
	});

async function expectRevoked(response: Response) {
	expect(response.status).toBe(401);
	expect(response.headers.get("WWW-Authenticate")).toMatch(/error="invalid_token"/);
	expect(await response.json()).toMatchObject({ success: false, message: expect.stringMatching(/revoked/) });
}

/** Seconds (of the test clock, in 1 s steps) until `request` stops answering 200. */
async function secondsUntilRefused(request: () => Promise<Response>, limit = 60): Promise<number> {
	for (let elapsed = 0; elapsed <= limit; elapsed++) {
		const response = await request();
		if (response.status !== 200) {
			await expectRevoked(response);
			return elapsed;
		}
		await response.arrayBuffer();
		vi.setSystemTime(Date.now() + 1000);
	}
	throw new Error(`still accepted after ${limit} s`);
}

describe.each([
	["base", "api", voices],
	["runner", "runner", lease],
] as const)("revoking a client with %s scope", (_scope, kind, request) => {
	it("refuses its tokens, issued before the revocation, within the status cache time", async () => {
		vi.useFakeTimers({ toFake: ["Date"] });
		const client: TestClient = await provisionClient(kind);
		const inUse = await tokenFor(client);
		const unused = await tokenFor(client);
		expect((await request(inUse)).status).toBe(200);

		await runSql(revokeClient(client.clientId).statements);

		// The client's status may be answered from the isolate's cache for a few seconds, never longer.
		const seconds = await secondsUntilRefused(() => request(inUse));
		expect(seconds).toBeLessThanOrEqual(CLIENT_STATUS_CACHE_MS / 1000);
		await expectRevoked(await request(unused));
		// And no new token is issued.
		await expect(tokenFor(client)).rejects.toThrow(/401/);
	});
});

describe("token times", () => {
	async function tokenIssuedAt(client: TestClient, iat: number, lifetime = 600) {
		const key = parseKeySecret("TOKEN_SIGNING_KEY", env.TOKEN_SIGNING_KEY);
		return new SignJWT({ client_id: client.clientId, acc: client.accountId, scope: BASE_SCOPE })
			.setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid: key.id })
			.setIssuer(env.TOKEN_ISSUER)
			.setAudience("voice-conversion-api")
			.setSubject(client.clientId)
			.setJti(crypto.randomUUID())
			.setIssuedAt(iat)
			.setExpirationTime(iat + lifetime)
			.sign(key.bytes);
	}

	it("refuses a token whose iat lies in the future beyond the clock skew", async () => {
		const client = await provisionClient();
		const now = Math.floor(Date.now() / 1000);
		const withinSkew = await tokenIssuedAt(client, now + TOKEN_CLOCK_SKEW_SECONDS - 5);
		expect((await voices(withinSkew)).status).toBe(200);
		for (const ahead of [TOKEN_CLOCK_SKEW_SECONDS + 5, 3600, 365 * 24 * 3600]) {
			const response = await voices(await tokenIssuedAt(client, now + ahead));
			expect(response.status, `${ahead} s ahead`).toBe(401);
			expect(response.headers.get("WWW-Authenticate")).toMatch(/error="invalid_token"/);
		}
	});

	it("refuses a token that would live longer than the tokens this service issues", async () => {
		const client = await provisionClient();
		const now = Math.floor(Date.now() / 1000);
		expect((await voices(await tokenIssuedAt(client, now, TOKEN_LIFETIME_SECONDS))).status).toBe(200);
		expect((await voices(await tokenIssuedAt(client, now, TOKEN_LIFETIME_SECONDS + 1))).status).toBe(401);
	});
});
