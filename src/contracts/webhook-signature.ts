/**
 * The delivery signature of spec section 5.6: HMAC-SHA256 with the subscription secret (UTF-8) over
 * `{unix_seconds}.{raw_body}`, lowercase hex, sent as `X-Webhook-Signature: sha256=<hex>`. WebCrypto only and no
 * imports, so the sender and the receiver helper (`verify-webhook.ts`) share exactly this code.
 */
export const SIGNATURE_HEADER = "X-Webhook-Signature";
export const TIMESTAMP_HEADER = "X-Webhook-Timestamp";
export const ID_HEADER = "X-Webhook-Id";
export const EVENT_HEADER = "X-Webhook-Event";
export const SIGNATURE_PREFIX = "sha256=";

const encoder = new TextEncoder();

/** Lowercase hex HMAC-SHA256 of `{timestamp}.{body}`. `body` must be the exact bytes sent or received. */
export async function computeWebhookSignature(
	secret: string,
	timestamp: string | number,
	body: string | Uint8Array,
): Promise<string> {
	const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
		"sign",
	]);
	const prefix = encoder.encode(`${timestamp}.`);
	const bodyBytes = typeof body === "string" ? encoder.encode(body) : body;
	const message = new Uint8Array(prefix.length + bodyBytes.length);
	message.set(prefix, 0);
	message.set(bodyBytes, prefix.length);
	const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, message));
	return Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The `X-Webhook-Signature` header value. */
export async function signatureHeader(secret: string, timestamp: string | number, body: string): Promise<string> {
	return `${SIGNATURE_PREFIX}${await computeWebhookSignature(secret, timestamp, body)}`;
}
