/**
 * Cost of searching IVF indexes whose lists are unbalanced or all probed, against a Flat search of the same
 * vectors: 768-wide vectors in memory (no file), RVC's nlist = min(16 sqrt(N), N / 39), k = 8, queries in one
 * call as a 30 s conversion window's frames are. Cases:
 *
 *   - `ivf-unbalanced-nprobe1`: 60% of the vectors in one list (near-identical "silence" frames around one
 *     centroid), the rest spread over the other lists; nprobe 1; half the queries near the silence centroid.
 *   - `ivf-nprobe-nlist`: balanced lists, nprobe = nlist (every list scanned: a Flat search, ordered by lists).
 *   - `ivf-silence-nprobe-nlist`: every vector and centroid near one point (silence split over every list),
 *     nprobe = nlist, queries near it: runs of small lists far from the origin, all near-ties.
 *   - `ivf-balanced-nprobe1`: RVC's own case, for comparison.
 *   - `flat`: the same vectors as a Flat L2 index.
 *   - `flat-silence`: a Flat L2 index of near-identical vectors far from the origin (silence frames: one point
 *     plus 0.01 noise a value, |x| about 83), queries near them.
 *   - `flat-mixed`: a Flat L2 index of the unbalanced case's vectors (60% silence), its queries.
 *
 *   node --import ./gpu-runner/src/resolve-fallback.ts bench/runner/ivf-search-probe.ts --vectors 100000 --queries 250
 *
 * Prints seconds per 50 queries (one audio second) per case, and checks every IVF result against a plain exact
 * scan of the probed lists in double precision (`--check`).
 */
import { parseArgs } from "node:util";
import type { FeatureIndex } from "../../gpu-runner/src/engines/rvc/faiss-index.ts";
import { IndexSearcher } from "../../gpu-runner/src/engines/rvc/index-search.ts";

const { values } = parseArgs({
	options: {
		vectors: { type: "string", default: "100000" },
		queries: { type: "string", default: "250" },
		cases: { type: "string", default: "flat,ivf-balanced-nprobe1,ivf-unbalanced-nprobe1,ivf-nprobe-nlist" },
		threads: { type: "string" },
		check: { type: "boolean", default: false },
	},
});
const DIM = 768;
const K = 8;
const N = Number(values.vectors);
const Q = Number(values.queries);
const NLIST = Math.min(Math.floor(16 * Math.sqrt(N)), Math.floor(N / 39));

let seed = 17;
function normal(): number {
	seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
	const u = (seed + 1) / 2 ** 32;
	seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
	return Math.sqrt(-2 * Math.log(u)) * Math.cos((2 * Math.PI * seed) / 2 ** 32);
}

const centroids = new Float32Array(NLIST * DIM);
for (let i = 0; i < centroids.length; i++) centroids[i] = 3 * normal();

/** Vectors grouped by list: `sizes[l]` vectors around centroid l (spread `spread(l)`). */
function ivfIndex(sizes: number[], nprobe: number, spread: (list: number) => number): FeatureIndex {
	const vectors = new Float32Array(N * DIM);
	const listStarts = new Uint32Array(NLIST + 1);
	let row = 0;
	for (let l = 0; l < NLIST; l++) {
		listStarts[l] = row;
		const s = spread(l);
		for (let r = 0; r < (sizes[l] as number); r++, row++)
			for (let i = 0; i < DIM; i++) vectors[row * DIM + i] = (centroids[l * DIM + i] as number) + s * normal();
	}
	listStarts[NLIST] = row;
	const ids = new Float64Array(N);
	for (let r = 0; r < N; r++) ids[r] = (r * 7919) % N;
	return {
		kind: "ivf_flat",
		fourcc: "IwFl",
		metric: "l2",
		dim: DIM,
		ntotal: N,
		nlist: NLIST,
		nprobe,
		vectors,
		ids,
		listStarts,
		centroids,
		centroidMetric: "l2",
	};
}

function balancedSizes(): number[] {
	const sizes = new Array(NLIST).fill(Math.floor(N / NLIST));
	for (let l = 0; l < N - Math.floor(N / NLIST) * NLIST; l++) sizes[l]++;
	return sizes;
}

function unbalancedSizes(): number[] {
	const big = Math.floor(N * 0.6);
	const rest = N - big;
	const sizes = new Array(NLIST).fill(Math.floor(rest / (NLIST - 1)));
	sizes[0] = big;
	for (let l = 1; l <= rest - Math.floor(rest / (NLIST - 1)) * (NLIST - 1); l++) sizes[l]++;
	return sizes;
}

/** Queries near random centroids; with `silenceShare`, that share of them near centroid 0. */
function makeQueries(silenceShare: number): Float32Array {
	const queries = new Float32Array(Q * DIM);
	for (let q = 0; q < Q; q++) {
		const l = q < Q * silenceShare ? 0 : 1 + Math.floor(((q * 2654435761) >>> 0) % (NLIST - 1));
		for (let i = 0; i < DIM; i++)
			queries[q * DIM + i] = (centroids[l * DIM + i] as number) + (l === 0 ? 0.01 : 1) * normal();
	}
	return queries;
}

