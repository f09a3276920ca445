/**
 * Model artifacts (weights, indexes) on local disk, named by their sha256. A download streams to a temporary
 * file while hashing, is checked against the catalogue's checksum and size, and only then renamed into
 * place (rename is atomic on one filesystem), so a crash or a bad download never leaves a file that looks
 * valid. Concurrent jobs that need the same artifact share one download.
 *
 * The folder has a size budget (`maxBytes`). After each download, the least recently used artifacts are removed
 * until the folder fits again, each with what was built from it beside it (a `.pth` checkpoint's synthesizer
 * graph, `<sha256>.synthesizer-v*.onnx`: files that share the sha256 prefix go together). Never removed:
 * - artifacts a job holds (`hold()`: from before their download until the job releases them), so a file is never
 *   taken from under the job that is about to open it;
 * - artifacts used in the last `RECENT_USE_MS`, by the file's mtime, which every use refreshes: another runner
 *   sharing the folder may hold them, and its holds are not visible here.
 * The folder can go over the budget while that is all it holds; the next download tries again. The same pass
 * removes the temporaries of downloads and builds that a runner killed mid-way left (unwritten for as long).
 *
 * On reuse a file is trusted without reading it only while it is the very file some runner last knew to have its
 * checksum: same inode, size, mtime and ctime (with nanoseconds) as `stat` gave after that check or after that
 * runner's last use. Each runner notes this in a verification record beside the file, `<sha256>.verified` (the
 * checksum and the stamp, written to a temporary and renamed into place, so a record is whole or absent), which the
 * runners sharing the folder, and this one after a restart, trust as their own: before, each use by another runner
 * (its touch changes mtime and ctime) made the next one hash the whole file again, 140 ms for a 110 MB checkpoint
 * from the page cache, each time two runners took turns with a voice. Any write to the file changes its ctime, which
 * no one can set back, so a file changed since its record (in place, truncated, replaced) is hashed again first, and
 * one that no longer has its checksum is downloaded again: an index or a checkpoint changed on disk in a way that
 * still parses would otherwise be used as it is. A record that is missing, unreadable or of another stamp is only a
 * reason to hash. The record goes with its artifact (same sha256 prefix) when it is removed.
 */
import { createHash, randomUUID } from "node:crypto";
import { type BigIntStats, createWriteStream, rmSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ModelArtifact } from "../../../src/contracts/runner.ts";
import { describeError, type Logger, silentLogger } from "../logger.ts";
import { sha256Of, VERIFICATION_RECORD } from "./damaged-artifact.ts";

/** Artifacts used this recently are kept whatever the budget (see above). */
const RECENT_USE_MS = 10 * 60 * 1000;
/**
 * Temporaries of a download (`.download-*`), of a synthesizer build (`.synthesizer-*`, `synthesizer-file.ts`) or of a
 * verification record (`.verified-*`).
 */
const UNFINISHED = /^\.(download|synthesizer|verified)-/;

export class ArtifactError extends Error {
	constructor(message: string, options?: { cause?: unknown }) {
		super(message, options);
		this.name = "ArtifactError";
	}
}

export interface ArtifactCacheOptions {
	/** The folder's size budget in bytes (default: no budget). */
	maxBytes?: number;
	fetch?: typeof fetch;
	logger?: Logger;
	/** Told the sha256 of each artifact removed for room. */
	onRemoved?: (sha256: string) => void;
}

/** The artifacts one job uses: none of them is removed for room until `release()`. */
export interface ArtifactHold {
	/** Local paths of all artifacts, by artifact name, downloading what is missing. */
	ensureAll(artifacts: readonly ModelArtifact[], signal: AbortSignal): Promise<Map<string, string>>;
	/**
	 * Downloads a file whose checksum is learnt on the way (an account's uploaded voice file, read for validation)
	 * into the cache under that checksum, so the conversions that follow find it there.
	 */
	adopt(url: string, name: string, signal: AbortSignal): Promise<{ path: string; sha256: string; sizeBytes: number }>;
	release(): void;
}

/** What a trim left and removed. */
export interface TrimReport {
	/** Bytes in the folder after it. */
	bytesAfter: number;
	/** The sha256 of each artifact it removed. */
	removed: string[];
}

