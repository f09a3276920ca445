/**
 * The faiss index reader and search against files and search results written by faiss itself
 * (fixtures/make-index-fixtures.py, Debian's faiss 1.7.3): every supported kind parses, search returns faiss's
 * ids and distances for the same queries, and every refusal names its reason.
 */
import { readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
	describeFaissIndexFile,
	describeFeatureIndex,
	readFaissIndex,
	readFaissIndexWidth,
} from "../../src/engines/rvc/faiss-index.ts";
import { IndexSearcher, type IvfScan, MISSING_SCORE } from "../../src/engines/rvc/index-search.ts";
import { scratchDir } from "../helpers/scratch.ts";
import { writeSparseIvfFlat } from "./support/wide-ivf.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "index");
const RVC_INDEX = "added_IVF20_Flat_nprobe_1_tiny_v2.index";

interface Reference {
	dim: number;
	k: number;
	queries: number[][];
	/** `queries`: the index's own queries, where it has them (else the shared ones). */
	indexes: Record<string, { ntotal: number; distances: number[][]; ids: number[][]; queries?: number[][] }>;
}
const reference = JSON.parse(readFileSync(join(FIXTURES, "reference.json"), "utf8")) as Reference;
const queries = Float32Array.from(reference.queries.flat());
const scratch = scratchDir("faiss-index-test");

/** Writes `bytes` to a scratch file and returns its path. */
function scratchFile(name: string, bytes: Uint8Array): string {
	const path = join(scratch, name);
	writeFileSync(path, bytes);
	return path;
}

let searcher: IndexSearcher;
beforeAll(async () => {
	searcher = await IndexSearcher.create({ intraOpNumThreads: 1 });
});
afterAll(async () => {
	await searcher.release();
});