/** The exact answer by definition: probed lists (by exact centroid distance) scanned in double precision. */
function exact(index: FeatureIndex, queries: Float32Array): { ids: number[][]; scores: number[][] } {
	const dist = (a: Float32Array, ao: number, b: Float32Array, bo: number) => {
		let s = 0;
		for (let i = 0; i < DIM; i++) {
			const t = (a[ao + i] as number) - (b[bo + i] as number);
			s += t * t;
		}
		return Math.fround(s);
	};
	const ids: number[][] = [];
	const scores: number[][] = [];
	for (let q = 0; q < Q; q++) {
		let probed: number[];
		if (index.kind === "flat") probed = [];
		else {
			const order = Array.from(
				{ length: index.nlist },
				(_, l) => [dist(queries, q * DIM, index.centroids as Float32Array, l * DIM), l] as const,
			);
			order.sort((a, b) => a[0] - b[0]);
			probed = order.slice(0, index.nprobe).map((x) => x[1]);
		}
		const rows: [number, number][] = [];
		const starts = index.listStarts;
		const ranges = starts === undefined ? [[0, N]] : probed.map((l) => [starts[l] as number, starts[l + 1] as number]);
		for (const [a, b] of ranges)
			for (let r = a as number; r < (b as number); r++) rows.push([dist(queries, q * DIM, index.vectors, r * DIM), r]);
		rows.sort((a, b) => a[0] - b[0]);
		ids.push(rows.slice(0, K).map(([, r]) => (index.ids === undefined ? r : (index.ids[r] as number))));
		scores.push(rows.slice(0, K).map(([s]) => s));
	}
	return { ids, scores };
}

const searcher = await IndexSearcher.create(
	values.threads === undefined ? {} : { intraOpNumThreads: Number(values.threads) },
);
console.log(`N=${N} dim=${DIM} nlist=${NLIST} queries=${Q} k=${K}`);
for (const name of (values.cases as string).split(",")) {
	let index: FeatureIndex;
	let queries: Float32Array;
	if (name === "ivf-unbalanced-nprobe1") {
		index = ivfIndex(unbalancedSizes(), 1, (l) => (l === 0 ? 0.01 : 1));
		queries = makeQueries(0.5);
	} else if (name === "ivf-nprobe-nlist") {
		index = ivfIndex(balancedSizes(), NLIST, () => 1);
		queries = makeQueries(0);
	} else if (name === "ivf-silence-nprobe-nlist") {
		// Every list among near-identical vectors around centroid 0 (one silence, split by k-means), all probed.
		const vectors = ivfIndex(balancedSizes(), NLIST, () => 0.01);
		for (let r = 0; r < N; r++)
			for (let i = 0; i < DIM; i++) vectors.vectors[r * DIM + i] = (centroids[i] as number) + 0.01 * normal();
		const near = new Float32Array(NLIST * DIM);
		for (let i = 0; i < near.length; i++) near[i] = (centroids[i % DIM] as number) + 0.01 * normal();
		index = { ...vectors, centroids: near };
		queries = makeQueries(1);
	} else if (name === "ivf-balanced-nprobe1") {
		index = ivfIndex(balancedSizes(), 1, () => 1);
		queries = makeQueries(0);
	} else if (name.startsWith("flat")) {
		const ivf =
			name === "flat-silence"
				? ivfIndex(
						Array.from({ length: NLIST }, (_, l) => (l === 0 ? N : 0)),
						1,
						() => 0.01,
					)
				: name === "flat-mixed"
					? ivfIndex(unbalancedSizes(), 1, (l) => (l === 0 ? 0.01 : 1))
					: ivfIndex(balancedSizes(), 1, () => 1);
		if (name !== "flat" && name !== "flat-silence" && name !== "flat-mixed") throw new Error(`unknown case ${name}`);
		index = {
			...ivf,
			kind: "flat",
			fourcc: "IxF2",
			nlist: 0,
			nprobe: 0,
			ids: undefined,
			listStarts: undefined,
			centroids: undefined,
			centroidMetric: undefined,
		};
		queries = makeQueries(name === "flat-silence" ? 1 : name === "flat-mixed" ? 0.5 : 0);
	} else throw new Error(`unknown case ${name}`);
	await searcher.search(index, queries.subarray(0, DIM), 1, K); // warm-up (norms)
	const start = performance.now();
	const cpu0 = process.cpuUsage();
	const before = { ...(searcher as { stats?: Record<string, number> }).stats };
	const found = await searcher.search(index, queries, Q, K);
	const after = (searcher as { stats?: Record<string, number> }).stats;
	const seconds = (performance.now() - start) / 1000;
	const cpu = process.cpuUsage(cpu0);
	console.log(
		`${name}: ${((seconds * 50) / Q).toFixed(3)} s wall, ${((((cpu.user + cpu.system) / 1e6) * 50) / Q).toFixed(3)} s CPU per 50 queries (${seconds.toFixed(2)} s for ${Q})`,
	);
	if (after !== undefined)
		console.log(
			`  work: ${Object.entries(after)
				.map(([key, value]) => `${key} ${value - (before[key] ?? 0)}`)
				.join(", ")}`,
		);
	if (values.check) {
		const want = exact(index, queries);
		let mismatches = 0;
		for (let q = 0; q < Q; q++) {
			const got = [...found.ids.subarray(q * K, q * K + K)];
			const gotScores = [...found.scores.subarray(q * K, q * K + K)];
			if (got.join() !== (want.ids[q] as number[]).join() || gotScores.join() !== (want.scores[q] as number[]).join())
				mismatches++;
		}
		console.log(`  check: ${mismatches} of ${Q} queries differ from the exact scan`);
	}
}
await searcher.release();
