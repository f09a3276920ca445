/** Bearer authentication for API and runner routes (RFC 6750). Trust boundary: everything after this is scoped to `claims.accountId`. */
import { unauthorized } from "../http/errors.ts";
import type { AuthMode } from "../http/route.ts";
import { type TokenClaims, verifyAccessToken } from "./access-tokens.ts";
import { clientIsActive } from "./client-status.ts";
import { BASE_SCOPE, RUNNER_SCOPE } from "./scopes.ts";

export async function authenticate(request: Request, env: Env, mode: Exclude<AuthMode, "none">): Promise<TokenClaims> {
	const header = request.headers.get("Authorization");
	if (!header) throw unauthorized("Missing bearer token: send Authorization: Bearer <ACCESS_TOKEN>");
	const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i.exec(header.trim());
	if (!match?.[1])
		throw unauthorized("Malformed Authorization header: expected Bearer <ACCESS_TOKEN>", "invalid_request");
	const result = await verifyAccessToken(env, match[1], mode === "runner" ? RUNNER_SCOPE : BASE_SCOPE);
	if (result.ok) {
		if (!(await clientIsActive(env, result.claims.clientId))) {
			throw unauthorized("Access token was revoked: its client's credentials are no longer valid", "invalid_token");
		}
		return result.claims;
	}
	switch (result.reason) {
		case "expired":
			throw unauthorized("Access token has expired; request a new one", "invalid_token");
		case "wrong_scope":
			throw unauthorized("Access token does not grant the scope this endpoint needs", "invalid_token");
		case "invalid":
			throw unauthorized("Access token is invalid", "invalid_token");
	}
}
