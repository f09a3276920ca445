import { ApiError, badRequest } from "./errors.ts";

/** JSON request bodies are small; anything bigger is a client mistake (uploads go to storage addresses). */
export const MAX_JSON_BODY_BYTES = 64 * 1024;

/**
 * No request body nests deeper than a few levels; a deeper one is refused before any code walks it recursively
 * (the idempotency hash does), which 64 KiB of brackets would otherwise drive past the stack.
 */
export const MAX_JSON_DEPTH = 64;

/** Reads at most `limit` bytes of a body as text, refusing with 413 as soon as it grows past it. */
export async function readLimitedText(request: Request, limit: number): Promise<string> {
	return new TextDecoder().decode(await readLimitedBytes(request, limit));
}

/** Reads at most `limit` bytes of a body, refusing with 413 as soon as it grows past it. */
async function readLimitedBytes(request: Request, limit: number): Promise<Uint8Array> {
	const declared = Number(request.headers.get("Content-Length") ?? Number.NaN);
	if (declared > limit) throw tooLarge(limit);
	if (!request.body) return new Uint8Array();
	const reader = request.body.getReader();
	const chunks: Uint8Array[] = [];
	let total = 0;
	for (;;) {
		const { done, value } = await reader.read();
		if (done) break;
		total += value.byteLength;
		if (total > limit) {
			await reader.cancel();
			throw tooLarge(limit);
		}
		chunks.push(value);
	}
	const bytes = new Uint8Array(total);
	let offset = 0;
	for (const chunk of chunks) {
		bytes.set(chunk, offset);
		offset += chunk.byteLength;
	}
	return bytes;
}

const tooLarge = (limit: number) =>
	new ApiError(413, "payload_too_large", `Request body exceeds the limit of ${limit} bytes`);

export function mediaType(request: Request): string {
	return (request.headers.get("Content-Type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

/** How deep the arrays and objects of well-formed JSON text nest, counted without recursion. */
function nestingDepth(json: string): number {
	let depth = 0;
	let deepest = 0;
	let inString = false;
	for (let i = 0; i < json.length; i++) {
		const c = json[i];
		if (inString) {
			if (c === "\\") i++;
			else if (c === '"') inString = false;
		} else if (c === '"') inString = true;
		else if (c === "{" || c === "[") deepest = Math.max(deepest, ++depth);
		else if (c === "}" || c === "]") depth--;
	}
	return deepest;
}

/** Refuses bytes that are not UTF-8 instead of replacing them; keeps a leading byte order mark out of the text. */
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/** With the `u` flag a surrogate pair is one code point, so this finds only a half of one standing alone. */
const UNPAIRED_SURROGATE = /\p{Surrogate}/u;

/** Whether a string, key or value anywhere in `value` holds an unpaired surrogate (depth already bounded). */
function holdsUnpairedSurrogate(value: unknown): boolean {
	if (typeof value === "string") return UNPAIRED_SURROGATE.test(value);
	if (Array.isArray(value)) return value.some(holdsUnpairedSurrogate);
	if (value && typeof value === "object") {
		return Object.entries(value).some(([key, item]) => UNPAIRED_SURROGATE.test(key) || holdsUnpairedSurrogate(item));
	}
	return false;
}

/**
 * Parses a JSON body: 415 for another content type or for a content coding (gzip), 413 when too large, 400 for
 * malformed or too deeply nested JSON, and for text that is not Unicode: bytes that are not UTF-8 (JSON's only
 * encoding, RFC 8259 §8.1; e.g. Latin-1 text, which decoding would turn into replacement characters and so store
 * something other than what was sent), or an escaped lone surrogate such as `\ud800`, which UTF-8, and so D1, cannot
 * hold: it would be stored as replacement characters, unlike what was accepted and echoed.
 */
export async function readJsonBody(request: Request): Promise<unknown> {
	const type = mediaType(request);
	if (type !== "application/json" && !type.endsWith("+json")) {
		throw new ApiError(415, "unsupported_media_type", "Content-Type must be application/json");
	}
	refuseContentCoding(request, "send the JSON body uncompressed");
	const bytes = await readLimitedBytes(request, MAX_JSON_BODY_BYTES);
	let text: string;
	try {
		text = UTF8.decode(bytes);
	} catch {
		throw badRequest("Request body is not UTF-8 text; JSON must be sent in UTF-8");
	}
	if (text.trim() === "") throw badRequest("Request body is empty; a JSON object is required");
	let value: unknown;
	try {
		value = JSON.parse(text);
	} catch {
		throw badRequest("Request body is not valid JSON");
	}
	if (nestingDepth(text) > MAX_JSON_DEPTH) {
		throw badRequest(`Request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`);
	}
	if (holdsUnpairedSurrogate(value)) {
		throw badRequest("Request body holds text that is not valid Unicode: an unpaired surrogate escape such as \\ud800");
	}
	return value;
}

/**
 * Bodies are taken as they are, never decoded: one sent with a content coding (gzip) is refused with 415, naming the
 * coding and saying what to do (`advice`), with `Accept-Encoding: identity` (RFC 9110 §15.5.16).
 */
export function refuseContentCoding(request: Request, advice: string): void {
	const coding = (request.headers.get("Content-Encoding") ?? "").trim().toLowerCase();
	if (coding === "" || coding === "identity") return;
	throw new ApiError(415, "unsupported_media_type", `Content-Encoding ${coding} is not supported; ${advice}`, {
		headers: { "Accept-Encoding": "identity" },
	});
}

/** The `Content-Length` of an upload; 411 when it is missing or not a plain number (chunked bodies are refused). */
export function declaredLength(request: Request): number {
	const declared = request.headers.get("Content-Length");
	if (declared === null || !/^\d+$/.test(declared)) {
		throw new ApiError(411, "length_required", "Content-Length is required for uploads");
	}
	return Number(declared);
}

/**
 * Streams an upload body into `store` (an R2 put or part upload) as a stream of known length, never buffering it.
 * FixedLengthStream also refuses a body longer or shorter than declared: then, or when `store` fails, the result
 * says so with the error, and the caller cleans up and answers.
 */
export async function storeWithLength<T>(
	request: Request,
	length: number,
	store: (body: ReadableStream) => Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
	const fixed = new FixedLengthStream(length);
	const piping = (request.body ?? new ReadableStream({ start: (c) => c.close() })).pipeTo(fixed.writable);
	const [stored, piped] = await Promise.allSettled([store(fixed.readable), piping]);
	if (stored.status === "rejected") return { ok: false, error: stored.reason };
	if (piped.status === "rejected") return { ok: false, error: piped.reason };
	return { ok: true, value: stored.value };
}
