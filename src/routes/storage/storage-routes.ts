/**
 * The routes behind signed storage addresses. No bearer token: the address carries its own authorization.
 * Downloads stream from R2 with Range support; uploads stream into R2 while bytes are counted, so a body is
 * never held whole in memory and one at or over its limit is refused without keeping anything.
 */
import { z } from "zod";
import { ApiError } from "../../http/errors.ts";
import { declaredLength, mediaType, refuseContentCoding, storeWithLength } from "../../http/request-body.ts";
import { defineRoute } from "../../http/route.ts";
import { STORAGE_PATH_PREFIX, type StorageGrant, verifyStorageUrl } from "../../storage/signed-url.ts";
import { stagedUploadKey } from "../../storage/staged-uploads.ts";
import { type UploadHook, uploadHookFor } from "../../storage/upload-hooks.ts";

const StorageParams = z.object({ key: z.string().min(1) });
const path = `${STORAGE_PATH_PREFIX}{key+}`;

/** A conversion's output (`outputs/<account>/<conversion>/<lease>.wav`): saved as `<conversion id>.wav`. */
const OUTPUT_KEY = /^outputs\/[^/]+\/([0-9a-zA-Z-]+)\/[^/]+\.wav$/;

function objectHeaders(object: R2Object, expiresAt: Date): Headers {
	const headers = new Headers();
	object.writeHttpMetadata(headers);
	const output = OUTPUT_KEY.exec(object.key);
	// A browser given the address saves the file under the conversion's id, not the lease's that names the object.
	if (output) headers.set("Content-Disposition", `attachment; filename="${output[1]}.wav"`);
	headers.set("ETag", object.httpEtag);
	headers.set("Accept-Ranges", "bytes");
	const maxAge = Math.max(0, Math.floor((expiresAt.getTime() - Date.now()) / 1000));
	headers.set("Cache-Control", `private, max-age=${maxAge}`);
	if (!headers.has("Content-Type")) headers.set("Content-Type", "application/octet-stream");
	return headers;
}

/**
 * The Range header to honour: none when `If-Range` names another version than the object's (RFC 9110 §13.1.5), so
 * a download resumed after the object at this key was replaced (a voice's new sample) gets it whole instead of the
 * rest of the new bytes after the start of the old ones. We send no Last-Modified, so a date never matches.
 */
function rangeHeader(request: Request, object: R2Object): string | null {
	const ifRange = request.headers.get("If-Range");
	if (ifRange !== null && ifRange.trim() !== object.httpEtag) return null;
	return request.headers.get("Range");
}

