/**
 * The feature index cache: one load per file shared by its jobs, each index on a thread that closes when the
 * index is dropped (which is what frees a dropped index's memory), room made before a new index is read, and
 * failed loads not kept.
 */
import { copyFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { IndexCache } from "../../src/engines/rvc/index-cache.ts";
import { scratchDir } from "../helpers/scratch.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "index");
const IVF = join(FIXTURES, "added_IVF20_Flat_nprobe_1_tiny_v2.index");
const FLAT = join(FIXTURES, "flat-l2.index");
const features = Float32Array.from({ length: 32 }, (_, i) => Math.sin(i));

describe("IndexCache", () => {
	it("reads a file once for the jobs that share it, on one thread", async () => {
		const cache = new IndexCache(2, { intraOpNumThreads: 1 });
		const [a, b] = await Promise.all([cache.acquire(IVF), cache.acquire(IVF)]);
		expect(a.index).toBe(b.index);
		expect(cache.size).toBe(1);
		expect((await a.index.retrieve(features, 2, 0.5)).length).toBe(32);
		a.release();
		b.release();
		await cache.clear();
	});

	it("closes the thread of an index it drops, and only once no job holds it", async () => {
		const cache = new IndexCache(1, { intraOpNumThreads: 1 });
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
		const cache = new IndexCache(1, { intraOpNumThreads: 1 });
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
		const cache = new IndexCache(2);
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
});