/** The artifact a cache file belongs to: its sha256, the name before the first dot (`<sha256>.bin`, its builds). */
const artifactOf = (name: string) => name.split(".", 1)[0] as string;

export class ArtifactCache {
	readonly dir: string;
	readonly #maxBytes: number;
	#fetch: typeof fetch;
	#logger: Logger;
	#onRemoved: (sha256: string) => void;
	#inFlight = new Map<string, Promise<string>>();
	/** Holds per sha256. */
	#held = new Map<string, number>();
	/**
	 * When this process last used each artifact (the mtime it left on the file): a later mtime is another runner's
	 * use, sharing the folder, whose holds are not visible here.
	 */
	#usedAt = new Map<string, number>();
	/** What `stat` gave of each artifact's file when this process last knew it to have its checksum (see above). */
	#verified = new Map<string, string>();
	#trimming: Promise<unknown> = Promise.resolve();
	/** How many cached files were hashed again (see above): lets tests see when a check is reused. */
	checksumsComputed = 0;
	/** How many cached files were trusted on another runner's (or an earlier process's) verification record. */
	recordsTrusted = 0;

	constructor(dir: string, options: ArtifactCacheOptions = {}) {
		this.dir = dir;
		this.#maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
		this.#fetch = options.fetch ?? fetch;
		this.#logger = options.logger ?? silentLogger;
		this.#onRemoved = options.onRemoved ?? (() => {});
	}

	pathFor(artifact: Pick<ModelArtifact, "sha256">): string {
		return join(this.dir, `${artifact.sha256}.bin`);
	}

