/**
 * Bytes in and out over the signed storage addresses. Trust boundary: the URLs come from the lease and are
 * never logged (they carry signatures). HTTP failures here are transient: a later attempt gets fresh URLs.
 */
import { createReadStream } from "node:fs";
import http from "node:http";
import https from "node:https";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { PermanentJobError } from "../job-errors.ts";

/** Sources are at most 100 MB (the spec); stop reading well past that rather than trust the server. */
export const MAX_SOURCE_BYTES = 100 * 1024 * 1024;

export class TransferError extends Error {
	constructor(message: string, options?: { cause?: unknown }) {
		super(message, options);
		this.name = "TransferError";
	}
}

/**
 * Stream the source by its signed GET; yields network chunks as they arrive, and the socket is paused while
 * the decoder is busy. node:http rather than fetch: with undici's fetch, a server that closed its idle
 * keep-alive socket after sending the whole body, while the runner was still converting, crashed the process
 * with an uncaught "terminated" error from inside undici.
 */
export async function* downloadSource(url: string, signal: AbortSignal): AsyncGenerator<Uint8Array> {
	const target = new URL(url);
	let response: http.IncomingMessage;
	try {
		response = await new Promise<http.IncomingMessage>((resolve, reject) => {
			const request = (target.protocol === "https:" ? https : http).get(target, { signal }, resolve);
			request.once("error", reject);
		});
	} catch (error) {
		if (signal.aborted) throw error;
		throw new TransferError("source download failed to connect", { cause: error });
	}
	try {
		const status = response.statusCode ?? 0;
		if (status < 200 || status >= 300) throw new TransferError(`source download answered HTTP ${status}`);
		let received = 0;
		for await (const chunk of response as AsyncIterable<Buffer>) {
			received += chunk.length;
			if (received > MAX_SOURCE_BYTES) {
				throw new PermanentJobError("too_large", `source is larger than ${MAX_SOURCE_BYTES} bytes`);
			}
			yield chunk;
		}
	} catch (error) {
		if (signal.aborted || error instanceof TransferError || error instanceof PermanentJobError) throw error;
		throw new TransferError("source download broke off", { cause: error });
	} finally {
		// Also reached when the decoder stops early (previews): stop downloading the rest.
		response.destroy();
	}
}

/** What came back from a PUT of a file: the status and the (small) response body. */
export interface PutAnswer {
	status: number;
	body: string;
}

/**
 * PUT `length` bytes of a local file from `start`, with that exact Content-Length. node:http rather than fetch:
 * undici's fetch reads a streamed request body ahead of the socket (a 100 MB upload held ~90 MB in memory,
 * whether the body came from `Readable.toWeb` or a pull-based stream), while `pipeline` into an http request
 * waits for the socket to drain. Network failures become a TransferError; every HTTP answer is returned.
 */
export async function putFileRange(
	url: string,
	path: string,
	range: { start: number; length: number },
	headers: Record<string, string>,
	signal: AbortSignal,
): Promise<PutAnswer> {
	const target = new URL(url);
	const request = (target.protocol === "https:" ? https : http).request(target, {
		method: "PUT",
		headers: { ...headers, "content-length": range.length },
		signal,
	});
	const response = new Promise<http.IncomingMessage>((resolve, reject) => {
		request.once("response", resolve);
		request.once("error", reject);
	});
	// A connection that fails rejects this and `pipeline` below alike; the catch handles it through `pipeline`, so
	// this copy must not become an unhandled rejection (which would end the runner's process with every job).
	response.catch(() => undefined);
	try {
		const body =
			range.length === 0
				? Readable.from([])
				: createReadStream(path, { start: range.start, end: range.start + range.length - 1 });
		await pipeline(body, request);
		const answer = await response;
		const chunks: Buffer[] = [];
		let kept = 0;
		for await (const chunk of answer as AsyncIterable<Buffer>) {
			// Answers are small JSON; never hold more than 64 KiB of one.
			if (kept < 65_536) chunks.push(chunk);
			kept += chunk.length;
		}
		return { status: answer.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") };
	} catch (error) {
		if (signal.aborted) throw error;
		throw new TransferError("upload failed", { cause: error });
	}
}

/** PUT a local file to the signed output address (outputs up to the lease's part size). */
export async function uploadWav(url: string, path: string, sizeBytes: number, signal: AbortSignal): Promise<void> {
	const answer = await putFileRange(
		url,
		path,
		{ start: 0, length: sizeBytes },
		{ "content-type": "audio/wav" },
		signal,
	);
	if (answer.status < 200 || answer.status >= 300) {
		throw new TransferError(`output upload answered HTTP ${answer.status}`);
	}
}
