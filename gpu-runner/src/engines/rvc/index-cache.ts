/**
 * Loaded feature indexes by file, shared by concurrent jobs of the same voice. An index can be hundreds of MB,
 * so only `capacity` are kept: beyond it the least recently used idle ones are dropped (their memory is then the
 * garbage collector's). A file that fails to load is not kept, so a fixed file is read again next time.
 */
import { type FeatureIndex, readFaissIndex } from "./faiss-index.ts";

interface Entry {
	index: Promise<FeatureIndex>;
	users: number;
	lastUsed: number;
}

export class IndexCache {
	readonly #entries = new Map<string, Entry>();
	readonly #capacity: number;
	#clock = 0;

	constructor(capacity: number) {
		this.#capacity = capacity;
	}

	get size(): number {
		return this.#entries.size;
	}

	/** The index in `path`, read once; call `release` when the job is done with it. */
	async acquire(path: string): Promise<{ index: FeatureIndex; release: () => void }> {
		let entry = this.#entries.get(path);
		if (entry === undefined) {
			const index = readFaissIndex(path);
			entry = { index, users: 0, lastUsed: 0 };
			this.#entries.set(path, entry);
			index.catch(() => this.#entries.delete(path));
		}
		entry.users++;
		entry.lastUsed = ++this.#clock;
		const current = entry;
		let released = false;
		const release = (): void => {
			if (released) return;
			released = true;
			current.users--;
			this.#evict();
		};
		try {
			return { index: await current.index, release };
		} catch (error) {
			release();
			throw error;
		}
	}

	#evict(): void {
		const idle = [...this.#entries.entries()]
			.filter(([, e]) => e.users === 0)
			.sort(([, a], [, b]) => a.lastUsed - b.lastUsed);
		let excess = this.#entries.size - this.#capacity;
		for (const [path] of idle) {
			if (excess <= 0) break;
			this.#entries.delete(path);
			excess--;
		}
	}

	clear(): void {
		this.#entries.clear();
	}
}
