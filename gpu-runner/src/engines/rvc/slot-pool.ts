import { once } from "./once.ts";

/**
 * A fixed set of items, each lent to at most `holdersPerItem` jobs at a time, the jobs beyond waiting in arrival
 * order. The rvc engine lends its model caches this way: each has its own thread (`SessionHost`), so on the CPU
 * (one holder per cache) jobs holding different caches run their models at the same time and never take turns
 * on one thread; on a GPU the jobs share one cache.
 */
export class SlotPool<T> {
	readonly #free: T[] = [];
	readonly #waiting: ((item: T) => void)[] = [];
	readonly items: readonly T[];

	constructor(items: readonly T[], holdersPerItem = 1) {
		if (items.length === 0) throw new RangeError("a slot pool needs at least one item");
		if (!(Number.isInteger(holdersPerItem) && holdersPerItem >= 1))
			throw new RangeError(`each item needs at least one holder, got ${holdersPerItem}`);
		this.items = items;
		// Round-robin, so holders spread over the items before any item takes a second one.
		for (let round = 0; round < holdersPerItem; round++) this.#free.push(...items);
	}

	/**
	 * An item, as soon as one is free; `release` gives it back (once; later calls do nothing). `signal`, the job's
	 * abort: a job still waiting leaves the line at once, failing with the abort's reason (an item freed later goes to
	 * the next in line), rather than waiting for an item it no longer wants.
	 */
	async acquire(signal?: AbortSignal): Promise<{ item: T; release: () => void }> {
		signal?.throwIfAborted();
		const item =
			this.#free.shift() ??
			(await new Promise<T>((resolve, reject) => {
				const aborted = () => {
					const at = this.#waiting.indexOf(lent);
					if (at >= 0) this.#waiting.splice(at, 1);
					reject(signal?.reason);
				};
				const lent = (item: T) => {
					signal?.removeEventListener("abort", aborted);
					resolve(item);
				};
				signal?.addEventListener("abort", aborted, { once: true });
				this.#waiting.push(lent);
			}));
		return this.#lend(item);
	}

	/**
	 * A free item that `accept` takes, at once, or none: never waits, and never takes an item a waiting job could
	 * have (a released item goes to the first in line before it is free). For work that can go without it.
	 */
	tryAcquire(accept: (item: T) => boolean = () => true): { item: T; release: () => void } | undefined {
		const at = this.#free.findIndex(accept);
		if (at < 0) return undefined;
		const [item] = this.#free.splice(at, 1) as [T];
		return this.#lend(item);
	}

	#lend(item: T): { item: T; release: () => void } {
		return {
			item,
			release: once(() => {
				// Hand it straight to the next in line, or put it back.
				const next = this.#waiting.shift();
				if (next !== undefined) next(item);
				else this.#free.push(item);
			}),
		};
	}
}
