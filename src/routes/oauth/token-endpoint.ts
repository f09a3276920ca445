/**
 * `POST /oauth2/token`: OAuth 2.0 client credentials (RFC 6749 §4.4). Credentials come in the form body or as
 * HTTP Basic (§2.3.1). Errors keep RFC 6749 §5.2's `error` / `error_description` and add the spec's `message`;
 * per the spec, wrong credentials or scope are 401.
 */
import { z } from "zod";
import { issueAccessToken } from "../../auth/access-tokens.ts";
import { findApiClient } from "../../auth/client-store.ts";
import { BASE_SCOPE, RUNNER_SCOPE, TOKEN_LIFETIME_SECONDS } from "../../auth/scopes.ts";
import { clientSecretMatches } from "../../contracts/client-credentials.ts";
import { ErrorBody } from "../../contracts/common.ts";
import type { ApiErrorCode } from "../../contracts/errors.ts";
import { RATE_LIMITS, rateLimited, withinLimit } from "../../http/rate-limits.ts";
import { MAX_JSON_BODY_BYTES, mediaType, readLimitedText } from "../../http/request-body.ts";
import { defineRoute } from "../../http/route.ts";

/**
 * RFC 6749 section 5.2 names (and the request budget's), listed with the service's other codes in
 * `src/contracts/errors.ts`.
 */
const OAUTH_ERRORS = [
	"invalid_request",
	"invalid_client",
	"unsupported_grant_type",
	"invalid_scope",
	"rate_limited",
] as const satisfies readonly ApiErrorCode[];
type OAuthError = (typeof OAUTH_ERRORS)[number];

const NO_STORE = { "Cache-Control": "no-store", Pragma: "no-cache" };
const FORM_PARAMETERS = ["grant_type", "client_id", "client_secret", "scope"] as const;

function oauthError(
	status: number,
	error: OAuthError,
	description: string,
	basicChallenge = false,
	extraHeaders: Record<string, string> = {},
): Response {
	const headers: Record<string, string> = { ...NO_STORE, ...extraHeaders };
	if (status === 401) {
		headers["WWW-Authenticate"] = basicChallenge
			? 'Basic realm="voice-conversion-api"'
			: 'Bearer realm="voice-conversion-api"';
	}
	return Response.json(
		{ success: false, error, error_description: description, message: description, code: error },
		{ status, headers },
	);
}

function basicCredentials(request: Request): { id: string; secret: string } | "malformed" | "other scheme" | null {
	const header = request.headers.get("Authorization");
	if (!header) return null;
	if (!/^Basic(\s|$)/i.test(header.trim())) return "other scheme";
	const match = /^Basic +([A-Za-z0-9+/]+=*)$/i.exec(header.trim());
	if (!match?.[1]) return "malformed";
	try {
		const decoded = atob(match[1]);
		const colon = decoded.indexOf(":");
		if (colon < 0) return "malformed";
		// RFC 6749 §2.3.1: id and secret are form-urlencoded before being joined.
		return { id: decodeURIComponent(decoded.slice(0, colon)), secret: decodeURIComponent(decoded.slice(colon + 1)) };
	} catch {
		return "malformed";
	}
}

export const TokenResponse = z.object({
	access_token: z.string(),
	expires_in: z.literal(TOKEN_LIFETIME_SECONDS),
	token_type: z.literal("Bearer"),
});

/** The envelope, with RFC 6749's `error` and `error_description` beside `code` and `message` (the same values). */
const OAuthErrorBody = ErrorBody.extend({ error: z.enum(OAUTH_ERRORS), error_description: z.string() });

/** The form fields, as the document shows them; the handler reads them itself, to answer with OAuth's errors. */
const TokenRequest = z.object({
	grant_type: z.literal("client_credentials"),
	client_id: z.string().optional().describe("Required unless sent as HTTP Basic credentials"),
	client_secret: z.string().optional().describe("Required unless sent as HTTP Basic credentials"),
	scope: z.literal(BASE_SCOPE),
});

/** The token budget's key: the client_id, and the address the request came from (Cloudflare sets CF-Connecting-IP). */
function tokenBudgetKey(request: Request, clientId: string): string {
	const address = request.headers.get("CF-Connecting-IP");
	return address ? `${clientId} ${address}` : clientId;
}

