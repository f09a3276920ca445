/**
 * Loaded feature indexes by file, shared by concurrent jobs of the same voice, each on its own thread
 * (`index-thread.ts`). An index can be hundreds of MB, so only `capacity` are kept: beyond it the least recently
 * used idle ones are dropped, and before a new one is read. Dropping an index closes its thread, which frees its
 * memory at once; only idle ones are dropped, so no retrieval is cut. A file that fails to load is not kept, so a
 * fixed file is read again next time; a cached one damaged on disk is removed (`removeIfDamaged`), to be downloaded
 * again.
 */
import { removeIfDamaged } from "../../artifacts/damaged-artifact.ts";
import { IndexThread } from "./index-thread.ts";
import { once } from "./once.ts";

interface Entry {
	loaded: Promise<IndexThread>;
	/** Read for a transient use only: dropped when its last user is done. */
	transient: boolean;
	users: number;
	lastUsed: number;
}

/** Closes a dropped entry's thread once it has loaded (a failed load closed its own). */
function unload(entry: Entry): Promise<void> {
	return entry.loaded.then(
		(thread) => thread.close(),
		() => undefined,
	);
}

export class IndexCache {
	readonly #entries = new Map<string, Entry>();
	readonly #capacity: number;
	readonly #threadOptions: { intraOpNumThreads?: number };
	#clock = 0;

	constructor(capacity: number, threadOptions: { intraOpNumThreads?: number } = {}) {
		this.#capacity = capacity;
		this.#threadOptions = threadOptions;
	}

	get size(): number {
		return this.#entries.size;
	}

	/**
	 * The index in `path`, read once on its thread; call `release` when the job is done with it. `transient` (a
	 * voice's validation): reading it evicts nothing, and it is dropped after this use unless a job took it meanwhile.
	 */
	async acquire(
		path: string,
		{ transient = false }: { transient?: boolean } = {},
	): Promise<{ index: IndexThread; release: () => void }> {
		let entry = this.#entries.get(path);
		if (entry === undefined) {
			// Room first: an idle index past the capacity goes, its memory with its thread, before the new one is read.
			const room = transient ? Promise.resolve() : this.#evict(1);
			const loaded = room.then(() =>
				IndexThread.open(path, this.#threadOptions).catch(async (error: unknown) => {
					// Checked after the fact: hashing a large index on every first read would cost seconds.
					await removeIfDamaged(path, "feature index");
					throw error;
				}),
			);
			const created: Entry = { loaded, transient, users: 0, lastUsed: 0 };
			entry = created;
			this.#entries.set(path, created);
			loaded.catch(() => {
				if (this.#entries.get(path) === created) this.#entries.delete(path);
			});
		}
		entry.users++;
		if (!transient) {
			entry.transient = false;
			entry.lastUsed = ++this.#clock;
		}
		const current = entry;
		const release = once(() => {
			current.users--;
			if (current.transient && current.users === 0 && this.#entries.get(path) === current) {
				this.#entries.delete(path);
				void unload(current);
			}
			void this.#evict();
		});
		try {
			return { index: await current.loaded, release };
		} catch (error) {
			release();
			throw error;
		}
	}

	/**
	 * Drops the least recently used idle indexes until `reserve` more fit within the capacity (or none is idle).
	 * Transient ones do not count: they go after their use.
	 */
	#evict(reserve = 0): Promise<void> {
		const idle = [...this.#entries.entries()]
			.filter(([, e]) => e.users === 0)
			.sort(([, a], [, b]) => a.lastUsed - b.lastUsed);
		const kept = [...this.#entries.values()].filter((e) => !e.transient).length;
		let excess = kept + reserve - this.#capacity;
		const unloading: Promise<void>[] = [];
		for (const [path, entry] of idle) {
			if (excess <= 0) break;
			this.#entries.delete(path);
			unloading.push(unload(entry));
			excess--;
		}
		return Promise.all(unloading).then(() => undefined);
	}

	/** Drops every index and closes their threads (a retrieval in progress finishes first). */
	async clear(): Promise<void> {
		const all = [...this.#entries.values()];
		this.#entries.clear();
		await Promise.all(all.map(unload));
	}
}