	hold(): ArtifactHold {
		const held: string[] = [];
		let released = false;
		const pin = (sha256: string) => {
			if (released) throw new Error("artifact hold used after its release");
			held.push(sha256);
			this.#held.set(sha256, (this.#held.get(sha256) ?? 0) + 1);
		};
		return {
			ensureAll: async (artifacts, signal) => {
				for (const artifact of artifacts) pin(artifact.sha256);
				const paths = await Promise.all(artifacts.map((a) => this.#ensureShared(a, signal)));
				return new Map(artifacts.map((a, i) => [a.name, paths[i] as string]));
			},
			adopt: (url, name, signal) => this.#adopt(url, name, signal, pin),
			release: () => {
				if (released) return;
				released = true;
				for (const sha256 of held) {
					const count = (this.#held.get(sha256) ?? 1) - 1;
					if (count > 0) this.#held.set(sha256, count);
					else this.#held.delete(sha256);
				}
			},
		};
	}

	/**
	 * Removes these artifacts (a deleted voice's files) with what was built from them, all or none: false, removing
	 * nothing, while a job holds any of them (its conversion was accepted before the deletion and finishes with
	 * them), or while another runner sharing the folder used one in the last `RECENT_USE_MS` (its holds are not
	 * visible here, and it may be about to open the file). Like a trim, the check and the removal are one turn of the
	 * event loop.
	 */
	async discard(sha256s: readonly string[]): Promise<boolean> {
		const names = await readdir(this.dir).catch(() => [] as string[]);
		const recent = Date.now() - RECENT_USE_MS;
		for (const sha256 of sha256s) {
			const info = await stat(join(this.dir, `${sha256}.bin`)).catch(() => undefined);
			// Our own uses are covered by the holds; a later mtime (beyond rounding) is someone else's.
			if (info && info.mtimeMs > recent && info.mtimeMs > (this.#usedAt.get(sha256) ?? 0) + 1) return false;
		}
		if (sha256s.some((sha256) => this.#held.has(sha256))) return false;
		for (const sha256 of new Set(sha256s)) {
			const files = names.filter((name) => artifactOf(name) === sha256);
			if (files.length === 0) continue;
			this.#removeFiles(sha256, files);
			this.#logger.info("artifact of a deleted voice removed", { sha256 });
		}
		return true;
	}

	/**
	 * Removes the least recently used artifacts that are neither held nor recently used until the folder fits its
	 * budget. Trims run one at a time; each download starts one without waiting for it.
	 */
	trim(): Promise<TrimReport> {
		const run = this.#trimming.then(() => this.#trim());
		this.#trimming = run.catch(() => {});
		return run;
	}

	#ensureShared(artifact: ModelArtifact, signal: AbortSignal): Promise<string> {
		let pending = this.#inFlight.get(artifact.sha256);
		if (!pending) {
			pending = this.#ensure(artifact, signal).finally(() => this.#inFlight.delete(artifact.sha256));
			this.#inFlight.set(artifact.sha256, pending);
		}
		return pending;
	}

	/**
	 * The artifact's file, where the folder holds it as it was downloaded (hashed again unless this process knows it
	 * unchanged since, see above), else undefined. Neither downloads nor counts as a use: the runner's start-up warms
	 * the voices of its last run with it, so a first job after a restart does not pay for the hashing.
	 */
	async cached(artifact: Pick<ModelArtifact, "name" | "sha256" | "size_bytes">): Promise<string | undefined> {
		const target = this.pathFor(artifact);
		return (await this.#intact(artifact, target)) ? target : undefined;
	}

	/** Whether the file at `target` has the artifact's size and checksum, remembered as such if it has. */
	async #intact(artifact: Pick<ModelArtifact, "name" | "sha256" | "size_bytes">, target: string): Promise<boolean> {
		const existing = await stat(target, { bigint: true }).catch(() => undefined);
		// The name is the checksum verified at download; the size check catches a file truncated behind our back, and
		// a file this process did not leave as it is now is hashed again (see above).
		if (!existing?.isFile() || existing.size !== BigInt(artifact.size_bytes)) return false;
		if (this.#verified.get(artifact.sha256) === stamp(existing)) return true;
		if (await this.#recorded(artifact.sha256, existing)) {
			this.recordsTrusted++;
			this.#verified.set(artifact.sha256, stamp(existing));
			return true;
		}
		this.checksumsComputed++;
		if ((await sha256Of(target).catch(() => undefined)) === artifact.sha256) {
			await this.#remember(artifact.sha256, target);
			return true;
		}
		this.#verified.delete(artifact.sha256);
		this.#logger.warn("cached artifact no longer has its checksum (damaged on disk): it will be downloaded again", {
			name: artifact.name,
			sha256: artifact.sha256,
		});
		return false;
	}

	async #ensure(artifact: ModelArtifact, signal: AbortSignal): Promise<string> {
		const target = this.pathFor(artifact);
		if (await this.#intact(artifact, target)) {
			this.#usedAt.set(artifact.sha256, await touch(target));
			await this.#remember(artifact.sha256, target);
			return target;
		}

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
			this.#usedAt.set(artifact.sha256, Date.now());
			await this.#remember(artifact.sha256, target);
			this.#trimLater();
			return target;
		} finally {
			await rm(temporary, { force: true });
		}
	}

	async #adopt(
		url: string,
		name: string,
		signal: AbortSignal,
		pin: (sha256: string) => void,
	): Promise<{ path: string; sha256: string; sizeBytes: number }> {
		await mkdir(this.dir, { recursive: true });
		const temporary = join(this.dir, `.download-${randomUUID()}`);
		try {
			const file = await this.#download(url, name, temporary, signal);
			const path = join(this.dir, `${file.sha256}.bin`);
			pin(file.sha256); // before it is in place, so no trim can see it unheld
			await rename(temporary, path);
			this.#usedAt.set(file.sha256, Date.now());
			await this.#remember(file.sha256, path);
			this.#trimLater();
			return { path, ...file };
		} finally {
			await rm(temporary, { force: true });
		}
	}

	/**
	 * Notes the file at `path` as it is now as one with the checksum `sha256` (just verified, or just used as such),
	 * here and in its verification record for the runners sharing the folder.
	 */
	async #remember(sha256: string, path: string): Promise<void> {
		const info = await stat(path, { bigint: true }).catch(() => undefined);
		if (info === undefined) {
			this.#verified.delete(sha256);
			return;
		}
		this.#verified.set(sha256, stamp(info));
		const record: VerificationRecord = { sha256, stamp: stamp(info) };
		const temporary = join(this.dir, `${VERIFICATION_RECORD}-${randomUUID()}`);
		try {
			await writeFile(temporary, JSON.stringify(record));
			await rename(temporary, join(this.dir, `${sha256}${VERIFICATION_RECORD}`));
		} catch (error) {
			// Only a saving lost: the other runners hash the file as before.
			await rm(temporary, { force: true });
			this.#logger.warn("artifact verification record not written", { sha256, error: describeError(error) });
		}
	}

	/** Whether the verification record beside the artifact vouches for its file as `stat` gives it now. */
	async #recorded(sha256: string, info: BigIntStats): Promise<boolean> {
		const text = await readFile(join(this.dir, `${sha256}${VERIFICATION_RECORD}`), "utf8").catch(() => undefined);
		if (text === undefined || text.length > 1024) return false;
		try {
			const record = JSON.parse(text) as Partial<VerificationRecord>;
			return record.sha256 === sha256 && record.stamp === stamp(info);
		} catch {
			return false;
		}
	}