export const tokenRoute = defineRoute({
	method: "POST",
	path: "/oauth2/token",
	auth: "none",
	summary: "Exchange client credentials for an access token",
	tags: ["Authentication"],
	form: TokenRequest,
	responses: {
		200: { description: "Access token (not wrapped in the envelope)", schema: TokenResponse },
		400: { description: "Malformed request or unsupported grant type", schema: OAuthErrorBody },
		401: { description: "Wrong client credentials or scope", schema: OAuthErrorBody },
		429: {
			schema: OAuthErrorBody,
			description: `More than the deployment's token requests for one client_id from one address in ${RATE_LIMITS.TOKEN_RATE_LIMIT.periodSeconds} s (\`rate_limited\`, with \`Retry-After\`)`,
		},
	},
	async handler({ request, env }) {
		if (mediaType(request) !== "application/x-www-form-urlencoded") {
			return oauthError(400, "invalid_request", "Content-Type must be application/x-www-form-urlencoded");
		}
		const form = new URLSearchParams(await readLimitedText(request, MAX_JSON_BODY_BYTES));
		// RFC 6749 §3.2: parameters must not repeat; which copy counts would otherwise be up to whoever parses.
		const repeated = FORM_PARAMETERS.find((name) => form.getAll(name).length > 1);
		if (repeated) return oauthError(400, "invalid_request", `${repeated} must be sent once, not repeated`);
		const grantType = form.get("grant_type");
		if (!grantType) return oauthError(400, "invalid_request", "grant_type is required");
		if (grantType !== "client_credentials") {
			return oauthError(400, "unsupported_grant_type", "Only grant_type=client_credentials is supported");
		}
		const basic = basicCredentials(request);
		if (basic === "malformed") return oauthError(401, "invalid_client", "Malformed HTTP Basic credentials", true);
		if (basic === "other scheme") {
			return oauthError(
				401,
				"invalid_client",
				"The token endpoint takes client credentials as HTTP Basic or in the form body, not another Authorization scheme (a bearer token, say)",
				true,
			);
		}
		const bodyId = form.get("client_id");
		const bodySecret = form.get("client_secret");
		if (basic && (bodySecret || (bodyId && bodyId !== basic.id))) {
			return oauthError(
				400,
				"invalid_request",
				"Send client credentials either as HTTP Basic or in the body, not both",
			);
		}
		const clientId = basic?.id ?? bodyId;
		const clientSecret = basic?.secret ?? bodySecret;
		if (!clientId || !clientSecret) {
			return oauthError(400, "invalid_request", "client_id and client_secret are required");
		}
		const scope = form.get("scope");
		if (!scope) return oauthError(400, "invalid_request", "scope is required");
		// Counted before the credentials are checked, so wrong guesses count too; per client_id and address, so that
		// someone else's wrong guesses at a client_id (which is no secret) do not lock its own client out.
		if (!(await withinLimit(env, "TOKEN_RATE_LIMIT", tokenBudgetKey(request, clientId)))) {
			const limited = rateLimited("TOKEN_RATE_LIMIT");
			return oauthError(429, "rate_limited", limited.message, false, limited.headers);
		}

		const client = await findApiClient(env, clientId);
		const secretOk = client ? await clientSecretMatches(clientSecret, client.secretHash) : false;
		if (!client || client.revokedAt || !secretOk) {
			return oauthError(401, "invalid_client", "Client authentication failed", Boolean(basic));
		}
		const allowed = client.scopes.split(" ");
		const requested = scope.split(" ").filter(Boolean);
		const known = requested.every((s) => s === BASE_SCOPE || s === RUNNER_SCOPE);
		if (requested.length !== 1 || !known || !allowed.includes(scope)) {
			return oauthError(401, "invalid_scope", `Scope "${scope}" is not granted to this client`);
		}
		const accessToken = await issueAccessToken(env, { accountId: client.accountId, clientId: client.id, scope });
		return Response.json(
			{ access_token: accessToken, expires_in: TOKEN_LIFETIME_SECONDS, token_type: "Bearer" },
			{ headers: NO_STORE },
		);
	},
});
