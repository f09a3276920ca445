/**
 * Webhook signing secrets: generated here (32 random bytes), shown to the client once, and stored only sealed
 * with AES-256-GCM under `WEBHOOK_SECRET_KEY` ("version:base64url-32-bytes"). The key version is stored beside
 * the ciphertext so the key can rotate: new secrets are sealed with the current key, and older versions listed
 * in `WEBHOOK_SECRET_KEY_PREVIOUS` (comma-separated) still open what they sealed. The subscription id is bound in
 * as additional data, so a ciphertext copied onto another row does not open.
 */

import { fromBase64Url, randomBytes, toBase64Url, utf8 } from "../lib/encoding.ts";
import { parseKeySecret } from "../lib/keys.ts";

export const WEBHOOK_SECRET_PREFIX = "whsec_";
const SECRET_BYTES = 32;
const IV_BYTES = 12;

export interface SealedSecret {
	ciphertext: string;
	iv: string;
	keyVersion: string;
}

type KeyEnv = Pick<Env, "WEBHOOK_SECRET_KEY" | "WEBHOOK_SECRET_KEY_PREVIOUS">;

export function generateWebhookSecret(): string {
	return `${WEBHOOK_SECRET_PREFIX}${toBase64Url(randomBytes(SECRET_BYTES))}`;
}

const keyCache = new Map<string, Promise<CryptoKey>>();

function importAesKey(name: string, value: string): { version: string; key: Promise<CryptoKey> } {
	const material = parseKeySecret(name, value);
	if (material.bytes.length !== 32) throw new Error(`Secret ${name} must hold exactly 32 bytes (AES-256)`);
	const cacheKey = `${material.id}:${value}`;
	let key = keyCache.get(cacheKey);
	if (!key) {
		key = crypto.subtle.importKey("raw", material.bytes, "AES-GCM", false, ["encrypt", "decrypt"]);
		keyCache.set(cacheKey, key);
	}
	return { version: material.id, key };
}

function currentKey(env: KeyEnv) {
	return importAesKey("WEBHOOK_SECRET_KEY", env.WEBHOOK_SECRET_KEY);
}

function keyForVersion(env: KeyEnv, version: string): Promise<CryptoKey> {
	const candidates = [
		{ name: "WEBHOOK_SECRET_KEY", value: env.WEBHOOK_SECRET_KEY },
		...(env.WEBHOOK_SECRET_KEY_PREVIOUS ?? "")
			.split(",")
			.map((value) => value.trim())
			.filter(Boolean)
			.map((value) => ({ name: "WEBHOOK_SECRET_KEY_PREVIOUS", value })),
	];
	for (const candidate of candidates) {
		const colon = candidate.value.indexOf(":");
		if (candidate.value.slice(0, colon) === version) return importAesKey(candidate.name, candidate.value).key;
	}
	throw new Error(`No webhook secret key with version "${version}" is configured`);
}

const additionalData = (subscriptionId: string) => utf8(`webhook-secret:${subscriptionId}`);

export async function sealSecret(env: KeyEnv, subscriptionId: string, secret: string): Promise<SealedSecret> {
	const { version, key } = currentKey(env);
	const iv = randomBytes(IV_BYTES);
	const ciphertext = await crypto.subtle.encrypt(
		{ name: "AES-GCM", iv, additionalData: additionalData(subscriptionId) },
		await key,
		utf8(secret),
	);
	return { ciphertext: toBase64Url(ciphertext), iv: toBase64Url(iv), keyVersion: version };
}

/** Opens a sealed secret; only the code that signs a delivery calls this. */
export async function openSecret(env: KeyEnv, subscriptionId: string, sealed: SealedSecret): Promise<string> {
	const plaintext = await crypto.subtle.decrypt(
		{ name: "AES-GCM", iv: fromBase64Url(sealed.iv), additionalData: additionalData(subscriptionId) },
		await keyForVersion(env, sealed.keyVersion),
		fromBase64Url(sealed.ciphertext),
	);
	return new TextDecoder().decode(plaintext);
}
