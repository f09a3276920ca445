/**
 * Model artifacts (weights, indexes) on local disk, named by their sha256. A download streams to a temporary
 * file while hashing, is checked against the catalogue's checksum and size, and only then renamed into
 * place (rename is atomic on one filesystem), so a crash or a bad download never leaves a file that looks
 * valid. Concurrent jobs that need the same artifact share one download.
 */
import { createHash, randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ModelArtifact } from "../../../src/contracts/runner.ts";

export class ArtifactError extends Error {
	constructor(message: string, options?: { cause?: unknown }) {
		super(message, options);
		this.name = "ArtifactError";
	}
}

export class ArtifactCache {
	readonly dir: string;
	#fetch: typeof fetch;
	#inFlight = new Map<string, Promise<string>>();

	constructor(dir: string, fetchImpl: typeof fetch = fetch) {
		this.dir = dir;
		this.#fetch = fetchImpl;
	}

	pathFor(artifact: ModelArtifact): string {
		return join(this.dir, `${artifact.sha256}.bin`);
	}

	/** Local paths of all artifacts, by artifact name, downloading what is missing. */
	async ensureAll(artifacts: readonly ModelArtifact[], signal: AbortSignal): Promise<Map<string, string>> {
		const paths = await Promise.all(artifacts.map((a) => this.ensure(a, signal)));
		return new Map(artifacts.map((a, i) => [a.name, paths[i] as string]));
	}

	ensure(artifact: ModelArtifact, signal: AbortSignal): Promise<string> {
		let pending = this.#inFlight.get(artifact.sha256);
		if (!pending) {
			pending = this.#ensure(artifact, signal).finally(() => this.#inFlight.delete(artifact.sha256));
			this.#inFlight.set(artifact.sha256, pending);
		}
		return pending;
	}

	async #ensure(artifact: ModelArtifact, signal: AbortSignal): Promise<string> {
		const target = this.pathFor(artifact);
		const existing = await stat(target).catch(() => undefined);
		// The name is the verified checksum; the size check catches a file truncated behind our back.
		if (existing?.isFile() && existing.size === artifact.size_bytes) return target;

		await mkdir(this.dir, { recursive: true });
		const temporary = join(this.dir, `.download-${randomUUID()}`);
		try {
			const { sha256: digest, sizeBytes: size } = await this.#download(artifact.url, artifact.name, temporary, signal);
			if (digest !== artifact.sha256 || size !== artifact.size_bytes) {
				throw new ArtifactError(
					`artifact ${artifact.name} failed verification: got sha256 ${digest} (${size} bytes), expected ${artifact.sha256} (${artifact.size_bytes} bytes)`,
				);
			}
			await rename(temporary, target);
			return target;
		} finally {
			await rm(temporary, { force: true });
		}
	}

	/**
	 * Downloads a file whose checksum is learnt on the way (an account's uploaded voice file, read for validation)
	 * into the cache under that checksum, so the conversions that follow find it there.
	 */
	async adopt(
		url: string,
		name: string,
		signal: AbortSignal,
	): Promise<{ path: string; sha256: string; sizeBytes: number }> {
		await mkdir(this.dir, { recursive: true });
		const temporary = join(this.dir, `.download-${randomUUID()}`);
		try {
			const file = await this.#download(url, name, temporary, signal);
			const path = join(this.dir, `${file.sha256}.bin`);
			await rename(temporary, path);
			return { path, ...file };
		} finally {
			await rm(temporary, { force: true });
		}
	}

	/** Streams `url` into `temporary` while hashing it. */
	async #download(url: string, name: string, temporary: string, signal: AbortSignal) {
		const response = await this.#fetch(url, { signal }).catch((error: unknown) => {
			throw new ArtifactError(`artifact ${name} download failed to connect`, { cause: error });
		});
		if (!response.ok || !response.body) {
			await response.body?.cancel();
			throw new ArtifactError(`artifact ${name} download answered HTTP ${response.status}`);
		}
		const hash = createHash("sha256");
		let size = 0;
		const body = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
		await pipeline(
			body,
			async function* measure(source: AsyncIterable<Buffer>) {
				for await (const chunk of source) {
					hash.update(chunk);
					size += chunk.length;
					yield chunk;
				}
			},
			createWriteStream(temporary),
			{ signal },
		);
		return { sha256: hash.digest("hex"), sizeBytes: size };
	}
}