describe("reading faiss indexes", () => {
	it.each([
		[RVC_INDEX, { kind: "ivf_flat", fourcc: "IwFl", metric: "l2", dim: 16, ntotal: 780, nlist: 20, nprobe: 1 }],
		[
			"ivf-sparse-hashtable-nprobe3.index",
			{ kind: "ivf_flat", fourcc: "IwFl", metric: "l2", dim: 16, ntotal: 300, nlist: 32, nprobe: 3 },
		],
		[
			"ivf-ip-directmap.index",
			{ kind: "ivf_flat", fourcc: "IwFl", metric: "inner_product", dim: 16, ntotal: 400, nlist: 8, nprobe: 2 },
		],
		["flat-l2.index", { kind: "flat", fourcc: "IxF2", metric: "l2", dim: 16, ntotal: 300, nlist: 0, nprobe: 0 }],
		[
			"flat-ip.index",
			{ kind: "flat", fourcc: "IxFI", metric: "inner_product", dim: 16, ntotal: 300, nlist: 0, nprobe: 0 },
		],
	])("describes %s, as reading it does", async (name, expected) => {
		expect(await describeFaissIndexFile(join(FIXTURES, name))).toEqual(expected);
		expect(describeFeatureIndex(await readFaissIndex(join(FIXTURES, name)))).toEqual(expected);
	});

	it("describes a 3 GB index without reading its vectors", async () => {
		// A flat L2 header for 1 000 000 vectors of 768, then a sparse file of the right length: the vectors' bytes
		// are never written, so only a reader that steps over them answers at once and without 3 GB of memory.
		const [count, dim] = [1_000_000, 768];
		const header = new Uint8Array(45);
		const view = new DataView(header.buffer);
		header.set(Buffer.from("IxF2"), 0);
		view.setInt32(4, dim, true);
		view.setBigInt64(8, BigInt(count), true);
		view.setUint8(32, 1); // is_trained
		view.setInt32(33, 1, true); // L2
		view.setBigInt64(37, BigInt(count * dim), true);
		const path = scratchFile("large-flat.index", header);
		truncateSync(path, header.length + count * dim * 4);

		const rssBefore = process.memoryUsage.rss();
		const description = await describeFaissIndexFile(path);
		expect(description).toEqual({
			kind: "flat",
			fourcc: "IxF2",
			metric: "l2",
			dim,
			ntotal: count,
			nlist: 0,
			nprobe: 0,
		});
		expect(process.memoryUsage.rss() - rssBefore).toBeLessThan(64 * 2 ** 20);
		truncateSync(path, header.length + count * dim * 4 - 1);
		await expect(describeFaissIndexFile(path)).rejects.toThrow(/truncated: IxF2 holds 1000000 vectors of 768/);
	});

	it("checks 20 million IVF list sizes, read a buffer at a time", async () => {
		// 240 MB of IVF index of width 1 with 20 million lists, as faiss lays one out (a sparse file). Read with one wait
		// per list size, its check took 4-7 s; the rvc README has the figure since.
		const path = join(scratchDir("wide-ivf"), "wide.index");
		await writeSparseIvfFlat(path, 1, 20_000_000);
		expect(await describeFaissIndexFile(path)).toEqual({
			kind: "ivf_flat",
			fourcc: "IwFl",
			metric: "l2",
			dim: 1,
			ntotal: 1,
			nlist: 20_000_000,
			nprobe: 1,
		});
	});

	it("states an index's width from its header alone, whatever follows", async () => {
		for (const [name, dim] of [
			[RVC_INDEX, 16],
			["flat-l2.index", 16],
			["flat-ip.index", 16],
			["voice-v2-768.index", 768],
		] as const) {
			expect(await readFaissIndexWidth(join(FIXTURES, name)), name).toBe(dim);
		}
		// The header alone: the same file cut after its width still states it.
		const path = join(scratchDir("wide-ivf"), "wide.index");
		await writeSparseIvfFlat(path, 1, 20_000_000);
		expect(await readFaissIndexWidth(path)).toBe(1);
		truncateSync(path, 8);
		expect(await readFaissIndexWidth(path)).toBe(1);
		// Types the reader refuses, and what is not an index, state none: the reader names what they are.
		for (const name of ["hnsw.index", "ivf-pq.index"]) {
			expect(await readFaissIndexWidth(join(FIXTURES, name)), name).toBe(undefined);
		}
		expect(await readFaissIndexWidth(scratchFile("short.index", Buffer.from("IwFl")))).toBe(undefined);
		expect(await readFaissIndexWidth(join(FIXTURES, "missing.index"))).toBe(undefined);
	});

	it("keeps every IVF vector once, grouped by list, with its id", async () => {
		const index = await readFaissIndex(join(FIXTURES, "ivf-sparse-hashtable-nprobe3.index"));
		const starts = index.listStarts as Uint32Array;
		expect(starts.length).toBe(33);
		expect(starts[32]).toBe(300);
		// faiss wrote "sprs" lists: most lists are empty.
		const empty = Array.from({ length: 32 }, (_, l) => (starts[l + 1] as number) - (starts[l] as number)).filter(
			(n) => n === 0,
		).length;
		expect(empty).toBeGreaterThan(16);
		// add_with_ids gave ids 1000, 1003, ...: each appears exactly once.
		const ids = [...(index.ids as Float64Array)].sort((a, b) => a - b);
		expect(ids).toEqual(Array.from({ length: 300 }, (_, i) => 1000 + 3 * i));
		expect(index.vectors.length).toBe(300 * 16);
	});

	it("accepts a flat index whose data size is a byte count", async () => {
		const bytes = new Uint8Array(readFileSync(join(FIXTURES, "flat-l2.index")));
		const view = new DataView(bytes.buffer);
		// fourcc 4 + d 4 + ntotal 8 + dummies 16 + is_trained 1 + metric 4 = the size prefix at 37.
		expect(view.getBigInt64(37, true)).toBe(300n * 16n);
		view.setBigInt64(37, 300n * 16n * 4n, true);
		const index = await readFaissIndex(scratchFile("flat-bytes.index", bytes));
		const original = await readFaissIndex(join(FIXTURES, "flat-l2.index"));
		expect(index.vectors).toEqual(original.vectors);
	});
});

/** The queries faiss's results in reference.json answer for index `name`. */
function queriesOf(name: string): { queries: Float32Array; count: number } {
	const own = (reference.indexes[name] as Reference["indexes"][string]).queries;
	return own === undefined
		? { queries, count: reference.queries.length }
		: { queries: Float32Array.from(own.flat()), count: own.length };
}

/**
 * IVF index `name` and its queries with every value moved by 100 000: distances stay small while |q| |x| grows, so
 * a float32 product's rounding is larger than the gaps between neighbours.
 */
async function movedFarFromOrigin(name: string) {
	const index = await readFaissIndex(join(FIXTURES, name));
	const shift = (values: Float32Array) => values.map((v) => v + 100_000);
	const moved = { ...index, vectors: shift(index.vectors), centroids: shift(index.centroids as Float32Array) };
	const { queries, count } = queriesOf(name);
	return { moved, movedQueries: shift(queries), count };
}