	#trimLater(): void {
		if (this.#maxBytes === Number.POSITIVE_INFINITY) return;
		this.trim().catch((error: unknown) =>
			this.#logger.warn("artifact cache trim failed", { error: describeError(error) }),
		);
	}

	/** Removes an artifact's files, synchronously (in the same turn as the hold check before it), and says so. */
	#removeFiles(sha256: string, files: readonly string[]): void {
		for (const name of files) rmSync(join(this.dir, name), { force: true });
		// Whatever is at that name from now on is another download's, ours or another runner's.
		this.#usedAt.delete(sha256);
		this.#verified.delete(sha256);
		this.#onRemoved(sha256);
	}

	async #trim(): Promise<TrimReport> {
		const groups = new Map<string, { files: string[]; bytes: number; lastUsed: number }>();
		let bytes = 0;
		const recent = Date.now() - RECENT_USE_MS;
		for (const name of await readdir(this.dir).catch(() => [] as string[])) {
			const info = await stat(join(this.dir, name)).catch(() => undefined);
			if (!info?.isFile()) continue;
			if (name.startsWith(".")) {
				// A download or a build in progress; one not written for a while was left by a runner that died
				// mid-way (it writes as bytes arrive), and nothing else would ever remove it.
				if (UNFINISHED.test(name) && info.mtimeMs < recent) {
					await rm(join(this.dir, name), { force: true });
					this.#logger.info("unfinished download removed", { file: name, bytes: info.size });
				}
				continue;
			}
			const key = artifactOf(name);
			const group = groups.get(key) ?? { files: [], bytes: 0, lastUsed: 0 };
			group.files.push(name);
			groups.set(key, group);
			// A record goes with its artifact but counts for nothing: its bytes (under 200) are not the artifact's,
			// and its mtime is no use of it (the start-up's warm-up, which is none, writes one too).
			if (name.endsWith(VERIFICATION_RECORD)) continue;
			group.bytes += info.size;
			group.lastUsed = Math.max(group.lastUsed, info.mtimeMs);
			bytes += info.size;
		}
		const report: TrimReport = { bytesAfter: bytes, removed: [] };
		if (bytes <= this.#maxBytes) return report;
		const candidates = [...groups]
			.filter(([key, group]) => !this.#held.has(key) && group.lastUsed < recent)
			.sort(([, a], [, b]) => a.lastUsed - b.lastUsed);
		for (const [key, group] of candidates) {
			if (report.bytesAfter <= this.#maxBytes) break;
			// Checked and removed in one turn of the event loop: a job holds its artifacts before it looks for them,
			// so it either stops this removal or finds the files gone and downloads them again.
			if (this.#held.has(key)) continue;
			this.#removeFiles(key, group.files);
			report.bytesAfter -= group.bytes;
			report.removed.push(key);
			this.#logger.info("artifact removed for room", { sha256: key, bytes: group.bytes });
		}
		if (report.bytesAfter > this.#maxBytes) {
			this.#logger.warn("artifact cache over its budget: the rest is held by jobs or recently used", {
				bytes: report.bytesAfter,
				max_bytes: this.#maxBytes,
			});
		}
		return report;
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

/** What a verification record (`<sha256>.verified`) holds. */
interface VerificationRecord {
	sha256: string;
	stamp: string;
}

/**
 * A file's identity and last change as `stat` tells them: equal only while nothing wrote to it or touched it. Not
 * the device: a record names a file beside it in one folder, and a network filesystem's device number differs
 * between the machines that mount it (its inode numbers and ctimes do not).
 */
const stamp = (info: BigIntStats): string => `${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}`;

/** Marks a file as used now (its mtime orders the least recently used); answers the time it set. */
async function touch(path: string): Promise<number> {
	const now = new Date();
	await utimes(path, now, now).catch(() => {});
	return now.getTime();
}
