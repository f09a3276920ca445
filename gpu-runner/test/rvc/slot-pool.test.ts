/** The pool that lends the rvc engine's model caches (each on its own thread) to jobs. */
import { describe, expect, it } from "vitest";
import { SlotPool } from "../../src/engines/rvc/slot-pool.ts";

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 2));

describe("slot pool", () => {
	for (const size of [1, 2]) {
		it(`lends each of ${size} item(s) to one job at a time, in arrival order, through failures`, async () => {
			const items = Array.from({ length: size }, (_, i) => ({ slot: i }));
			const pool = new SlotPool(items);
			const holders = new Map<object, number>();
			let most = 0;
			const started: number[] = [];
			const results = await Promise.allSettled(
				Array.from({ length: 7 }, async (_, i) => {
					const { item, release } = await pool.acquire();
					try {
						started.push(i);
						expect(holders.has(item)).toBe(false);
						holders.set(item, i);
						most = Math.max(most, holders.size);
						await tick();
						if (i === 3) throw new Error("job 3 failed");
						return i;
					} finally {
						holders.delete(item);
						release();
						release(); // a second release must not free the slot twice
					}
				}),
			);
			expect(most).toBe(size);
			expect(started).toEqual([0, 1, 2, 3, 4, 5, 6]);
			expect(results.map((r) => r.status)).toEqual([
				...Array(3).fill("fulfilled"),
				"rejected",
				...Array(3).fill("fulfilled"),
			]);
			// Every item is free again, and only once each.
			const again = await Promise.all(items.map(() => pool.acquire()));
			expect(new Set(again.map((a) => a.item)).size).toBe(size);
		});
	}

	it("shares an item among up to holdersPerItem jobs, spreading them over the items first", async () => {
		const pool = new SlotPool(["a", "b"], 2);
		const lent = await Promise.all([pool.acquire(), pool.acquire(), pool.acquire(), pool.acquire()]);
		expect(lent.map((l) => l.item)).toEqual(["a", "b", "a", "b"]);
		let fifth: string | undefined;
		const waiting = pool.acquire().then((l) => {
			fifth = l.item;
			return l;
		});
		await tick();
		expect(fifth).toBeUndefined();
		lent[1]?.release();
		expect((await waiting).item).toBe("b");
	});

	it("lends a free item that fits at once, or none, and never one a waiting job is owed", async () => {
		const pool = new SlotPool(["a", "b", "c"]);
		const first = await pool.acquire();
		expect(first.item).toBe("a");
		// Only what `accept` takes, and only what is free.
		expect(pool.tryAcquire((item) => item === "a")).toBeUndefined();
		const c = pool.tryAcquire((item) => item === "c");
		expect(c?.item).toBe("c");
		const b = pool.tryAcquire();
		expect(b?.item).toBe("b");
		expect(pool.tryAcquire()).toBeUndefined();
		// A job waits; what is released goes to it, not to a later tryAcquire.
		let waited: string | undefined;
		const waiting = pool.acquire().then((l) => {
			waited = l.item;
			return l;
		});
		c?.release();
		c?.release();
		expect(pool.tryAcquire()).toBeUndefined();
		expect((await waiting).item).toBe("c");
		expect(waited).toBe("c");
		// Once nobody waits, a released item is free again, once.
		b?.release();
		expect(pool.tryAcquire()?.item).toBe("b");
		expect(pool.tryAcquire()).toBeUndefined();
	});

	it("lets a job whose abort comes while it waits leave the line at once: what is released goes to the next", async () => {
		const pool = new SlotPool(["a"]);
		const held = await pool.acquire();
		const [leaving, staying] = [new AbortController(), new AbortController()];
		const gone = pool.acquire(leaving.signal).then(
			(l) => l.item,
			(error: unknown) => error,
		);
		const next = pool.acquire(staying.signal);
		const reason = new Error("lease lost");
		leaving.abort(reason);
		// Its job ended (a lost lease, the runner's shutdown): it stops waiting, without the item ever being freed.
		expect(await gone).toBe(reason);
		expect(pool.tryAcquire()).toBeUndefined();
		held.release();
		expect((await next).item).toBe("a");
		// A job already aborted does not wait at all, nor take a free item.
		(await next).release();
		await expect(pool.acquire(AbortSignal.abort(reason))).rejects.toBe(reason);
		expect(pool.tryAcquire()?.item).toBe("a");
	});

	it("refuses a pool without items or holders", () => {
		expect(() => new SlotPool([])).toThrow(/at least one item/);
		expect(() => new SlotPool(["a"], 0)).toThrow(/at least one holder/);
	});
});