// "auto" is the searcher above (lists by the cost model: the unbalanced and nprobe = nlist fixtures go by matrix
// product even at width 16); the others force every IVF list through one way of scanning.
const scanning: Record<IvfScan, () => IndexSearcher> = {
	auto: () => searcher,
	exact: () => exactSearcher,
	matrix: () => matrixSearcher,
};
let exactSearcher: IndexSearcher;
let matrixSearcher: IndexSearcher;
beforeAll(async () => {
	exactSearcher = await IndexSearcher.create({ intraOpNumThreads: 1, ivfScan: "exact" });
	matrixSearcher = await IndexSearcher.create({ intraOpNumThreads: 1, ivfScan: "matrix" });
});
afterAll(async () => {
	await exactSearcher.release();
	await matrixSearcher.release();
});

describe.each(["auto", "exact", "matrix"] as const)("search matches faiss (IVF lists scanned: %s)", (scan) => {
	it.each(Object.keys(reference.indexes))("%s: same neighbours and distances for k = 8", async (name) => {
		const expected = reference.indexes[name] as Reference["indexes"][string];
		const index = await readFaissIndex(join(FIXTURES, name));
		const { queries, count } = queriesOf(name);
		const found = await scanning[scan]().search(index, queries, count, reference.k);
		for (let q = 0; q < count; q++) {
			const ids = [...found.ids.subarray(q * 8, q * 8 + 8)];
			const scores = [...found.scores.subarray(q * 8, q * 8 + 8)];
			const want = expected.distances[q] as number[];
			for (let j = 0; j < 8; j++) {
				const tolerance = 1e-4 * Math.max(1, Math.abs(want[j] as number));
				expect(Math.abs((scores[j] as number) - (want[j] as number)), `query ${q} rank ${j}`).toBeLessThan(tolerance);
			}
			// Same ids, in faiss's order except among equal distances.
			if (new Set(want).size === want.length) expect(ids, `query ${q}`).toEqual(expected.ids[q]);
			else expect([...ids].sort(), `query ${q}`).toEqual([...(expected.ids[q] as number[])].sort());
		}
	});
});

describe("search cost", () => {
	it.each(["ivf-unbalanced-silence.index", "ivf-nprobe-equals-nlist.index"])(
		"%s: the lists' vectors are scored by matrix product, only a few candidates a query one by one",
		async (name) => {
			const index = await readFaissIndex(join(FIXTURES, name));
			const { queries, count } = queriesOf(name);
			// The exact scan scores every (query, vector) pair the probes ask for one by one.
			const before = exactSearcher.stats.exactScores;
			await exactSearcher.search(index, queries, count, 8);
			const asked = exactSearcher.stats.exactScores - before;
			expect(asked).toBeGreaterThan(count * 300);
			const auto = { ...searcher.stats };
			await searcher.search(index, queries, count, 8);
			expect(searcher.stats.matrixScores - auto.matrixScores).toBeGreaterThan(asked / 2);
			expect(searcher.stats.fallbacks).toBe(auto.fallbacks);
			expect(searcher.stats.exactScores - auto.exactScores).toBeLessThan(asked / 4);
		},
	);
	it("runs of lists far from the origin: unclear queries are taken again relative to the run's mean, not scored one by one", async () => {
		const { moved, movedQueries, count } = await movedFarFromOrigin("ivf-nprobe-equals-nlist.index");
		const want = await exactSearcher.search(moved, movedQueries, count, 8);
		const before = { ...searcher.stats };
		const found = await searcher.search(moved, movedQueries, count, 8);
		expect(found).toEqual(want);
		// The exact scan scores all 500 vectors for each query.
		expect(searcher.stats.fallbacks - before.fallbacks).toBeGreaterThan(0);
		expect(searcher.stats.copiedRows - before.copiedRows).toBeGreaterThan(0);
		expect(searcher.stats.exactScores - before.exactScores).toBeLessThan((count * 500) / 4);
	});
	it("a large list is copied, shifted by its mean, once a search however many blocks of queries probe it", async () => {
		const name = "ivf-unbalanced-silence.index";
		const index = await readFaissIndex(join(FIXTURES, name));
		const { queries, count } = queriesOf(name);
		// 20 copies of the queries: 480, two blocks of 256.
		const many = new Float32Array(queries.length * 20);
		for (let i = 0; i < 20; i++) many.set(queries, i * queries.length);
		const starts = index.listStarts as Uint32Array;
		let largest = 0;
		for (let l = 0; l < index.nlist; l++)
			largest = Math.max(largest, (starts[l + 1] as number) - (starts[l] as number));
		const before = searcher.stats.copiedRows;
		const found = await searcher.search(index, many, count * 20, 8);
		expect(searcher.stats.copiedRows - before).toBeGreaterThanOrEqual(largest);
		expect(searcher.stats.copiedRows - before).toBeLessThan(2 * largest);
		const once = await exactSearcher.search(index, queries, count, 8);
		for (let i = 0; i < 20; i++) {
			expect(found.rows.subarray(i * count * 8, (i + 1) * count * 8)).toEqual(once.rows);
			expect(found.scores.subarray(i * count * 8, (i + 1) * count * 8)).toEqual(once.scores);
		}
	});
	it("near-ties closer than the product's rounding: the query's lists are scored exactly, the result the exact scan's", async () => {
		// Every value moved by 100 000: distances stay small while |q| |x| grows, so ||x||² - 2 q·x in float32 cannot
		// tell the neighbours apart (lists scanned together are not shifted by their mean).
		const { moved, movedQueries, count } = await movedFarFromOrigin("ivf-nprobe-equals-nlist.index");
		const want = await exactSearcher.search(moved, movedQueries, count, 8);
		const before = matrixSearcher.stats.fallbacks;
		const found = await matrixSearcher.search(moved, movedQueries, count, 8);
		expect(matrixSearcher.stats.fallbacks - before).toBeGreaterThan(0);
		expect(found).toEqual(want);
	});
});

