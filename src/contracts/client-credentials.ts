/**
 * Client credentials, shared by the token endpoint (which checks them) and the admin CLI (which issues them).
 * Client secrets are 32 random bytes, so a plain SHA-256 hash is a safe verifier (no password stretching
 * needed); comparison is constant-time.
 */
import { randomBytes, sha256Hex, timingSafeEqual, toBase64Url } from "../lib/encoding.ts";

/** The scope of client API tokens; runner tokens have `RUNNER_SCOPE` (the runner contract). */
export const BASE_SCOPE = "voice-conversion-api/base";
export { RUNNER_SCOPE } from "./runner.ts";

export const generateClientSecret = () => `vcs_${toBase64Url(randomBytes(32))}`;

export const hashClientSecret = (secret: string) => sha256Hex(secret);

export async function clientSecretMatches(secret: string, storedHash: string): Promise<boolean> {
	return timingSafeEqual(await hashClientSecret(secret), storedHash);
}