/** Whether `If-None-Match` names the object's version (`*`, or one of its entity tags, compared weakly: RFC 9110 §13.1.2). */
function unchangedFor(request: Request, object: R2Object): boolean {
	const header = request.headers.get("If-None-Match");
	if (header === null) return false;
	if (header.trim() === "*") return true;
	const opaque = (tag: string) => tag.trim().replace(/^W\//, "");
	const current = opaque(object.httpEtag);
	return header.split(",").some((tag) => opaque(tag) === current);
}

/** Parses a single `bytes=` range against the object size; null when absent. Multi-range requests get the whole object. */
function parseRange(header: string | null, size: number): R2Range | "unsatisfiable" | null {
	if (!header) return null;
	// Range units are case-insensitive (RFC 9110 §14.1).
	const match = /^bytes=(\d*)-(\d*)$/i.exec(header.trim());
	if (!match) return null;
	const [, startText = "", endText = ""] = match;
	if (startText === "" && endText === "") return null;
	if (startText === "") {
		const suffix = Number(endText);
		if (suffix === 0) return "unsatisfiable";
		return { suffix: Math.min(suffix, size) };
	}
	const offset = Number(startText);
	if (offset >= size) return "unsatisfiable";
	const end = endText === "" ? size - 1 : Math.min(Number(endText), size - 1);
	if (end < offset) return "unsatisfiable";
	return { offset, length: end - offset + 1 };
}

async function download(request: Request, env: Env, url: URL): Promise<Response> {
	const grant = await verifyStorageUrl(env, url, request.method);
	const head = await env.BUCKET.head(grant.key);
	if (!head) throw new ApiError(404, "not_found", "The object at this address does not exist (or was deleted)");
	// A client holding this version already (a cache revalidating, a download checked again) gets no body.
	if (unchangedFor(request, head))
		return new Response(null, { status: 304, headers: objectHeaders(head, grant.expiresAt) });
	const range = parseRange(rangeHeader(request, head), head.size);
	if (range === "unsatisfiable") {
		throw new ApiError(
			416,
			"range_not_satisfiable",
			`The requested range lies outside the object (${head.size} bytes)`,
			{
				headers: { "Content-Range": `bytes */${head.size}` },
			},
		);
	}
	if (request.method === "HEAD") {
		const headers = objectHeaders(head, grant.expiresAt);
		headers.set("Content-Length", String(head.size));
		return new Response(null, { headers });
	}
	const object = await env.BUCKET.get(grant.key, range ? { range } : {});
	if (!object) throw new ApiError(404, "not_found", "The object at this address does not exist (or was deleted)");
	const headers = objectHeaders(object, grant.expiresAt);
	if (range && object.range) {
		const r = object.range as { offset?: number; length?: number; suffix?: number };
		const offset = r.suffix !== undefined ? head.size - r.suffix : (r.offset ?? 0);
		const length = r.suffix !== undefined ? r.suffix : (r.length ?? head.size - offset);
		headers.set("Content-Range", `bytes ${offset}-${offset + length - 1}/${head.size}`);
		headers.set("Content-Length", String(length));
		return new Response(object.body, { status: 206, headers });
	}
	headers.set("Content-Length", String(object.size));
	return new Response(object.body, { headers });
}

/**
 * Tells the key's hook that a body was refused for its size. The client gets its 413 whatever happens here: a
 * failure is logged, and the unrecorded refusal is caught later by the safety net (the upload window closes).
 */
async function recordTooLarge(env: Env, hook: UploadHook | undefined, grant: StorageGrant, declaredBytes: number) {
	try {
		await hook?.tooLarge?.(env, grant, declaredBytes);
	} catch (error) {
		console.error(
			JSON.stringify({
				level: "error",
				msg: "could not record an upload refused for its size",
				key: grant.key,
				error: error instanceof Error ? error.message : String(error),
			}),
		);
	}
}

async function upload(request: Request, env: Env, url: URL): Promise<Response> {
	const startedAt = Date.now();
	const grant = await verifyStorageUrl(env, url, request.method);
	if (grant.contentType && mediaType(request) !== grant.contentType.toLowerCase()) {
		throw new ApiError(
			415,
			"unsupported_media_type",
			`Content-Type must be ${grant.contentType}, the type this upload was registered with`,
		);
	}
	// A compressed body would be stored as it came, and then not be the file (a WAV that reads as no audio at all).
	refuseContentCoding(request, "upload the file's own bytes, uncompressed");
	const length = declaredLength(request);
	const hook = uploadHookFor(grant.key);
	if (grant.maxBytes !== undefined && length >= grant.maxBytes) {
		await recordTooLarge(env, hook, grant, length);
		throw new ApiError(
			413,
			"payload_too_large",
			hook?.tooLargeMessage?.(grant, length) ?? `Uploads must be smaller than ${grant.maxBytes} bytes`,
		);
	}
	await hook?.beforePut?.(env, grant, length);
	if (hook?.store) return hook.store(env, grant, request, length);

	// A staged upload goes into an object of its own, which its hook makes the file's (upload-hooks.ts).
	const key = hook?.staged ? stagedUploadKey(grant.key) : grant.key;
	const stored = await storeWithLength(request, length, (body) =>
		env.BUCKET.put(key, body, { httpMetadata: { contentType: grant.contentType } }),
	);
	if (!stored.ok || !stored.value) {
		await env.BUCKET.delete(key);
		throw new ApiError(
			400,
			"upload_incomplete",
			"The upload body did not match its Content-Length; nothing was stored",
		);
	}
	const object = stored.value;
	await hook?.afterPut?.(env, grant, object, startedAt);
	return new Response(null, { status: 200 });
}

const storageResponses = {
	200: { description: "Object bytes (GET) or empty body (PUT)" },
	206: { description: "Partial content for a Range request" },
	403: { description: "Tampered, malformed, expired or wrong-method address" },
	404: { description: "No object at this address" },
};

export const storageRoutes = [
	defineRoute({
		method: "GET",
		path,
		auth: "none",
		internal: true,
		summary: "Download through a signed address",
		tags: ["Storage"],
		params: StorageParams,
		responses: { ...storageResponses, 416: { description: "Range outside the object" } },
		handler: ({ request, env, url }) => download(request, env, url),
	}),
	defineRoute({
		method: "HEAD",
		path,
		auth: "none",
		internal: true,
		summary: "Object metadata through a signed GET address",
		tags: ["Storage"],
		params: StorageParams,
		responses: storageResponses,
		handler: ({ request, env, url }) => download(request, env, url),
	}),
	defineRoute({
		method: "PUT",
		path,
		auth: "none",
		internal: true,
		summary: "Upload through a signed address",
		tags: ["Storage"],
		params: StorageParams,
		responses: {
			...storageResponses,
			400: {
				description:
					"`upload_incomplete`: the body did not match its Content-Length; `voice_file_size_mismatch`: a voice file or part of another length than its declared `size_bytes` (nothing kept)",
			},
			411: { description: "Content-Length missing" },
			413: {
				description:
					"Too large (an audio file's upload of 100 MB or more is also recorded on the file: it fails as too large, with the conversions waiting on it)",
			},
			415: { description: "Wrong Content-Type, or a Content-Encoding (the file's own bytes go uncompressed)" },
		},
		handler: ({ request, env, url }) => upload(request, env, url),
	}),
];
