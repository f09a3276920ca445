/**
 * A feature index on its own thread: the same blended features as retrieval on this thread, the main thread
 * free while a large index is searched, and a bad file failing with the engine's own error.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeFaissIndexFile, readFaissIndex } from "../../src/engines/rvc/faiss-index.ts";
import { retrieveFeatures } from "../../src/engines/rvc/feature-retrieval.ts";
import { IndexSearcher } from "../../src/engines/rvc/index-search.ts";
import { IndexThread } from "../../src/engines/rvc/index-thread.ts";
import { NormalNoise } from "../../src/engines/rvc/random.ts";
import { scratchDir } from "../helpers/scratch.ts";
import { timerGapsDuring } from "../helpers/timer-gaps.ts";
import { writeFlatIndex } from "./support/flat-index.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "index");
const scratch = scratchDir("index-thread-test");

let searcher: IndexSearcher;
beforeAll(async () => {
	searcher = await IndexSearcher.create({ intraOpNumThreads: 1 });
});
afterAll(async () => {
	await searcher.release();
});

describe("IndexThread", () => {
	it.each(["added_IVF20_Flat_nprobe_1_tiny_v2.index", "flat-l2.index", "ivf-ip-directmap.index"])(
		"%s: the same blended features as retrieval on this thread, and the same facts as the reader",
		async (name) => {
			const path = join(FIXTURES, name);
			const thread = await IndexThread.open(path, { intraOpNumThreads: 1 });
			const { heldBytes, ...facts } = thread.facts;
			expect(facts).toEqual(await describeFaissIndexFile(path));
			const index = await readFaissIndex(path);
			// Every array the index keeps, and the squared norms its search adds (of flat L2 vectors; of IVF vectors,
			// whose lists may be scanned by matrix product, and L2 centroids).
			const normed =
				name === "flat-l2.index"
					? index.ntotal
					: name.startsWith("added_IVF")
						? index.ntotal + index.nlist
						: index.ntotal;
			expect(heldBytes).toBe(
				index.vectors.buffer.byteLength +
					(index.ids?.byteLength ?? 0) +
					(index.centroids?.byteLength ?? 0) +
					(index.listStarts?.byteLength ?? 0) +
					4 * normed,
			);
			const frames = 40;
			const features = new NormalNoise(3).fill(frames * 16, 0.5);
			// A view into a larger array, as the engine's windows are: only its own part crosses.
			const inLarger = new Float32Array(features.length + 32);
			inLarger.set(features, 16);
			const view = inLarger.subarray(16, 16 + features.length);
			const there = await thread.retrieve(view, frames, 0.75);
			const here = await retrieveFeatures(features, frames, index, searcher, 0.75);
			expect(there).toEqual(here);
			expect(view).toEqual(features);
			await thread.close();
		},
	);

	it("leaves the main thread free while a large flat index is searched", async () => {
		// 65536 vectors of 256 (64 MiB) against 1024 frames: 2 x 17 GFLOP of matrix products on one core, long enough
		// to see on a fast one (0.2 s with AVX-512).
		const dim = 256;
		const vectors = new NormalNoise(11).fill(65_536 * dim, 0.5);
		const path = join(scratch, "large-flat.index");
		writeFlatIndex(path, vectors, dim);
		const thread = await IndexThread.open(path, { intraOpNumThreads: 1 });
		const frames = 1024;
		// Stored rows 0..1023 as the features, at index_rate 1: each frame retrieves itself.
		const features = vectors.slice(0, frames * dim);
		await thread.retrieve(features.slice(0, dim), 1, 1); // the norms, computed once, are not timed
		const { result, took, ticks, longestGap } = await timerGapsDuring(() => thread.retrieve(features, frames, 1));
		expect(result).toEqual(features);
		expect(took).toBeGreaterThan(50);
		expect(ticks).toBeGreaterThan(5);
		// On this thread, each block's product would be one gap as long as itself (about half the search).
		expect(longestGap).toBeLessThan(took / 4);
		await thread.close();
	});

	it("fails a bad or missing file as invalid_index, for good, and ends its thread", async () => {
		const bad = join(scratch, "bad.index");
		writeFileSync(bad, "IxF2 but nothing after");
		await expect(IndexThread.open(bad)).rejects.toMatchObject({
			name: "RvcEngineError",
			code: "invalid_index",
			permanent: true,
			message: expect.stringContaining(bad),
		});
		await expect(IndexThread.open(join(scratch, "missing.index"))).rejects.toMatchObject({
			code: "invalid_index",
			message: expect.stringContaining("cannot be opened"),
		});
	});

	it("refuses retrievals once closed, as a stopped thread the job can retry", async () => {
		const thread = await IndexThread.open(join(FIXTURES, "flat-l2.index"));
		await thread.close();
		await expect(thread.retrieve(new NormalNoise(1).fill(16, 0.5), 1, 0.5)).rejects.toMatchObject({
			name: "RvcEngineError",
			code: "model_thread_stopped",
			permanent: false,
			message: expect.stringMatching(/searching feature index .*: the feature index thread was closed/),
		});
	});
});