describe("flat search precision", () => {
	it("vectors far from the origin: neighbours closer than the product's rounding are found as an exact scan finds them", async () => {
		// Every value moved by 100 000: distances stay as they were while |q| |x| grows, so a float32 ||x||² - 2 q·x
		// cannot tell the neighbours apart; relative to the vectors' mean it can, and where even that is not clear
		// the query is searched again with more candidates.
		const index = await readFaissIndex(join(FIXTURES, "flat-l2.index"));
		const shift = (values: Float32Array) => values.map((v) => v + 100_000);
		const moved = { ...index, vectors: shift(index.vectors) };
		const movedQueries = shift(queries);
		const count = reference.queries.length;
		const before = searcher.stats.fallbacks;
		const found = await searcher.search(moved, movedQueries, count, 8);
		expect(searcher.stats.fallbacks).toBeGreaterThan(before);
		for (let q = 0; q < count; q++) {
			const scored = Array.from({ length: index.ntotal }, (_, row) => {
				let sum = 0;
				for (let d = 0; d < 16; d++)
					sum += ((movedQueries[q * 16 + d] as number) - (moved.vectors[row * 16 + d] as number)) ** 2;
				return { row, score: Math.fround(sum) };
			});
			scored.sort((a, b) => a.score - b.score || a.row - b.row);
			expect([...found.rows.subarray(q * 8, q * 8 + 8)], `query ${q}`).toEqual(scored.slice(0, 8).map((s) => s.row));
			expect([...found.scores.subarray(q * 8, q * 8 + 8)], `query ${q}`).toEqual(
				scored.slice(0, 8).map((s) => s.score),
			);
		}
	});
});

describe("search edge cases", () => {
	it("finds stored vectors at distance 0", async () => {
		const index = await readFaissIndex(join(FIXTURES, RVC_INDEX));
		const row = 123;
		const found = await searcher.search(index, index.vectors.slice(row * 16, row * 16 + 16), 1, 8);
		expect(found.scores[0]).toBe(0);
		expect(found.rows[0]).toBe(row);
	});

	it("reports missing neighbours as faiss does when the probed lists hold fewer than k", async () => {
		const index = await readFaissIndex(join(FIXTURES, "flat-l2.index"));
		const found = await searcher.search(index, queries.subarray(0, 16), 1, 301);
		expect(found.ids[299]).toBeGreaterThanOrEqual(0);
		expect(found.ids[300]).toBe(-1);
		expect(found.rows[300]).toBe(-1);
		expect(found.scores[300]).toBe(Math.fround(MISSING_SCORE));
	});
});

