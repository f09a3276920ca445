/**
 * The feature index cache: one load per file shared by its jobs, each index on a thread that closes when the
 * index is dropped (which is what frees a dropped index's memory), room made before a new index is read, and
 * failed loads not kept.
 */
import { copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { INDEX_THREAD_BYTES, IndexCache } from "../../src/engines/rvc/index-cache.ts";
import type { IndexThread } from "../../src/engines/rvc/index-thread.ts";
import { NormalNoise } from "../../src/engines/rvc/random.ts";
import { scratchDir } from "../helpers/scratch.ts";
import { writeFlatIndex } from "./support/flat-index.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "index");
const IVF = join(FIXTURES, "added_IVF20_Flat_nprobe_1_tiny_v2.index");
const FLAT = join(FIXTURES, "flat-l2.index");
const FLAT_IP = join(FIXTURES, "flat-ip.index");
const features = Float32Array.from({ length: 32 }, (_, i) => Math.sin(i));

/** What the cache counts for a loaded index: what it holds, and its thread. */
const counted = (index: IndexThread) => index.facts.heldBytes + INDEX_THREAD_BYTES;

/** Whether the index's thread was closed (the next turn after it was dropped). */
async function closed(index: IndexThread): Promise<boolean> {
	await new Promise(setImmediate);
	return index.retrieve(features, 2, 0.5).then(
		() => false,
		(error: { code?: string }) => error.code === "model_thread_stopped",
	);
}

describe("IndexCache", () => {
	it("reads a file once for the jobs that share it, on one thread", async () => {
		const cache = new IndexCache({ count: 2 }, { intraOpNumThreads: 1 });
		const [a, b] = await Promise.all([cache.acquire(IVF), cache.acquire(IVF)]);
		expect(a.index).toBe(b.index);
		expect(cache.size).toBe(1);
		expect((await a.index.retrieve(features, 2, 0.5)).length).toBe(32);
		a.release();
		b.release();
		await cache.clear();
	});

	it("closes the thread of an index it drops, and only once no job holds it", async () => {
		const cache = new IndexCache({ count: 1 }, { intraOpNumThreads: 1 });
		const first = await cache.acquire(IVF);
		const second = await cache.acquire(FLAT);
		// Over capacity, but both are in use: nothing is dropped.
		expect(cache.size).toBe(2);
		expect((await first.index.retrieve(features, 2, 0.5)).length).toBe(32);
		first.release();
		expect(cache.size).toBe(1);
		await new Promise(setImmediate); // the dropped index's thread is closed on the next turn
		await expect(first.index.retrieve(features, 2, 0.5)).rejects.toMatchObject({
			name: "RvcEngineError",
			code: "model_thread_stopped",
		});
		expect((await second.index.retrieve(features, 2, 0.5)).length).toBe(32);
		second.release();
		// The first file is read again, on a new thread, after the idle second is dropped to make room.
		const again = await cache.acquire(IVF);
		expect(again.index).not.toBe(first.index);
		expect(cache.size).toBe(1);
		await expect(second.index.retrieve(features, 2, 0.5)).rejects.toMatchObject({ code: "model_thread_stopped" });
		expect((await again.index.retrieve(features, 2, 0.5)).length).toBe(32);
		again.release();
		await cache.clear();
		expect(cache.size).toBe(0);
		await expect(again.index.retrieve(features, 2, 0.5)).rejects.toMatchObject({ code: "model_thread_stopped" });
	});

	it("reads a transient use's index without dropping the kept one, and drops it after, unless a job took it", async () => {
		const cache = new IndexCache({ count: 1 }, { intraOpNumThreads: 1 });
		const kept = await cache.acquire(IVF);
		kept.release();
		// A validation's index: the idle kept one stays beside it, and it goes once the validation is done.
		const validation = await cache.acquire(FLAT, { transient: true });
		expect(cache.size).toBe(2);
		validation.release();
		expect(cache.size).toBe(1);
		await new Promise(setImmediate);
		await expect(validation.index.retrieve(features, 2, 0.5)).rejects.toMatchObject({ code: "model_thread_stopped" });
		const again = await cache.acquire(IVF);
		expect(again.index).toBe(kept.index);
		again.release();
		// A job that takes the transient index meanwhile makes it a kept one (and the idle IVF goes, past capacity).
		const second = await cache.acquire(FLAT, { transient: true });
		const job = await cache.acquire(FLAT);
		second.release();
		expect(cache.size).toBe(1);
		job.release();
		const later = await cache.acquire(FLAT);
		expect(later.index).toBe(job.index);
		later.release();
		await cache.clear();
	});

	it("does not keep a file that fails to load, so a fixed one is read next time", async () => {
		const dir = scratchDir("index-cache-test");
		const path = join(dir, "voice.index");
		writeFileSync(path, "not a faiss index");
		const cache = new IndexCache({ count: 2 });
		await expect(cache.acquire(path)).rejects.toMatchObject({
			name: "RvcEngineError",
			code: "invalid_index",
			permanent: true,
		});
		expect(cache.size).toBe(0);
		copyFileSync(FLAT, path);
		const fixed = await cache.acquire(path);
		expect(fixed.index.facts.ntotal).toBe(300);
		fixed.release();
		await cache.clear();
	});

	it("keeps many small indexes within its bytes, dropping the least recently used idle ones past them", async () => {
		const probe = new IndexCache({ count: 3 }, { intraOpNumThreads: 1 });
		const sizes = await Promise.all(
			[IVF, FLAT, FLAT_IP].map(async (path) => {
				const { index, release } = await probe.acquire(path);
				release();
				return counted(index);
			}),
		);
		expect(probe.bytes).toBe(sizes.reduce((a, b) => a + b, 0));
		await probe.clear();
		const [ivfBytes = 0, flatBytes = 0] = sizes;
		// Room for the IVF and one flat index; the count would allow all three.
		const cache = new IndexCache({ count: 16, bytes: ivfBytes + flatBytes }, { intraOpNumThreads: 1 });
		const ivf = await cache.acquire(IVF);
		ivf.release();
		const flat = await cache.acquire(FLAT);
		flat.release();
		expect([cache.size, cache.bytes]).toEqual([2, ivfBytes + flatBytes]);
		// A third, idle ones past the bytes: the least recently used (the IVF) goes before it is read.
		const ip = await cache.acquire(FLAT_IP);
		expect(cache.size).toBe(2);
		expect(await closed(ivf.index)).toBe(true);
		expect((await flat.index.retrieve(features, 2, 0.5)).length).toBe(32);
		// Only idle ones go: with both in use, the IVF is read beside them, over the bytes, until a job is done.
		const flatAgain = await cache.acquire(FLAT);
		expect(flatAgain.index).toBe(flat.index);
		const ivfAgain = await cache.acquire(IVF);
		expect(cache.size).toBe(3);
		expect((await ip.index.retrieve(features, 2, 0.5)).length).toBe(32);
		ip.release();
		expect(cache.size).toBe(2);
		expect(cache.bytes).toBeLessThanOrEqual(ivfBytes + flatBytes);
		expect(await closed(ip.index)).toBe(true);
		flatAgain.release();
		ivfAgain.release();
		expect(cache.size).toBe(2);
		await cache.clear();
	});

	it("counts what a large index holds, and holds no more than its bytes however many come", async () => {
		const dir = scratchDir("index-cache-bytes");
		// Three 30 MB flat indexes of 768-wide vectors, as a customer's voices bring (the upload limit is 1000 MB).
		const dim = 768;
		const paths = [1, 2, 3].map((seed) => {
			const path = join(dir, `voice-${seed}.index`);
			writeFlatIndex(path, new NormalNoise(seed).fill(10_000 * dim, 1), dim);
			return path;
		});
		// Each holds its vectors and their norms: 30.76 MB, plus its thread.
		const each = 10_000 * dim * 4 + 10_000 * 4 + INDEX_THREAD_BYTES;
		const cache = new IndexCache({ count: 16, bytes: 2.5 * each }, { intraOpNumThreads: 1 });
		const loaded: IndexThread[] = [];
		const query = new NormalNoise(9).fill(4 * dim, 1);
		for (const path of paths) {
			const { index, release } = await cache.acquire(path);
			expect(counted(index)).toBe(each);
			expect((await index.retrieve(query, 4, 0.5)).length).toBe(4 * dim);
			release();
			loaded.push(index);
			expect(cache.bytes).toBeLessThanOrEqual(2.5 * each);
		}
		expect([cache.size, cache.bytes]).toEqual([2, 2 * each]);
		expect(await closed(loaded[0] as IndexThread)).toBe(true);
		await cache.clear();
	});

	it("serves an index larger than all its bytes, after dropping every idle one, and does not keep it", async () => {
		const cache = new IndexCache({ count: 16, bytes: INDEX_THREAD_BYTES + 25_000 }, { intraOpNumThreads: 1 });
		const flat = await cache.acquire(FLAT);
		flat.release();
		expect(cache.size).toBe(1);
		const [big, sharing] = await Promise.all([cache.acquire(IVF), cache.acquire(IVF)]);
		expect(sharing.index).toBe(big.index);
		expect(counted(big.index)).toBeGreaterThan(INDEX_THREAD_BYTES + 25_000);
		expect(await closed(flat.index)).toBe(true);
		big.release();
		// Its other job still retrieves from it.
		expect((await sharing.index.retrieve(features, 2, 0.5)).length).toBe(32);
		sharing.release();
		expect(cache.size).toBe(0);
		expect(await closed(big.index)).toBe(true);
		// The small one is kept again.
		const again = await cache.acquire(FLAT);
		again.release();
		expect(cache.size).toBe(1);
		await cache.clear();
	});

	it("reads a transient use's index past its bytes without dropping the kept one", async () => {
		const cache = new IndexCache({ count: 16, bytes: INDEX_THREAD_BYTES + 25_000 }, { intraOpNumThreads: 1 });
		const kept = await cache.acquire(FLAT);
		kept.release();
		const validation = await cache.acquire(FLAT_IP, { transient: true });
		expect(cache.size).toBe(2);
		expect(cache.bytes).toBe(counted(kept.index));
		validation.release();
		expect(cache.size).toBe(1);
		const again = await cache.acquire(FLAT);
		expect(again.index).toBe(kept.index);
		again.release();
		await cache.clear();
	});

	it("stops waiting for a load at its job's abort, the load going on for the voice's other job and kept", async () => {
		const dir = scratchDir("index-cache-abort");
		// A 61 MB flat index of 768-wide vectors: read and normed on its thread, which takes a while to start too.
		const dim = 768;
		const path = join(dir, "voice.index");
		writeFlatIndex(path, new NormalNoise(4).fill(20_000 * dim, 1), dim);
		const cache = new IndexCache({ count: 1 }, { intraOpNumThreads: 1 });
		const first = new AbortController();
		const aborted = cache.acquire(path, { signal: first.signal }).then(
			(loaded) => loaded,
			(error: unknown) => error,
		);
		// Another job of the same voice waits for the same load.
		const other = cache.acquire(path);
		const reason = new Error("lease lost");
		first.abort(reason);
		// The aborted job stops waiting at once, with its abort's reason, not with the index once it is read.
		expect(await aborted).toBe(reason);
		const { index, release } = await other;
		expect(cache.size).toBe(1);
		const query = new NormalNoise(9).fill(4 * dim, 1);
		expect((await index.retrieve(query, 4, 0.5)).length).toBe(4 * dim);
		release();
		// The aborted job's use was given back: once the other's is too, the index is idle and goes for the next one.
		const next = await cache.acquire(FLAT);
		expect(cache.size).toBe(1);
		expect(await closed(index)).toBe(true);
		next.release();
		// A job already ended reads nothing.
		await expect(cache.acquire(IVF, { signal: first.signal })).rejects.toBe(reason);
		expect(cache.size).toBe(1);
		await cache.clear();
	});

	it("forgets a deleted voice's index at once when idle, else once its last job is done", async () => {
		const cache = new IndexCache({ count: 16 }, { intraOpNumThreads: 1 });
		const idle = await cache.acquire(FLAT);
		idle.release();
		const busy = await cache.acquire(IVF);
		await cache.forget(FLAT);
		expect(cache.size).toBe(1);
		expect(await closed(idle.index)).toBe(true);
		await cache.forget(IVF);
		// The job in flight keeps retrieving from it; it goes when the job is done.
		expect((await busy.index.retrieve(features, 2, 0.5)).length).toBe(32);
		expect(cache.size).toBe(1);
		busy.release();
		expect(cache.size).toBe(0);
		expect(await closed(busy.index)).toBe(true);
		await cache.clear();
	});
});
