/**
 * Access tokens: RFC 9068-style JWTs (`typ: at+jwt`) signed with HS256 by `jose`. The Worker is both the issuer and
 * the only verifier, so a symmetric key is enough; `kid` picks the key so the signing key can rotate.
 */
import { errors, jwtVerify, SignJWT } from "jose";
import { keyRing } from "../lib/keys.ts";
import { TOKEN_LIFETIME_SECONDS } from "./scopes.ts";

export interface TokenClaims {
	accountId: string;
	clientId: string;
	scope: string;
}

export type TokenCheck =
	| { ok: true; claims: TokenClaims }
	| { ok: false; reason: "expired" | "invalid" | "wrong_scope" };

const AUDIENCE = "voice-conversion-api";

/**
 * How far ahead of our clock a token's `iat` may be: tokens come only from this Worker, whose clocks agree to well
 * under a second, so anything later was not issued by us as we are now (a forged or mis-minted token) and is refused.
 */
export const TOKEN_CLOCK_SKEW_SECONDS = 30;

function signingKeys(env: Env) {
	return keyRing("TOKEN_SIGNING_KEY", env.TOKEN_SIGNING_KEY, env.TOKEN_SIGNING_KEY_PREVIOUS);
}

export async function issueAccessToken(env: Env, claims: TokenClaims, now = new Date()): Promise<string> {
	const [key] = signingKeys(env);
	if (!key) throw new Error("no signing key");
	const issuedAt = Math.floor(now.getTime() / 1000);
	return new SignJWT({ client_id: claims.clientId, scope: claims.scope, acc: claims.accountId })
		.setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid: key.id })
		.setIssuer(env.TOKEN_ISSUER)
		.setAudience(AUDIENCE)
		.setSubject(claims.clientId)
		.setJti(crypto.randomUUID())
		.setIssuedAt(issuedAt)
		.setExpirationTime(issuedAt + TOKEN_LIFETIME_SECONDS)
		.sign(key.bytes);
}

/**
 * Verifies signature (current or previous key, chosen by `kid`), `typ`, issuer, audience, expiry and scope, and that
 * `iat` is not in the future and the token does not outlive what we issue. Revocation is checked by the caller.
 */
export async function verifyAccessToken(env: Env, token: string, requiredScope: string): Promise<TokenCheck> {
	const ring = signingKeys(env);
	try {
		const { payload } = await jwtVerify(
			token,
			(header) => {
				const key = ring.find((k) => k.id === header.kid);
				if (!key) throw new errors.JWKSNoMatchingKey();
				return key.bytes;
			},
			{
				algorithms: ["HS256"],
				typ: "at+jwt",
				issuer: env.TOKEN_ISSUER,
				audience: AUDIENCE,
				requiredClaims: ["exp", "iat", "sub", "jti"],
			},
		);
		const now = Math.floor(Date.now() / 1000);
		const issuedAt = payload.iat as number;
		if (issuedAt > now + TOKEN_CLOCK_SKEW_SECONDS || (payload.exp as number) - issuedAt > TOKEN_LIFETIME_SECONDS) {
			return { ok: false, reason: "invalid" };
		}
		const scopes = typeof payload.scope === "string" ? payload.scope.split(" ") : [];
		if (!scopes.includes(requiredScope)) return { ok: false, reason: "wrong_scope" };
		if (typeof payload.acc !== "string" || typeof payload.client_id !== "string")
			return { ok: false, reason: "invalid" };
		return {
			ok: true,
			claims: { accountId: payload.acc, clientId: payload.client_id, scope: payload.scope as string },
		};
	} catch (error) {
		if (error instanceof errors.JWTExpired) return { ok: false, reason: "expired" };
		return { ok: false, reason: "invalid" };
	}
}
