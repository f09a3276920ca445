/** Byte and text encodings used by signing code (WebCrypto only, so it runs in Workers, Node and browsers). */
const encoder = new TextEncoder();

export const utf8 = (text: string) => encoder.encode(text) as Uint8Array<ArrayBuffer>;

export function toHex(bytes: ArrayBuffer | Uint8Array): string {
	return Array.from(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes), (b) =>
		b.toString(16).padStart(2, "0"),
	).join("");
}

export function toBase64Url(bytes: ArrayBuffer | Uint8Array): string {
	const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
	let binary = "";
	for (const byte of view) binary += String.fromCharCode(byte);
	return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

export function fromBase64Url(text: string): Uint8Array<ArrayBuffer> {
	if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new TypeError("not base64url");
	const padded = text.replaceAll("-", "+").replaceAll("_", "/") + "=".repeat((4 - (text.length % 4)) % 4);
	const binary = atob(padded);
	const out = new Uint8Array(binary.length);
	for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
	return out;
}

export function randomBytes(length: number): Uint8Array<ArrayBuffer> {
	return crypto.getRandomValues(new Uint8Array(length));
}

export async function sha256Hex(data: string | Uint8Array<ArrayBuffer>): Promise<string> {
	return toHex(await crypto.subtle.digest("SHA-256", typeof data === "string" ? utf8(data) : data));
}

/** Constant-time comparison of two strings (length is not secret: all compared values have fixed lengths). */
export function timingSafeEqual(a: string, b: string): boolean {
	const left = utf8(a);
	const right = utf8(b);
	let diff = left.length ^ right.length;
	const length = Math.max(left.length, right.length);
	for (let i = 0; i < length; i++) diff |= (left[i] ?? 0) ^ (right[i] ?? 0);
	return diff === 0;
}
