/**
 * Loaded feature indexes by file, shared by concurrent jobs of the same voice, each on its own thread
 * (`index-thread.ts`). An index can be as large as the upload limit (1000 MB), so the cache is bounded twice: at
 * most `count` indexes, and at most `bytes` of what they hold (`heldBytes`: vectors, ids, centroids, list bounds and
 * search norms, plus `INDEX_THREAD_BYTES` for the thread itself). Beyond either, the least recently used idle ones
 * are dropped, and before a new one is read (its file's size stands for what it will hold until it has loaded).
 * Dropping an index closes its thread, which frees its memory at once; only idle ones are dropped, so no retrieval is
 * cut. An index that alone holds more than `bytes` still serves its jobs (every idle one is dropped to make room),
 * but is not kept once the last of them is done. A file that fails to load is not kept, so a fixed file is read
 * again next time; a cached one damaged on disk is removed (`removeIfDamaged`), to be downloaded again. `forget`
 * drops a deleted voice's index, at once when idle, else when its last job is done.
 */
import { stat } from "node:fs/promises";
import { removeIfDamaged } from "../../artifacts/damaged-artifact.ts";
import { IndexThread } from "./index-thread.ts";
import { once } from "./once.ts";
import { untilAborted } from "./session-host.ts";

/**
 * What an index's thread costs beside the index: a worker's isolate and the search's two onnxruntime sessions
 * (measured: 24-29 MB of RSS for each of 8 threads holding a 19 KB index).
 */
export const INDEX_THREAD_BYTES = 25_000_000;

interface Entry {
	loaded: Promise<IndexThread>;
	/** Read for a transient use only, or forgotten: dropped when its last user is done. */
	transient: boolean;
	users: number;
	lastUsed: number;
	/** What it holds with its thread: its file's size until it has loaded, then the thread's own count. */
	bytes: number;
}

/** The file's size; 0 where it cannot be read (reading it then fails, and says why). */
function fileSize(path: string): Promise<number> {
	return stat(path).then(
		(info) => info.size,
		() => 0,
	);
}

/** Closes a dropped entry's thread once it has loaded (a failed load closed its own). */
function unload(entry: Entry): Promise<void> {
	return entry.loaded.then(
		(thread) => thread.close(),
		() => undefined,
	);
}

export interface IndexCacheLimits {
	/** Indexes kept, in use or idle. */
	count: number;
	/** Bytes they hold in all (default: no limit beyond `count`). */
	bytes?: number;
}

export class IndexCache {
	readonly #entries = new Map<string, Entry>();
	readonly #capacity: number;
	readonly #maxBytes: number;
	readonly #threadOptions: { intraOpNumThreads?: number };
	#clock = 0;

	constructor(limits: IndexCacheLimits, threadOptions: { intraOpNumThreads?: number } = {}) {
		this.#capacity = limits.count;
		this.#maxBytes = limits.bytes ?? Number.POSITIVE_INFINITY;
		this.#threadOptions = threadOptions;
	}

	get size(): number {
		return this.#entries.size;
	}

	/** What the kept indexes hold with their threads (transient ones not counted: they go after their use). */
	get bytes(): number {
		return this.#kept().reduce((sum, e) => sum + e.bytes, 0);
	}

	#kept(): Entry[] {
		return [...this.#entries.values()].filter((e) => !e.transient);
	}

	/**
	 * The index in `path`, read once on its thread; call `release` when the job is done with it. `transient` (a
	 * voice's validation): reading it evicts nothing, and it is dropped after this use unless a job took it meanwhile.
	 * `signal`, the job's abort: the job stops waiting for the read at once, with the abort's reason, its use given
	 * back; the read goes on for the voice's other jobs and is kept as any other (a large index takes seconds).
	 */
	async acquire(
		path: string,
		{ transient = false, signal }: { transient?: boolean; signal?: AbortSignal } = {},
	): Promise<{ index: IndexThread; release: () => void }> {
		signal?.throwIfAborted();
		let entry = this.#entries.get(path);
		if (entry === undefined) {
			// Room first: idle indexes past the limits go, their memory with their threads, before the new one is read;
			// until it has loaded, its file's size stands for what it will hold.
			const room = transient
				? Promise.resolve()
				: fileSize(path).then((size) => {
						created.bytes = size + INDEX_THREAD_BYTES;
						return this.#evict();
					});
			const loaded = room.then(() =>
				IndexThread.open(path, this.#threadOptions).catch(async (error: unknown) => {
					// Checked after the fact: hashing a large index on every first read would cost seconds.
					await removeIfDamaged(path, "feature index");
					throw error;
				}),
			);
			const created: Entry = { loaded, transient, users: 0, lastUsed: 0, bytes: 0 };
			entry = created;
			this.#entries.set(path, created);
			loaded.then(
				(thread) => {
					// Now what it holds is known (the file's size was close): the limits apply to that.
					created.bytes = thread.facts.heldBytes + INDEX_THREAD_BYTES;
					if (!created.transient) void this.#evict();
				},
				() => {
					if (this.#entries.get(path) === created) this.#entries.delete(path);
				},
			);
		}
		entry.users++;
		if (!transient) {
			entry.transient = false;
			entry.lastUsed = ++this.#clock;
		}
		const current = entry;
		const release = once(() => {
			current.users--;
			if (current.transient && current.users === 0) void this.#drop(path, current);
			void this.#evict();
		});
		try {
			return { index: await untilAborted(current.loaded, signal), release };
		} catch (error) {
			release();
			throw error;
		}
	}

	/**
	 * Drops idle indexes until the kept ones fit both limits (or none is idle): first any that alone holds more than
	 * the byte limit, then the least recently used. Transient ones do not count: they go after their use.
	 */
	#evict(): Promise<void> {
		const oversized = (e: Entry) => e.bytes > this.#maxBytes;
		const idle = [...this.#entries.entries()]
			.filter(([, e]) => e.users === 0)
			.sort(([, a], [, b]) => Number(oversized(b)) - Number(oversized(a)) || a.lastUsed - b.lastUsed);
		const kept = this.#kept();
		let excess = kept.length - this.#capacity;
		let excessBytes = kept.reduce((sum, e) => sum + e.bytes, 0) - this.#maxBytes;
		const unloading: Promise<void>[] = [];
		for (const [path, entry] of idle) {
			if (excess <= 0 && excessBytes <= 0 && !oversized(entry)) break;
			unloading.push(this.#drop(path, entry));
			excess--;
			excessBytes -= entry.bytes;
		}
		return Promise.all(unloading).then(() => undefined);
	}

	#drop(path: string, entry: Entry): Promise<void> {
		if (this.#entries.get(path) !== entry) return Promise.resolve();
		this.#entries.delete(path);
		return unload(entry);
	}

	/**
	 * Drops the index read from `path` (a deleted voice's): at once when no job uses it, else when the last one is
	 * done (a job that takes it meanwhile keeps it again). Resolves when an idle one's thread has closed.
	 */
	forget(path: string): Promise<void> {
		const entry = this.#entries.get(path);
		if (entry === undefined) return Promise.resolve();
		entry.transient = true;
		return entry.users === 0 ? this.#drop(path, entry) : Promise.resolve();
	}

	/** Drops every index and closes their threads (a retrieval in progress finishes first). */
	async clear(): Promise<void> {
		const all = [...this.#entries.values()];
		this.#entries.clear();
		await Promise.all(all.map(unload));
	}
}