// Describing makes the same checks as reading, without the vectors: both refuse every bad file with one message.
describe.each([
	["reading", readFaissIndex],
	["describing", describeFaissIndexFile],
] as const)("refusals when %s", (_, readIndex) => {
	it.each([
		["hnsw.index", /HNSW with flat storage \(HNSW…,Flat\) \(faiss fourcc IHNf\); only IVF…,Flat/],
		["ivf-pq.index", /IVF with product quantisation \(IVF…,PQ…\) \(faiss fourcc IwPQ\)/],
		["truncated.index", /truncated: .* but only \d+ bytes follow|truncated: .* the file ends at 56739/],
	])("%s", async (name, message) => {
		await expect(readIndex(join(FIXTURES, name))).rejects.toMatchObject({ code: "invalid_index", message });
	});

	it("refuses a file cut anywhere, without reading past its end", async () => {
		const bytes = readFileSync(join(FIXTURES, "ivf-sparse-hashtable-nprobe3.index"));
		for (const length of [0, 3, 4, 20, 41, 60, 100, 1200, 1300, 1400, bytes.length - 8, bytes.length - 1]) {
			await expect(
				readIndex(scratchFile(`cut-${length}.index`, bytes.subarray(0, length))),
				`cut at ${length}`,
			).rejects.toMatchObject({ code: "invalid_index", message: expect.stringMatching(/truncated/) });
		}
	});

	it("refuses sparse list sizes that name more lists than the index has", async () => {
		// IVF1,Flat of one 4-wide vector whose "sprs" sizes hold the pair (0, 0) twice before (0, 1): a file can
		// repeat pairs by the million, each read in turn.
		const header = (fourcc: string, ntotal: number) => {
			const bytes = Buffer.alloc(37);
			bytes.write(fourcc, 0, "latin1");
			bytes.writeInt32LE(4, 4);
			bytes.writeBigInt64LE(BigInt(ntotal), 8);
			bytes.writeUInt8(1, 32);
			bytes.writeInt32LE(1, 33);
			return bytes;
		};
		const int64s = (...values: number[]) => Buffer.from(BigInt64Array.from(values, BigInt).buffer);
		const floats = (...values: number[]) => Buffer.from(Float32Array.from(values).buffer);
		const bytes = Buffer.concat([
			header("IwFl", 1),
			int64s(1, 1),
			header("IxF2", 1),
			int64s(4),
			floats(0, 0, 0, 0),
			Uint8Array.of(0),
			int64s(0),
			Buffer.from("ilar", "latin1"),
			int64s(1, 16),
			Buffer.from("sprs", "latin1"),
			int64s(6, 0, 0, 0, 0, 0, 1),
			floats(1, 2, 3, 4),
			int64s(0),
		]);
		await expect(readIndex(scratchFile("sparse-repeats.index", bytes))).rejects.toMatchObject({
			code: "invalid_index",
			message: expect.stringMatching(/sparse list sizes count is 6, expected 0\.\.2/),
		});
	});

	it("refuses files that are not faiss indexes, trailing bytes, and inconsistent counts", async () => {
		const flat = new Uint8Array(readFileSync(join(FIXTURES, "flat-l2.index")));
		await expect(readIndex(scratchFile("wav.index", Buffer.from("RIFF....WAVEfmt ")))).rejects.toThrow(
			/unknown faiss fourcc "RIFF"/,
		);
		await expect(readIndex(scratchFile("binary.index", Uint8Array.of(0, 1, 2, 3, 4)))).rejects.toThrow(
			/does not start with a faiss index fourcc \(bytes 00 01 02 03\)/,
		);
		await expect(readIndex(scratchFile("trailing.index", Buffer.concat([flat, Buffer.alloc(5)])))).rejects.toThrow(
			/5 bytes follow the end of the index/,
		);
		const wrongCount = flat.slice();
		new DataView(wrongCount.buffer).setBigInt64(37, 4799n, true);
		await expect(readIndex(scratchFile("count.index", wrongCount))).rejects.toThrow(
			/IxF2 says 4799 for its vector data, expected 4800 floats for 300 vectors of 16/,
		);
		const l1 = flat.slice();
		new DataView(l1.buffer).setInt32(33, 2, true);
		await expect(readIndex(scratchFile("l1.index", l1))).rejects.toThrow(/uses the L1 metric/);
		await expect(readIndex(join(scratch, "absent.index"))).rejects.toThrow(/cannot be opened/);
	});
});
