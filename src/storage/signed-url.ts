/**
 * Pre-signed storage addresses: every `upload_url`, `output_url`, `image_url` and `song_url` comes from here.
 * An address is a Worker route whose query carries an HMAC-SHA256 (key id `kid`) over a canonical string of
 * method, object key, absolute expiry, and for uploads the required content type, size limit and generation.
 * Tampering with any of them, a path that is not one we could have signed, or using the address after expiry or
 * with another method, is refused with 403.
 */
import { ApiError } from "../http/errors.ts";
import { fromBase64Url, toBase64Url, utf8 } from "../lib/encoding.ts";
import { type KeyMaterial, keyRing } from "../lib/keys.ts";

export const STORAGE_PATH_PREFIX = "/storage/v1/";

export type StorageMethod = "GET" | "PUT";

export interface StorageGrant {
	method: StorageMethod;
	key: string;
	expiresAt: Date;
	/** PUT only: the exact Content-Type the uploader must send. */
	contentType?: string;
	/** PUT only: the body must be smaller than this many bytes. */
	maxBytes?: number;
	/**
	 * PUT only: which generation of the upload address this is. The upload hook refuses an address whose generation
	 * is no longer the current one, so regenerating an address retires the older ones.
	 */
	generation?: number;
}

interface CanonicalFields {
	method: string;
	key: string;
	exp: number;
	contentType: string;
	maxBytes: string;
	generation: string;
}

/**
 * Addresses with a generation are signed under `vc-storage-v2`; those without it keep the `v1` string, so every
 * address handed out before generations existed still verifies (as generation 0) until it expires.
 */
function canonical(grant: CanonicalFields): string {
	const fields = [grant.method, grant.key, String(grant.exp), grant.contentType, grant.maxBytes];
	if (grant.generation === "") return ["vc-storage-v1", ...fields].join("\n");
	return ["vc-storage-v2", ...fields, grant.generation].join("\n");
}

async function hmacKey(material: KeyMaterial, usage: "sign" | "verify") {
	return crypto.subtle.importKey("raw", material.bytes, { name: "HMAC", hash: "SHA-256" }, false, [usage]);
}

const ring = (env: Env) => keyRing("STORAGE_SIGNING_KEY", env.STORAGE_SIGNING_KEY, env.STORAGE_SIGNING_KEY_PREVIOUS);

/** The origin addresses are built on: `PUBLIC_BASE_URL` when set, else the origin the request came to. */
export function publicOrigin(env: Env, requestUrl: string | URL): string {
	return (env.PUBLIC_BASE_URL || new URL(requestUrl).origin).replace(/\/+$/, "");
}

export const encodeObjectKey = (key: string) => key.split("/").map(encodeURIComponent).join("/");

export async function signStorageUrl(env: Env, origin: string, grant: StorageGrant): Promise<string> {
	const [key] = ring(env);
	if (!key) throw new Error("no storage signing key");
	const exp = Math.floor(grant.expiresAt.getTime() / 1000);
	const contentType = grant.method === "PUT" ? (grant.contentType ?? "") : "";
	const maxBytes = grant.method === "PUT" && grant.maxBytes !== undefined ? String(grant.maxBytes) : "";
	const generation = grant.method === "PUT" && grant.generation !== undefined ? String(grant.generation) : "";
	const message = canonical({ method: grant.method, key: grant.key, exp, contentType, maxBytes, generation });
	const signature = await crypto.subtle.sign("HMAC", await hmacKey(key, "sign"), utf8(message));
	const query = new URLSearchParams({ method: grant.method, exp: String(exp), kid: key.id });
	if (contentType) query.set("ct", contentType);
	if (maxBytes) query.set("max", maxBytes);
	if (generation) query.set("gen", generation);
	query.set("sig", toBase64Url(signature));
	return `${origin}${STORAGE_PATH_PREFIX}${encodeObjectKey(grant.key)}?${query}`;
}

const denied = (message: string) => new ApiError(403, "signature_invalid", message);

/** The object key an address names, or null when its path is not one `encodeObjectKey` could have produced. */
function objectKeyOf(url: URL): string | null {
	try {
		return url.pathname.slice(STORAGE_PATH_PREFIX.length).split("/").map(decodeURIComponent).join("/");
	} catch {
		// A malformed percent-escape (e.g. `%E0%A4%A`): an outside input, not a fault of ours.
		return null;
	}
}

/**
 * Checks an address used with `method` (HEAD counts as GET). Returns what the signature grants, or throws 403.
 * Trust boundary: nothing in the query is believed until the signature over it has verified.
 */
export async function verifyStorageUrl(env: Env, url: URL, method: string, now = new Date()): Promise<StorageGrant> {
	const q = url.searchParams;
	const signedMethod = q.get("method");
	const exp = Number(q.get("exp"));
	const kid = q.get("kid");
	const sig = q.get("sig");
	if (!signedMethod || !kid || !sig || !Number.isInteger(exp)) {
		throw denied("This storage address is not signed; request a new address from the API");
	}
	const objectKey = objectKeyOf(url);
	if (objectKey === null) throw denied("This storage address is malformed; request a new address from the API");
	const contentType = q.get("ct") ?? "";
	const maxBytes = q.get("max") ?? "";
	const generation = q.get("gen") ?? "";
	if (generation !== "" && !/^\d{1,9}$/.test(generation)) {
		throw denied("The signature of this storage address is invalid");
	}
	const material = ring(env).find((k) => k.id === kid);
	let signature: Uint8Array<ArrayBuffer>;
	try {
		signature = fromBase64Url(sig);
	} catch {
		throw denied("The signature of this storage address is invalid");
	}
	const message = canonical({ method: signedMethod, key: objectKey, exp, contentType, maxBytes, generation });
	const valid = material
		? await crypto.subtle.verify("HMAC", await hmacKey(material, "verify"), signature, utf8(message))
		: false;
	if (!valid) throw denied("The signature of this storage address is invalid");
	if (exp * 1000 <= now.getTime()) {
		throw denied("This storage address has expired; request a new one from the API");
	}
	const used = method === "HEAD" ? "GET" : method;
	if (used !== signedMethod) {
		throw denied(`This storage address is signed for ${signedMethod}, not ${method}`);
	}
	return {
		method: signedMethod as StorageMethod,
		key: objectKey,
		expiresAt: new Date(exp * 1000),
		...(contentType ? { contentType } : {}),
		...(maxBytes ? { maxBytes: Number(maxBytes) } : {}),
		...(signedMethod === "PUT" ? { generation: generation === "" ? 0 : Number(generation) } : {}),
	};
}
