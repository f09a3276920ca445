/**
 * Secrets that hold keys are written `kid:base64url-key`, so that a key can be rotated: new tokens and addresses
 * are signed with the current key and its id, and the previous key still verifies until what it signed expires.
 */
import { fromBase64Url } from "./encoding.ts";

export interface KeyMaterial {
	id: string;
	bytes: Uint8Array<ArrayBuffer>;
}

export function parseKeySecret(name: string, value: string | undefined): KeyMaterial {
	if (!value) throw new Error(`Secret ${name} is not set (expected "kid:base64url-key")`);
	const colon = value.indexOf(":");
	const id = value.slice(0, colon);
	let bytes: Uint8Array<ArrayBuffer>;
	try {
		bytes = fromBase64Url(value.slice(colon + 1));
	} catch {
		throw new Error(`Secret ${name} is not "kid:base64url-key"`);
	}
	if (colon < 1 || !/^[A-Za-z0-9._-]{1,64}$/.test(id)) throw new Error(`Secret ${name} has no valid key id`);
	if (bytes.length < 32) throw new Error(`Secret ${name} must hold at least 32 bytes of key`);
	return { id, bytes };
}

/** The current key first, then the previous one when it is configured. */
export function keyRing(name: string, current: string | undefined, previous: string | undefined): KeyMaterial[] {
	const ring = [parseKeySecret(name, current)];
	if (previous) ring.push(parseKeySecret(`${name}_PREVIOUS`, previous));
	return ring;
}
