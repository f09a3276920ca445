/**
 * Bytes in and out over the signed storage addresses. Trust boundary: the URLs come from the lease and are
 * never logged (they carry signatures). HTTP failures here are transient: a later attempt gets fresh URLs.
 */
import { createReadStream } from "node:fs";
import { Readable } from "node:stream";
import { PermanentJobError } from "../job-errors.ts";

/** Sources are at most 100 MB (the spec); stop reading well past that rather than trust the server. */
export const MAX_SOURCE_BYTES = 100 * 1024 * 1024;

export class TransferError extends Error {
	constructor(message: string, options?: { cause?: unknown }) {
		super(message, options);
		this.name = "TransferError";
	}
}

/** Stream the source by its signed GET; yields network chunks as they arrive. */
export async function* downloadSource(
	url: string,
	signal: AbortSignal,
	fetchImpl: typeof fetch = fetch,
): AsyncGenerator<Uint8Array> {
	let response: Response;
	try {
		response = await fetchImpl(url, { signal });
	} catch (error) {
		if (signal.aborted) throw error;
		throw new TransferError("source download failed to connect", { cause: error });
	}
	if (!response.ok || !response.body) {
		await response.body?.cancel();
		throw new TransferError(`source download answered HTTP ${response.status}`);
	}
	let received = 0;
	const reader = response.body.getReader();
	try {
		for (;;) {
			const { done, value } = await reader.read();
			if (done) return;
			received += value.length;
			if (received > MAX_SOURCE_BYTES) {
				throw new PermanentJobError("too_large", `source is larger than ${MAX_SOURCE_BYTES} bytes`);
			}
			yield value;
		}
	} finally {
		// Reached when the decoder stops early (previews): stop downloading the rest.
		await reader.cancel().catch(() => {});
	}
}

/** PUT a local file to the signed output address with its exact Content-Length. */
export async function uploadWav(
	url: string,
	path: string,
	sizeBytes: number,
	signal: AbortSignal,
	fetchImpl: typeof fetch = fetch,
): Promise<void> {
	let response: Response;
	try {
		response = await fetchImpl(url, {
			method: "PUT",
			headers: { "content-type": "audio/wav", "content-length": String(sizeBytes) },
			body: Readable.toWeb(createReadStream(path)) as ReadableStream<Uint8Array>,
			duplex: "half",
			signal,
		} as RequestInit);
	} catch (error) {
		if (signal.aborted) throw error;
		throw new TransferError("output upload failed to connect", { cause: error });
	}
	await response.body?.cancel();
	if (!response.ok) throw new TransferError(`output upload answered HTTP ${response.status}`);
}
