import { env } from "cloudflare:workers";
import { SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { issueAccessToken } from "../../src/auth/access-tokens.ts";
import { parseKeySecret } from "../../src/lib/keys.ts";
import { routes } from "../../src/routes/index.ts";
import { BASE_SCOPE, call, provisionClient, RUNNER_SCOPE, signedInClient } from "./helpers.ts";

const protectedRoutes = routes.filter((r) => r.auth !== "none");
const samplePath = (path: string) => path.replace(/\{\w+\}/g, crypto.randomUUID());
const b64url = (value: object) =>
	btoa(JSON.stringify(value)).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");

async function expect401(response: Response, challenge: RegExp = /^Bearer realm=/) {
	expect(response.status).toBe(401);
	expect(response.headers.get("WWW-Authenticate")).toMatch(challenge);
	const body = (await response.json()) as { success: boolean; message: string };
	expect(body.success).toBe(false);
	expect(body.message.length).toBeGreaterThan(5);
}

async function tokenSignedWith(key: Uint8Array, kid: string, claims: Record<string, unknown>, typ = "at+jwt") {
	const client = await provisionClient();
	const now = Math.floor(Date.now() / 1000);
	return new SignJWT({ client_id: client.clientId, acc: client.accountId, scope: BASE_SCOPE, ...claims })
		.setProtectedHeader({ alg: "HS256", typ, kid })
		.setIssuer(env.TOKEN_ISSUER)
		.setAudience("voice-conversion-api")
		.setSubject(client.clientId)
		.setJti(crypto.randomUUID())
		.setIssuedAt(now)
		.setExpirationTime(now + 600)
		.sign(key);
}

describe("bearer authentication", () => {
	it("protects every /api/v1 and /internal route", () => {
		const unprotected = routes.filter(
			(r) => (r.path.startsWith("/api/") || r.path.startsWith("/internal/")) && r.auth === "none",
		);
		expect(unprotected.map((r) => r.path)).toEqual([]);
		expect(protectedRoutes.length).toBeGreaterThan(0);
	});

	it.each(protectedRoutes.map((r) => [r.method, r.path] as const))(
		"%s %s refuses a request without a token",
		async (method, path) => {
			await expect401(await call(samplePath(path), { method }), /^Bearer realm="voice-conversion-api"$/);
		},
	);

	it.each(protectedRoutes.map((r) => [r.method, r.path] as const))(
		"%s %s refuses a garbage token",
		async (method, path) => {
			await expect401(
				await call(samplePath(path), { method, headers: { Authorization: "Bearer not-a-jwt" } }),
				/invalid_token/,
			);
		},
	);

	it("refuses a malformed Authorization header", async () => {
		await expect401(await call("/api/v1/voices", { headers: { Authorization: "Token abc" } }), /invalid_request/);
	});

	it("refuses an expired token", async () => {
		const client = await provisionClient();
		const token = await issueAccessToken(
			env,
			{ accountId: client.accountId, clientId: client.clientId, scope: BASE_SCOPE },
			new Date(Date.now() - 2 * 3600 * 1000),
		);
		const response = await call("/api/v1/voices", { headers: { Authorization: `Bearer ${token}` } });
		expect(response.status).toBe(401);
		expect(((await response.json()) as { message: string }).message).toMatch(/expired/);
	});

	it("refuses a token signed with another key under the same key id", async () => {
		const token = await tokenSignedWith(crypto.getRandomValues(new Uint8Array(32)), "test-1", {});
		await expect401(await call("/api/v1/voices", { headers: { Authorization: `Bearer ${token}` } }), /invalid_token/);
	});

	it("refuses a tampered payload", async () => {
		const { token } = await signedInClient();
		const [header, , signature] = token.split(".");
		const forged = `${header}.${b64url({ acc: crypto.randomUUID(), scope: BASE_SCOPE, exp: 9999999999 })}.${signature}`;
		await expect401(await call("/api/v1/voices", { headers: { Authorization: `Bearer ${forged}` } }), /invalid_token/);
	});

	it('refuses alg "none"', async () => {
		const client = await provisionClient();
		const now = Math.floor(Date.now() / 1000);
		const unsigned = `${b64url({ alg: "none", typ: "at+jwt", kid: "test-1" })}.${b64url({
			sub: client.clientId,
			client_id: client.clientId,
			acc: client.accountId,
			scope: BASE_SCOPE,
			iss: env.TOKEN_ISSUER,
			aud: "voice-conversion-api",
			iat: now,
			exp: now + 600,
			jti: crypto.randomUUID(),
		})}.`;
		await expect401(
			await call("/api/v1/voices", { headers: { Authorization: `Bearer ${unsigned}` } }),
			/invalid_token/,
		);
	});

	it("refuses a token that is not an access token (typ JWT)", async () => {
		const key = parseKeySecret("TOKEN_SIGNING_KEY", env.TOKEN_SIGNING_KEY);
		const token = await tokenSignedWith(key.bytes, key.id, {}, "JWT");
		await expect401(await call("/api/v1/voices", { headers: { Authorization: `Bearer ${token}` } }), /invalid_token/);
	});

	it("accepts a token signed by the current key", async () => {
		const key = parseKeySecret("TOKEN_SIGNING_KEY", env.TOKEN_SIGNING_KEY);
		const token = await tokenSignedWith(key.bytes, key.id, {});
		expect((await call("/api/v1/voices", { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
	});

	it("keeps accepting tokens of the previous key after rotation, and refuses unknown key ids", async () => {
		const previous = { ...env, TOKEN_SIGNING_KEY: `old-1:${btoa("o".repeat(33))}` } as Env;
		const client = await provisionClient();
		const oldToken = await issueAccessToken(previous, {
			accountId: client.accountId,
			clientId: client.clientId,
			scope: BASE_SCOPE,
		});
		const { verifyAccessToken } = await import("../../src/auth/access-tokens.ts");
		const rotated = { ...env, TOKEN_SIGNING_KEY_PREVIOUS: previous.TOKEN_SIGNING_KEY } as Env;
		expect((await verifyAccessToken(rotated, oldToken, BASE_SCOPE)).ok).toBe(true);
		expect(await verifyAccessToken(env, oldToken, BASE_SCOPE)).toEqual({ ok: false, reason: "invalid" });
	});

	it("refuses a runner token on client routes", async () => {
		const { token } = await signedInClient("runner");
		const response = await call("/api/v1/voices", { headers: { Authorization: `Bearer ${token}` } });
		await expect401(response, /invalid_token/);
	});

	it("refuses a base token on runner routes", async () => {
		const { token } = await signedInClient();
		const runnerRoutes = protectedRoutes.filter((r) => r.auth === "runner");
		for (const route of runnerRoutes) {
			const response = await call(samplePath(route.path), {
				method: route.method,
				headers: { Authorization: `Bearer ${token}` },
			});
			expect(response.status, `${route.method} ${route.path}`).toBe(401);
		}
		const client = await provisionClient("runner");
		expect(client.scope).toBe(RUNNER_SCOPE);
	});
});
