import { describe, expect, it } from "vitest";
import { BASE_SCOPE, call, provisionClient, RUNNER_SCOPE, requestToken } from "./helpers.ts";

describe("POST /oauth2/token", () => {
	it("issues a one-hour bearer token for valid client credentials", async () => {
		const client = await provisionClient();
		const response = await requestToken({
			grant_type: "client_credentials",
			client_id: client.clientId,
			client_secret: client.clientSecret,
			scope: BASE_SCOPE,
		});
		expect(response.status).toBe(200);
		expect(response.headers.get("Cache-Control")).toBe("no-store");
		const body = (await response.json()) as Record<string, unknown>;
		expect(Object.keys(body).sort()).toEqual(["access_token", "expires_in", "token_type"]);
		expect(body.expires_in).toBe(3600);
		expect(body.token_type).toBe("Bearer");
		const [header] = String(body.access_token).split(".");
		const decoded = JSON.parse(atob(String(header).replaceAll("-", "+").replaceAll("_", "/")));
		expect(decoded).toMatchObject({ alg: "HS256", typ: "at+jwt", kid: "test-1" });
	});

	it("accepts the credentials as HTTP Basic", async () => {
		const client = await provisionClient();
		const basic = btoa(`${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`);
		const response = await requestToken(
			{ grant_type: "client_credentials", scope: BASE_SCOPE },
			{ Authorization: `Basic ${basic}` },
		);
		expect(response.status).toBe(200);
	});

	it.each([
		["an unknown client", () => ({ client_id: crypto.randomUUID() }), "invalid_client"],
		["a wrong secret", () => ({ client_secret: "vcs_wrong" }), "invalid_client"],
		["an unknown scope", () => ({ scope: "voice-conversion-api/admin" }), "invalid_scope"],
		["a scope the client was not granted", () => ({ scope: RUNNER_SCOPE }), "invalid_scope"],
	])("answers 401 for %s", async (_name, override, error) => {
		const client = await provisionClient();
		const response = await requestToken({
			grant_type: "client_credentials",
			client_id: client.clientId,
			client_secret: client.clientSecret,
			scope: BASE_SCOPE,
			...override(),
		});
		expect(response.status).toBe(401);
		const body = (await response.json()) as Record<string, unknown>;
		expect(body).toMatchObject({ success: false, error });
		expect(typeof body.message).toBe("string");
		expect(response.headers.get("WWW-Authenticate")).toMatch(/^Bearer/);
	});

	it("answers 401 with a Basic challenge when Basic credentials are wrong", async () => {
		const client = await provisionClient();
		const basic = btoa(`${client.clientId}:nope`);
		const response = await requestToken(
			{ grant_type: "client_credentials", scope: BASE_SCOPE },
			{ Authorization: `Basic ${basic}` },
		);
		expect(response.status).toBe(401);
		expect(response.headers.get("WWW-Authenticate")).toMatch(/^Basic/);
	});

	it("says what it takes when given another Authorization scheme (a bearer token), or Basic it cannot read", async () => {
		const client = await provisionClient();
		const form = { grant_type: "client_credentials", client_id: client.clientId, scope: BASE_SCOPE };
		const bearer = await requestToken(form, { Authorization: "Bearer some.access.token" });
		expect(bearer.status).toBe(401);
		expect(bearer.headers.get("WWW-Authenticate")).toMatch(/^Basic/);
		expect(((await bearer.json()) as { message: string }).message).toMatch(/HTTP Basic or in the form body/);
		const garbled = await requestToken(form, { Authorization: "Basic not base64!" });
		expect(garbled.status).toBe(401);
		expect(((await garbled.json()) as { message: string }).message).toBe("Malformed HTTP Basic credentials");
	});

	it.each([
		["a missing grant_type", { grant_type: undefined }, 400, "invalid_request"],
		["another grant type", { grant_type: "password" }, 400, "unsupported_grant_type"],
		["a missing secret", { client_secret: undefined }, 400, "invalid_request"],
		["a missing scope", { scope: undefined }, 400, "invalid_request"],
	])("answers a clear 4xx for %s", async (_name, override, status, error) => {
		const client = await provisionClient();
		const fields: Record<string, string | undefined> = {
			grant_type: "client_credentials",
			client_id: client.clientId,
			client_secret: client.clientSecret,
			scope: BASE_SCOPE,
			...override,
		};
		const defined = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Record<
			string,
			string
		>;
		const response = await requestToken(defined);
		expect(response.status).toBe(status);
		expect(await response.json()).toMatchObject({ success: false, error });
	});

	it("answers 400 invalid_request for a repeated parameter (RFC 6749 section 3.2), whichever copy is valid", async () => {
		const client = await provisionClient();
		const other = await provisionClient();
		for (const [name, first, second] of [
			["client_id", client.clientId, other.clientId],
			["client_secret", client.clientSecret, other.clientSecret],
			["scope", BASE_SCOPE, RUNNER_SCOPE],
			["grant_type", "client_credentials", "client_credentials"],
		] as [string, string, string][]) {
			const form = new URLSearchParams({
				grant_type: "client_credentials",
				client_id: client.clientId,
				client_secret: client.clientSecret,
				scope: BASE_SCOPE,
			});
			form.set(name, first);
			form.append(name, second);
			const response = await call("/oauth2/token", {
				method: "POST",
				headers: { "Content-Type": "application/x-www-form-urlencoded" },
				body: form.toString(),
			});
			expect(response.status).toBe(400);
			expect(await response.json()).toMatchObject({
				success: false,
				error: "invalid_request",
				message: `${name} must be sent once, not repeated`,
			});
		}
	});

	it("refuses a JSON body with a clear message", async () => {
		const response = await call("/oauth2/token", {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ grant_type: "client_credentials" }),
		});
		expect(response.status).toBe(400);
		expect(((await response.json()) as { message: string }).message).toMatch(/x-www-form-urlencoded/);
	});
});
