/**
 * k-nearest-neighbour search in a `FeatureIndex`, returning what faiss's `index.search(queries, k)` returns:
 * per query the k best ids, best first, with faiss's scores (squared L2 distance, or inner product), and id -1
 * with score ±3.4028235e38 (float32's largest) where fewer than k vectors were searched.
 *
 * - Flat: every stored vector is a candidate.
 * - IVF: the `nprobe` centroids nearest the query (by the quantizer's metric) pick the lists that are scanned,
 *   exactly as faiss's IndexIVF::search does.
 *
 * The wide part, queries against thousands of centroids or every vector of a flat index, is one matrix product
 * per block: `||x||² - 2 q·x` (the query's own norm does not change the order) or `q·x` for inner product,
 * followed by TopK, run by onnxruntime (MLAS sgemm) on the CPU over blocks of at most QUERY_BLOCK x
 * DATABASE_BLOCK so the distance matrix stays at 64 MiB whatever the index size. The stored vectors are handed
 * to onnxruntime as views of the index's one Float32Array, never copied (L2 relative to their mean, on the query
 * side). Candidates from every block (a few more than needed) are then scored exactly in double precision, and
 * the best k kept; a bound on the product's float32 error tells whether a row left out could still be among
 * them, and where it could the query is searched again (see #nearest), so none is lost to rounding.
 *
 * IVF lists are scanned per block of queries, grouped by list (a list's vectors are contiguous): small lists that
 * few queries probe are scored exactly one by one; a large list (silence frames: real lists are unbalanced), or a
 * run of lists many queries probe (nprobe = nlist), goes through one matrix product with the queries probing it,
 * then each query re-scores exactly its few best candidates among its own lists. Which rows a query may pick is
 * decided with a bound on the product's float32 error, and where near-ties fall within it the query's lists there
 * are scanned exactly, so the result is always the exact scan's: per query the k best by exact score, equal scores
 * in probe order (the nearer list first), then list order, as faiss scans them.
 */
import "./onnxruntime-telemetry-off.ts";
import * as ort from "onnxruntime-node";
import { RvcEngineError } from "./errors.ts";
import { sessionOptionsFor } from "./execution-provider.ts";
import type { FeatureIndex, IndexMetric } from "./faiss-index.ts";
import { OnnxGraphBuilder } from "./onnx-writer.ts";

/** Queries and stored vectors per matrix product: 256 x 65536 float32 = 64 MiB of distances. */
const QUERY_BLOCK = 256;
const DATABASE_BLOCK = 65_536;
/** Most bytes of an IVF list's vectors, shifted by its centroid, copied for one matrix product (see #scanSegment). */
const CENTRED_BYTES = 64 * 2 ** 20;
/** Extra candidates taken from the matrix product and re-scored exactly. */
const CANDIDATE_MARGIN = 8;
/** Most candidates a query takes per block from a wide product (see #nearest); beyond, every row is scored exactly. */
const EXHAUSTIVE_KEEP = 4096;
/**
 * Cost model for IVF lists, in JavaScript multiply-adds (the exact scan's unit): a matrix product's multiply-add
 * costs about 1/MATRIX_SPEEDUP of one, each onnxruntime call about CALL_COST, reading one product score while
 * picking candidates SELECT_COST. Lists are scanned by product where that is cheaper. Runs of consecutive lists
 * are scanned by one product when the (query, vector) pairs it computes are at most MAX_WASTE times those the
 * probes ask for (a query multiplied with a list it does not probe is wasted work).
 */
const MATRIX_SPEEDUP = 16;
const CALL_COST = 60_000;
const SELECT_COST = 3;
const MAX_WASTE = 4;

/** How IVF lists are scanned: by the cost model, or (tests) always exactly / always by matrix product. */
export type IvfScan = "auto" | "exact" | "matrix";
/** faiss's score for a missing neighbour (its heaps start at float32's largest value). */
export const MISSING_SCORE = 3.4028234663852886e38;

export interface Neighbours {
	k: number;
	/** `[queries, k]`: faiss's scores (float32 values), best first. */
	scores: Float32Array;
	/** `[queries, k]`: faiss ids, -1 where missing. */
	ids: Float64Array;
	/** `[queries, k]`: rows of `index.vectors`, -1 where missing. */
	rows: Int32Array;
}

/** Squared L2 distance or inner product between row `a` of `x` and row `b` of `y`, accumulated in double. */
function score(metric: IndexMetric, x: Float32Array, a: number, y: Float32Array, b: number, dim: number): number {
	let sum = 0;
	const xo = a * dim;
	const yo = b * dim;
	if (metric === "l2") {
		for (let i = 0; i < dim; i++) {
			const t = (x[xo + i] as number) - (y[yo + i] as number);
			sum += t * t;
		}
	} else {
		for (let i = 0; i < dim; i++) sum += (x[xo + i] as number) * (y[yo + i] as number);
	}
	return Math.fround(sum);
}

/** The k best (row, score) pairs seen so far for one query, kept sorted best first. */
class BestK {
	readonly rows: Int32Array;
	readonly scores: Float64Array;
	readonly #better: (a: number, b: number) => boolean;

	constructor(k: number, metric: IndexMetric) {
		this.rows = new Int32Array(k).fill(-1);
		this.scores = new Float64Array(k).fill(metric === "l2" ? MISSING_SCORE : -MISSING_SCORE);
		this.#better = metric === "l2" ? (a, b) => a < b : (a, b) => a > b;
	}

	offer(row: number, value: number): void {
		const k = this.rows.length;
		if (!this.#better(value, this.scores[k - 1] as number)) return;
		let i = k - 1;
		while (i > 0 && this.#better(value, this.scores[i - 1] as number)) {
			this.scores[i] = this.scores[i - 1] as number;
			this.rows[i] = this.rows[i - 1] as number;
			i--;
		}
		this.scores[i] = value;
		this.rows[i] = row;
	}
}

/**
 * The k best (row, score) pairs of an IVF search for one query, where equal scores are ordered by (rank of the
 * row's list among the query's probes, row): the order faiss-style scanning (probed lists best first, each list
 * in order, the first of equal scores kept) would give, whatever order the rows are offered in. Empty slots have
 * rank -1, so a score equal to the empty slots' never displaces them, as in `BestK`.
 */
class RankedBestK {
	readonly rows: Int32Array;
	readonly ranks: Int32Array;
	readonly scores: Float64Array;
	readonly #l2: boolean;
	/** Whether rank a comes before rank b (ranks are non-negative); plain `a < b` when undefined. */
	readonly rankBefore: ((a: number, b: number) => boolean) | undefined;

	constructor(k: number, metric: IndexMetric, rankBefore?: (a: number, b: number) => boolean) {
		this.rows = new Int32Array(k).fill(-1);
		this.ranks = new Int32Array(k).fill(-1);
		this.scores = new Float64Array(k).fill(metric === "l2" ? MISSING_SCORE : -MISSING_SCORE);
		this.#l2 = metric === "l2";
		this.rankBefore = rankBefore;
	}

	/** Whether (value, rank, row) goes before slot i. */
	#before(value: number, rank: number, row: number, i: number): boolean {
		const s = this.scores[i] as number;
		if (value !== s) return this.#l2 ? value < s : value > s;
		const r = this.ranks[i] as number;
		if (r < 0) return false;
		if (rank !== r) return this.rankBefore === undefined ? rank < r : this.rankBefore(rank, r);
		return row < (this.rows[i] as number);
	}

	offer(row: number, value: number, rank: number): void {
		const k = this.rows.length;
		if (!this.#before(value, rank, row, k - 1)) return;
		let i = k - 1;
		while (i > 0 && this.#before(value, rank, row, i - 1)) {
			this.scores[i] = this.scores[i - 1] as number;
			this.ranks[i] = this.ranks[i - 1] as number;
			this.rows[i] = this.rows[i - 1] as number;
			i--;
		}
		this.scores[i] = value;
		this.ranks[i] = rank;
		this.rows[i] = row;
	}
}

/** Per metric: `[queries, rows]` scores by one Gemm (no TopK), for IVF lists scanned by matrix product. */
function blockScoresModel(metric: IndexMetric): Uint8Array {
	const g = new OnnxGraphBuilder();
	const queries = g.input("queries", "float32", ["q", "dim"]);
	const vectors = g.input("vectors", "float32", ["n", "dim"]);
	if (metric === "l2") {
		const norms = g.input("norms", "float32", ["n"]);
		g.node("Gemm", [queries, vectors, norms], { transB: 1, alpha: { float: -2 }, beta: { float: 1 } }, ["scores"]);
	} else {
		g.node("Gemm", [queries, vectors], { transB: 1 }, ["scores"]);
	}
	g.output("scores", "float32", ["q", "n"]);
	return g.toModel();
}

/** Per metric: `[queries, rows]` scores by one Gemm, then TopK along the rows. */
function blockTopKModel(metric: IndexMetric): Uint8Array {
	const g = new OnnxGraphBuilder();
	const queries = g.input("queries", "float32", ["q", "dim"]);
	const vectors = g.input("vectors", "float32", ["n", "dim"]);
	const k = g.input("k", "int64", [1]);
	let scores: string;
	if (metric === "l2") {
		const norms = g.input("norms", "float32", ["n"]);
		scores = g.node("Gemm", [queries, vectors, norms], { transB: 1, alpha: { float: -2 }, beta: { float: 1 } });
	} else {
		scores = g.node("Gemm", [queries, vectors], { transB: 1 });
	}
	g.nodeOutputs("TopK", [scores, k], { axis: 1, largest: metric === "l2" ? 0 : 1, sorted: 1 }, ["values", "rows"]);
	g.output("values", "float32", ["q", "k"]);
	g.output("rows", "int64", ["q", "k"]);
	return g.toModel();
}

export class IndexSearcher {
	readonly #sessions: Record<IndexMetric, ort.InferenceSession>;
	readonly #scoreSessions: Record<IndexMetric, ort.InferenceSession>;
	readonly #ivfScan: IvfScan;
	/** Squared norms of an IVF index's vectors, for L2 lists scanned together by matrix product. */
	readonly #norms = new WeakMap<Float32Array, Float32Array>();
	/** What the wide products over a flat index's vectors or the centroids need (see #wideOf). */
	readonly #wide = new WeakMap<Float32Array, Wide>();
	/**
	 * Work done so far: stored vectors scored exactly (double precision), (query, vector) pairs scored by product,
	 * (query, IVF segment) pairs whose candidates could not be trusted, so were scanned exactly (flat and coarse
	 * step: queries searched again), and stored vectors copied shifted by a mean for a product.
	 */
	readonly stats = { exactScores: 0, matrixScores: 0, fallbacks: 0, copiedRows: 0 };

	private constructor(
		sessions: Record<IndexMetric, ort.InferenceSession>,
		scoreSessions: Record<IndexMetric, ort.InferenceSession>,
		ivfScan: IvfScan,
	) {
		this.#sessions = sessions;
		this.#scoreSessions = scoreSessions;
		this.#ivfScan = ivfScan;
	}

	/** Always on the CPU: the stored vectors stay in host memory and are passed without copying. */
	static async create(options: { intraOpNumThreads?: number; ivfScan?: IvfScan } = {}): Promise<IndexSearcher> {
		const settings = sessionOptionsFor("cpu", { intraOpNumThreads: options.intraOpNumThreads });
		const [l2, innerProduct, l2Scores, innerProductScores] = await Promise.all([
			ort.InferenceSession.create(blockTopKModel("l2"), settings),
			ort.InferenceSession.create(blockTopKModel("inner_product"), settings),
			ort.InferenceSession.create(blockScoresModel("l2"), settings),
			ort.InferenceSession.create(blockScoresModel("inner_product"), settings),
		]);
		return new IndexSearcher(
			{ l2, inner_product: innerProduct },
			{ l2: l2Scores, inner_product: innerProductScores },
			options.ivfScan ?? "auto",
		);
	}

	async release(): Promise<void> {
		await Promise.all([
			this.#sessions.l2.release(),
			this.#sessions.inner_product.release(),
			this.#scoreSessions.l2.release(),
			this.#scoreSessions.inner_product.release(),
		]);
	}

	#normsOf(vectors: Float32Array, dim: number): Float32Array {
		let norms = this.#norms.get(vectors);
		if (norms === undefined) {
			const rows = vectors.length / dim;
			norms = new Float32Array(rows);
			for (let r = 0; r < rows; r++) {
				let sum = 0;
				for (let i = r * dim; i < (r + 1) * dim; i++) sum += (vectors[i] as number) ** 2;
				norms[r] = sum;
			}
			this.#norms.set(vectors, norms);
		}
		return norms;
	}

	/** `wideAround` the mean of `vectors`' rows (L2; inner product: the origin), kept for the array's lifetime. */
	#wideOf(metric: IndexMetric, vectors: Float32Array, dim: number): Wide {
		let wide = this.#wide.get(vectors);
		if (wide === undefined || wide.metric !== metric) {
			const rows = vectors.length / dim;
			const centre = new Float32Array(dim);
			if (metric === "l2" && rows > 0) {
				const sum = new Float64Array(dim);
				for (let r = 0; r < rows; r++)
					for (let d = 0; d < dim; d++) sum[d] = (sum[d] as number) + (vectors[r * dim + d] as number);
				for (let d = 0; d < dim; d++) centre[d] = (sum[d] as number) / rows;
			}
			wide = wideAround(metric, vectors, dim, centre);
			this.#wide.set(vectors, wide);
		}
		return wide;
	}

	/**
	 * For each of `count` queries, the `k` best rows of `vectors` (`[rows, dim]`) by exact score, the lower row
	 * first among equal scores (as faiss's scan keeps the first it meets). Candidates come from one float32 matrix
	 * product and TopK per block, L2 relative to the rows' mean c: ||x - c||² - 2 (q - c)·x ranks as ||q - x||²
	 * does, with a float32 error that scales with |q - c| |x| instead of |q| |x| (a query among near-identical
	 * vectors far from the origin, silence frames, is near c; from the origin, the gaps between its neighbours are
	 * lost in cancellation). They are scored exactly, and a bound on the product's error decides whether a row
	 * TopK left out could still beat the k-th. Queries where one could (near-ties closer than the bound) are
	 * searched again against copies of the rows shifted by those queries' mean, then with eight times the
	 * candidates each round, and past EXHAUSTIVE_KEEP every row is scored exactly.
	 */
	async #nearest(
		metric: IndexMetric,
		queries: Float32Array,
		count: number,
		vectors: Float32Array,
		dim: number,
		k: number,
	): Promise<BestK[]> {
		const rows = vectors.length / dim;
		const l2 = metric === "l2";
		const best: BestK[] = new Array(count);
		let pending: Int32Array = Int32Array.from({ length: count }, (_, q) => q);
		const wide = this.#wideOf(metric, vectors, dim);
		let copyAround: Float32Array | undefined;
		for (let keep = k + CANDIDATE_MARGIN; pending.length > 0; ) {
			if (keep > EXHAUSTIVE_KEEP) {
				for (const q of pending) {
					const top = new BestK(k, metric);
					for (let row = 0; row < rows; row++) top.offer(row, score(metric, queries, q, vectors, row, dim));
					best[q] = top;
				}
				this.stats.exactScores += pending.length * rows;
				break;
			}
			pending = await this.#nearestRound(metric, queries, pending, vectors, dim, k, keep, wide, copyAround, best);
			this.stats.fallbacks += pending.length;
			if (pending.length === 0) break;
			if (l2 && copyAround === undefined) {
				// Still unclear: the stored vectors' own size |x| is in the bound. Once per search, the rows are
				// taken again shifted by the unclear queries' mean c, in copies of at most CENTRED_BYTES (one pass
				// over the rows, against one a query for scoring every row exactly): the bound then scales with
				// |q - c| |x - c|, small for near-identical vectors and the queries among them.
				copyAround = new Float32Array(dim);
				const sum = new Float64Array(dim);
				for (const q of pending)
					for (let d = 0; d < dim; d++) sum[d] = (sum[d] as number) + (queries[q * dim + d] as number);
				for (let d = 0; d < dim; d++) copyAround[d] = (sum[d] as number) / pending.length;
			} else keep *= 8;
		}
		return best;
	}

	/**
	 * One round of #nearest for the queries `pending` with `keep` candidates per piece of the rows: fills `best`
	 * for the queries whose result is clear, and returns the others. Products are taken relative to `wide`'s centre
	 * (the vectors as they are), or with `copyAround` relative to that point on both sides (the vectors copied).
	 */
	async #nearestRound(
		metric: IndexMetric,
		queries: Float32Array,
		pending: Int32Array,
		vectors: Float32Array,
		dim: number,
		k: number,
		keep: number,
		wide: Wide,
		copyAround: Float32Array | undefined,
		best: BestK[],
	): Promise<Int32Array> {
		const rows = vectors.length / dim;
		const l2 = metric === "l2";
		const copied = l2 && copyAround !== undefined;
		const centre = copied ? (copyAround as Float32Array) : wide.centre;
		const pieceRows = copied
			? Math.max(1, Math.min(DATABASE_BLOCK, Math.floor(CENTRED_BYTES / (4 * dim))))
			: DATABASE_BLOCK;
		const unit = 2 ** -24;
		const gamma = ((dim + 2) * unit) / (1 - (dim + 2) * unit);
		const rho = (gamma + unit) / (1 - gamma - unit);
		const sigma = (4 * gamma + 2 * unit) / (1 - gamma - unit);
		let centreLength = 0;
		for (const v of centre) centreLength += v * v;
		centreLength = Math.sqrt(centreLength);
		// The queries as multiplied, a = q - c in float32, and per query |a| and the shift S (exact score = product
		// score + S, up to the bound): ||a||² + 2 a·c for the vectors as they are, ||a||² for a copy shifted by c.
		const nq = pending.length;
		const shifted = new Float32Array(nq * dim);
		const lengths = new Float64Array(nq);
		const shifts = new Float64Array(nq);
		for (let i = 0; i < nq; i++) {
			const q = pending[i] as number;
			let length = 0;
			let cross = 0;
			for (let d = 0; d < dim; d++) {
				const a = l2
					? Math.fround((queries[q * dim + d] as number) - (centre[d] as number))
					: (queries[q * dim + d] as number);
				shifted[i * dim + d] = a;
				length += a * a;
				cross += a * (centre[d] as number);
			}
			lengths[i] = Math.sqrt(length);
			shifts[i] = l2 ? length + (copied ? 0 : 2 * cross) : 0;
		}
		const found: number[][] = Array.from({ length: nq }, () => []);
		// Per query, the best score a row TopK left out may have (L2: at least; inner product: at most).
		const floors = new Float64Array(nq).fill(l2 ? Number.POSITIVE_INFINITY : Number.NEGATIVE_INFINITY);
		for (let r0 = 0; r0 < rows; r0 += pieceRows) {
			const n = Math.min(pieceRows, rows - r0);
			const kk = Math.min(keep, n);
			let piece = vectors.subarray(r0 * dim, (r0 + n) * dim);
			let norms = wide.norms?.subarray(r0, r0 + n);
			if (copied) {
				piece = new Float32Array(piece);
				norms = shiftRows(piece, n, dim, centre);
				this.stats.copiedRows += n;
			}
			const length = copied ? 0 : (wide.maxLength[Math.floor(r0 / DATABASE_BLOCK)] as number);
			for (let p0 = 0; p0 < nq; p0 += QUERY_BLOCK) {
				const bq = Math.min(QUERY_BLOCK, nq - p0);
				const feeds: Record<string, ort.Tensor> = {
					queries: new ort.Tensor("float32", shifted.subarray(p0 * dim, (p0 + bq) * dim), [bq, dim]),
					vectors: new ort.Tensor("float32", piece, [n, dim]),
					k: new ort.Tensor("int64", BigInt64Array.of(BigInt(kk)), [1]),
				};
				if (norms !== undefined) feeds.norms = new ort.Tensor("float32", norms, [n]);
				const result = await this.#sessions[metric].run(feeds);
				const top = result.rows?.data as BigInt64Array;
				const values = result.values?.data as Float32Array;
				this.stats.matrixScores += bq * n;
				for (let b = 0; b < bq; b++) {
					const i = p0 + b;
					const list = found[i] as number[];
					for (let j = 0; j < kk; j++) list.push(r0 + Number(top[b * kk + j]));
					if (kk === n) continue; // every row of the piece is a candidate
					// A row x left out has product score P >= the kk-th's (TopK), and its exact score is at least
					// P - E - R + S, where E, the product's float32 error (dim + 1 terms, the norm one of them,
					// each rounded), is at most rho |P| + sigma |a| |y| (y the row as multiplied), and R, from the
					// rounding of a = q - c (and of y = x - c), at most 2 u |a| (|a| + |x| + |c|) + u² |a|² (3 u (|a| +
					// |y|)²). For the vectors as they are |y| = |x| is at most the block's largest; for a copy, ||y||²
					// <= 2 |P| + 3 |a| |y| bounds it by P. Either way the lower bound grows with P, so the kk-th's
					// P gives it for every row left out. Doubled for room. Inner product: P = q·x within gamma |q| |x|.
					const a = lengths[i] as number;
					const last = values[b * kk + kk - 1] as number;
					let floor: number;
					if (!l2) floor = last + 2 * gamma * a * length;
					else if (copied) {
						const y = (3 * a + Math.sqrt(9 * a * a + 8 * Math.abs(last))) / 2;
						const rest = rho * Math.abs(last) + sigma * a * y + 3 * unit * (a + y) ** 2;
						floor = last - 2 * rest + (shifts[i] as number);
					} else {
						const rest =
							rho * Math.abs(last) +
							sigma * a * length +
							2 * unit * a * (a + length + centreLength) +
							unit * unit * a * a;
						floor = last - 2 * rest + (shifts[i] as number);
					}
					const held = floors[i] as number;
					if (!Number.isNaN(held) && (Number.isNaN(floor) || (l2 ? floor < held : floor > held))) floors[i] = floor;
				}
			}
		}
		const failed: number[] = [];
		for (let i = 0; i < nq; i++) {
			const q = pending[i] as number;
			const list = (found[i] as number[]).sort((x, y) => x - y);
			const top = new BestK(k, metric);
			for (const row of list) top.offer(row, score(metric, queries, q, vectors, row, dim));
			this.stats.exactScores += list.length;
			// Clear when every row left out scores worse than the k-th by more than its float32 rounding (so none
			// can even tie it).
			const kth = top.scores[k - 1] as number;
			const floor = floors[i] as number;
			const clear = l2 ? floor > kth + 4 * unit * Math.abs(kth) : floor < kth - 4 * unit * Math.abs(kth);
			if (clear) best[q] = top;
			else failed.push(q);
		}
		return Int32Array.from(failed);
	}

	/**
	 * Scans the lists that the queries `q0`.. (one block) probe (`probes[i]`: query q0 + i's lists, best first)
	 * into `ranked`. Lists are taken in storage order; a run of consecutive probed lists (its vectors are
	 * contiguous) forms a segment, split where a single product would multiply too many queries with lists they
	 * do not probe, or would pass DATABASE_BLOCK rows. A segment is scanned exactly, or by one matrix product of
	 * the queries probing any of its lists with all its vectors, each query then picking `keep` candidates
	 * among the rows of its own lists, re-scored exactly (as the flat path does), when the cost model says so.
	 */
	async #scanLists(
		index: FeatureIndex,
		queries: Float32Array,
		q0: number,
		probes: Int32Array[],
		ranked: RankedBestK[],
		keep: number,
		pass: ListPass,
	): Promise<void> {
		const { dim, metric } = index;
		const listStarts = index.listStarts as Uint32Array;
		const nq = probes.length;
		// (query, rank) pairs grouped by list: pairs of list l are at byList[l] .. byList[l + 1].
		const byList = new Int32Array(index.nlist + 1);
		for (const lists of probes) for (const l of lists) (byList[l + 1] as number)++;
		for (let l = 0; l < index.nlist; l++) byList[l + 1] = (byList[l + 1] as number) + (byList[l] as number);
		const fill = byList.slice(0, index.nlist);
		const pairQuery = new Int32Array(byList[index.nlist] as number);
		const pairRank = new Int32Array(pairQuery.length);
		probes.forEach((lists, i) => {
			const byPosition = (ranked[q0 + i] as RankedBestK).rankBefore === undefined;
			lists.forEach((l, rank) => {
				const at = (fill[l] as number)++;
				pairQuery[at] = i;
				pairRank[at] = byPosition ? rank : l;
			});
		});

		// A segment: rows start..end of lists first..last-1 (a list longer than `piece` rows is its own segments,
		// one per piece, as an L2 list scanned alone is copied), the distinct queries probing them, and the pairs
		// asked for.
		const piece = listPiece(metric, dim);
		const scan: SegmentScan = {
			index,
			queries,
			q0,
			pairs: { byList, pairQuery, pairRank },
			ranked,
			keep,
			blockQueries: nq,
			copy: pass.copy,
		};
		const stamp = new Int32Array(nq).fill(-1);
		let segment = 0;
		let first = -1;
		let last = -1;
		let start = 0;
		let end = 0;
		let union = 0;
		let useful = 0;
		const flush = async (): Promise<void> => {
			if (first >= 0 && useful > 0) await this.#scanSegment(scan, { first, last, start, end, union, useful });
			first = -1;
			segment++;
			union = 0;
			useful = 0;
		};
		for (let l = 0; l < index.nlist; l++) {
			const m = (byList[l + 1] as number) - (byList[l] as number);
			const ls = listStarts[l] as number;
			const le = listStarts[l + 1] as number;
			if (m === 0 || le === ls || (pass.only !== undefined && l !== pass.only.list) || pass.skip?.[l] === 1) {
				// An unprobed list with vectors breaks the run; an empty one does not. (So does one this pass leaves
				// to another.)
				if (le > ls) await flush();
				continue;
			}
			// A large list worth a product of its own is scanned alone, centred on its own vectors (see
			// #scanSegment); small ones (RVC's average 39 vectors) go together, where the `keep` candidates a query
			// re-scored per product cost less.
			const alone = pass.only !== undefined || scannedAlone(metric, m, le - ls, dim, keep);
			if (le - ls > piece || alone) {
				await flush();
				for (let r = ls; r < le; r += piece) {
					if (pass.only !== undefined && r !== pass.only.start) continue;
					first = l;
					last = l + 1;
					start = r;
					end = Math.min(le, r + piece);
					union = m; // probes name a list once per query
					useful = m * (end - start);
					await flush();
				}
				continue;
			}
			let added = 0;
			for (let p = byList[l] as number; p < (byList[l + 1] as number); p++)
				if (stamp[pairQuery[p] as number] !== segment) added++;
			const fits =
				first >= 0 &&
				le - start <= (metric === "l2" ? piece : DATABASE_BLOCK) &&
				(useful + m * (le - ls)) * MAX_WASTE >= (union + added) * (le - start);
			if (!fits) {
				await flush();
				first = l;
				start = ls;
				added = m;
			}
			for (let p = byList[l] as number; p < (byList[l + 1] as number); p++) stamp[pairQuery[p] as number] = segment;
			last = l + 1;
			end = le;
			union += added;
			useful += m * (le - ls);
		}
		await flush();
	}

	async #scanSegment(scan: SegmentScan, segment: ListSegment, redo?: Map<number, Set<number>>): Promise<void> {
		const { index, queries, q0, pairs, ranked, keep, blockQueries, copy } = scan;
		const { first, last, start, end, union, useful } = segment;
		const { dim, metric, vectors } = index;
		const listStarts = index.listStarts as Uint32Array;
		const { byList, pairQuery, pairRank } = pairs;
		const rows = end - start;
		const byMatrix =
			redo !== undefined ||
			this.#ivfScan === "matrix" ||
			(this.#ivfScan === "auto" && matrixPays(union, rows, useful, dim, keep));
		if (!byMatrix) {
			for (let l = first; l < last; l++) {
				const from = Math.max(start, listStarts[l] as number);
				const to = Math.min(end, listStarts[l + 1] as number);
				for (let p = byList[l] as number; p < (byList[l + 1] as number); p++) {
					const q = q0 + (pairQuery[p] as number);
					const rank = pairRank[p] as number;
					const top = ranked[q] as RankedBestK;
					for (let row = from; row < to; row++) top.offer(row, score(metric, queries, q, vectors, row, dim), rank);
				}
			}
			this.stats.exactScores += useful;
			return;
		}

		// The queries of the segment, gathered; `slot[i]` is block query i's row among them.
		const slot = new Int32Array(blockQueries).fill(-1);
		const members: number[] = [];
		for (let p = byList[first] as number; p < (byList[last] as number); p++) {
			const i = pairQuery[p] as number;
			if (slot[i] === -1 && (redo === undefined || redo.has(i))) {
				slot[i] = members.length;
				members.push(i);
			}
		}
		// L2 over one list (or a piece of one) is computed relative to the mean r of its vectors, on both sides:
		// ||x - r||² - 2 (q - r)·(x - r) is ||q - x||² - ||q - r||², so it ranks the same, and its float32 rounding
		// scales with |q - r| |x - r| instead of |q| |x|: small next to the gaps between near-identical vectors (a
		// list of silence frames, and queries near them), which ||x||² - 2 q·x loses in cancellation. The shifted
		// vectors are a copy, which is why such a segment holds at most CENTRED_BYTES of them.
		// (A run of lists is taken relative to its mean too where `redo` asks: for the queries whose candidates
		// from the product as is were not clear.)
		const centred = metric === "l2" && (last === first + 1 || redo !== undefined);
		// The shifted copy is kept for the next block of queries scanning the same rows (the pass over a large
		// list's pieces goes piece by piece, every block of queries for each): one copy at a time.
		if (centred && (copy.start !== start || copy.end !== end || copy.vectors !== vectors)) {
			const mean = new Float64Array(dim);
			for (let r = start; r < end; r++)
				for (let d = 0; d < dim; d++) mean[d] = (mean[d] as number) + (vectors[r * dim + d] as number);
			for (let d = 0; d < dim; d++) mean[d] = Math.fround((mean[d] as number) / rows);
			const shifted = new Float32Array(vectors.subarray(start * dim, end * dim));
			const shiftedNorms = shiftRows(shifted, rows, dim, mean);
			Object.assign(copy, { vectors, start, end, mean, block: shifted, norms: shiftedNorms });
			this.stats.copiedRows += rows;
		}
		const mean = centred ? (copy.mean as Float64Array) : undefined;
		const gathered = new Float32Array(members.length * dim);
		members.forEach((i, s) => {
			gathered.set(queries.subarray((q0 + i) * dim, (q0 + i + 1) * dim), s * dim);
			if (mean !== undefined)
				for (let d = 0; d < dim; d++) gathered[s * dim + d] = (gathered[s * dim + d] as number) - (mean[d] as number);
		});
		const block = centred ? (copy.block as Float32Array) : vectors.subarray(start * dim, end * dim);
		const norms = centred ? (copy.norms as Float32Array) : this.#normsOf(vectors, dim).subarray(start, end);
		// A bound on |product score - (exact score - |a|²)| (L2; inner product: - 0) for query row a (as multiplied)
		// and stored row b: the float32 dot product's worst case n u |a| |b| (twice for L2), the rounding of
		// ||b||² and of the sum, all doubled for room: alpha(a) |b| + beta ||b||².
		const unit = 2 ** -24;
		const gamma = (dim * unit) / (1 - dim * unit);
		const l2 = metric === "l2";
		const beta = l2 ? 8 * unit : 0;
		const lengths = new Float32Array(rows);
		for (let r = 0; r < rows; r++) lengths[r] = Math.sqrt(norms[r] as number) * (1 + 4 * unit);
		const alphas = members.map((_, s) => {
			let norm = 0;
			for (let d = s * dim; d < (s + 1) * dim; d++) norm += (gathered[d] as number) ** 2;
			return 2 * ((l2 ? 2 : 1) * gamma + 8 * unit) * Math.sqrt(norm) * (1 + 4 * unit);
		});
		const shifts = members.map((_, s) => {
			if (!l2) return 0;
			let norm = 0;
			for (let d = s * dim; d < (s + 1) * dim; d++) norm += (gathered[d] as number) ** 2;
			return norm;
		});
		const feeds: Record<string, ort.Tensor> = {
			queries: new ort.Tensor("float32", gathered, [members.length, dim]),
			vectors: new ort.Tensor("float32", block, [rows, dim]),
		};
		if (metric === "l2") feeds.norms = new ort.Tensor("float32", norms, [rows]);
		const result = await this.#scoreSessions[metric].run(feeds);
		const approx = result.scores?.data as Float32Array;
		this.stats.matrixScores += members.length * rows;

		// Per query, the `keep` best rows of its own lists by the best score the product allows them (its score
		// less the bound; ties: lower rank, then row).
		const picks = members.map((i) => new RankedBestK(keep, metric, (ranked[q0 + i] as RankedBestK).rankBefore));
		for (let l = first; l < last; l++) {
			const from = Math.max(start, listStarts[l] as number);
			const to = Math.min(end, listStarts[l + 1] as number);
			for (let p = byList[l] as number; p < (byList[l + 1] as number); p++) {
				const s = slot[pairQuery[p] as number] as number;
				if (s < 0) continue;
				const rank = pairRank[p] as number;
				const pick = picks[s] as RankedBestK;
				const base = s * rows - start;
				const alpha = alphas[s] as number;
				// Most rows lose to the current `keep`-th: they are passed over without a call.
				let worst = pick.scores[keep - 1] as number;
				if (l2) {
					for (let row = from; row < to; row++) {
						const r = row - start;
						const value = (approx[base + row] as number) - alpha * (lengths[r] as number) - beta * (norms[r] as number);
						if (value > worst) continue;
						pick.offer(row, value, rank);
						worst = pick.scores[keep - 1] as number;
					}
				} else {
					for (let row = from; row < to; row++) {
						const value = (approx[base + row] as number) + alpha * (lengths[row - start] as number);
						if (value < worst) continue;
						pick.offer(row, value, rank);
						worst = pick.scores[keep - 1] as number;
					}
				}
			}
		}
		// Each query's candidates are scored exactly. The rows it did not pick can score no better than its
		// `keep`-th pick's bound; where that could still beat its k-th exact score here (near-ties closer than the
		// bound), the query's rows are taken again by a product relative to the segment's mean (a run of lists
		// as is: its bound holds |x|, large far from the origin), and failing that every row of its lists in the
		// segment is scored exactly instead. Rows already offered (`redo`) are not offered again.
		let rescored = 0;
		const unclear = new Map<number, Set<number>>();
		members.forEach((i, s) => {
			const q = q0 + i;
			const pick = picks[s] as RankedBestK;
			const top = ranked[q] as RankedBestK;
			const offered = redo?.get(i);
			const exact: number[] = [];
			for (let j = 0; j < keep; j++) {
				const row = pick.rows[j] as number;
				if (row < 0) break;
				const value = score(metric, queries, q, vectors, row, dim);
				if (offered === undefined || !offered.has(row)) top.offer(row, value, pick.ranks[j] as number);
				exact.push(value);
				rescored++;
			}
			if (exact.length < keep) return; // every row of its lists was picked
			exact.sort(l2 ? (x, y) => x - y : (x, y) => y - x);
			const kth = exact[top.rows.length - 1] as number;
			const floor = (pick.scores[keep - 1] as number) + (shifts[s] as number);
			if (l2 ? floor > kth : floor < kth) return;
			this.stats.fallbacks++;
			const picked = new Set(pick.rows);
			if (offered !== undefined) for (const row of offered) picked.add(row);
			if (l2 && !centred && rows <= listPiece(metric, dim)) {
				unclear.set(i, picked);
				return;
			}
			for (let l = first; l < last; l++) {
				const from = Math.max(start, listStarts[l] as number);
				const to = Math.min(end, listStarts[l + 1] as number);
				for (let p = byList[l] as number; p < (byList[l + 1] as number); p++) {
					if (pairQuery[p] !== i) continue;
					const rank = pairRank[p] as number;
					for (let row = from; row < to; row++) {
						if (picked.has(row)) continue;
						top.offer(row, score(metric, queries, q, vectors, row, dim), rank);
						rescored++;
					}
				}
			}
		});
		this.stats.exactScores += rescored;
		if (unclear.size > 0) await this.#scanSegment(scan, segment, unclear);
	}

	/** The `k` nearest stored vectors of each of `count` queries (`[count, index.dim]` row-major), as faiss finds them. */
	async search(index: FeatureIndex, queries: Float32Array, count: number, k: number): Promise<Neighbours> {
		const { dim, metric } = index;
		if (queries.length !== count * dim) {
			throw new RvcEngineError(
				"invalid_index",
				`index search got ${queries.length} values for ${count} queries of width ${dim}`,
			);
		}
		let best: BestK[];
		if (index.kind === "flat") {
			best = await this.#nearest(metric, queries, count, index.vectors, dim, k);
		} else {
			const centroids = index.centroids as Float32Array;
			const centroidMetric = index.centroidMetric as IndexMetric;
			const nprobe = Math.min(index.nprobe, index.nlist);
			// With every list probed (nprobe >= nlist, and every centroid distance finite, so none is left out),
			// which lists are scanned is known without the coarse step; their order only decides between equal
			// scores from different lists, so it is worked out (exactly, as below) only when two such meet.
			const everyList = nprobe >= index.nlist && finite(queries) && finite(centroids);
			// The lists each query probes, best first (the first of equal centroid scores first, as faiss's
			// quantizer keeps them); lists whose centroid score is not finite are not probed.
			const coarse = everyList
				? undefined
				: await this.#nearest(centroidMetric, queries, count, centroids, dim, nprobe);
			const allLists = Int32Array.from({ length: index.nlist }, (_, l) => l);
			const ranked = Array.from({ length: count }, (_, q) => {
				if (!everyList) return new RankedBestK(k, metric);
				const distances = new Map<number, number>();
				const distance = (list: number): number => {
					let value = distances.get(list);
					if (value === undefined) {
						value = score(centroidMetric, queries, q, centroids, list, dim);
						distances.set(list, value);
					}
					return value;
				};
				// Lists as ranks: the nearer centroid first, then the lower list number (TopK's order among equals).
				return new RankedBestK(k, metric, (a, b) => {
					const da = distance(a);
					const db = distance(b);
					if (da !== db) return centroidMetric === "l2" ? da < db : da > db;
					return a < b;
				});
			});
			const probes = Array.from({ length: count }, (_, q) =>
				coarse === undefined ? allLists : (coarse[q] as BestK).rows.filter((list) => list >= 0),
			);
			const keep = k + CANDIDATE_MARGIN;
			const listStarts = index.listStarts as Uint32Array;
			const copy: CentredCopy = {};
			// Large L2 lists (copied, shifted by their mean, for their products) that queries of several blocks
			// probe are scanned first, piece by piece and every block of queries for each piece, so a piece is
			// copied once a search instead of once a block; the other lists then block by block.
			const skip = new Uint8Array(index.nlist);
			if (metric === "l2" && count > QUERY_BLOCK) {
				const piece = listPiece(metric, dim);
				const probed = new Int32Array(index.nlist);
				for (const lists of probes) for (const l of lists) (probed[l] as number)++;
				for (let l = 0; l < index.nlist; l++) {
					const ls = listStarts[l] as number;
					const le = listStarts[l + 1] as number;
					const m = probed[l] as number;
					if (m === 0 || le === ls || !(le - ls > piece || scannedAlone(metric, m, le - ls, dim, keep))) continue;
					skip[l] = 1;
					for (let r = ls; r < le; r += piece)
						for (let q0 = 0; q0 < count; q0 += QUERY_BLOCK)
							await this.#scanLists(index, queries, q0, probes.slice(q0, q0 + QUERY_BLOCK), ranked, keep, {
								only: { list: l, start: r },
								copy,
							});
				}
			}
			for (let q0 = 0; q0 < count; q0 += QUERY_BLOCK)
				await this.#scanLists(index, queries, q0, probes.slice(q0, q0 + QUERY_BLOCK), ranked, keep, { skip, copy });
			best = ranked.map((from) => {
				const to = new BestK(k, metric);
				to.rows.set(from.rows);
				to.scores.set(from.scores);
				return to;
			});
		}
		const scores = new Float32Array(count * k);
		const ids = new Float64Array(count * k);
		const rows = new Int32Array(count * k);
		for (let q = 0; q < count; q++) {
			const top = best[q] as BestK;
			for (let j = 0; j < k; j++) {
				const row = top.rows[j] as number;
				scores[q * k + j] = top.scores[j] as number;
				rows[q * k + j] = row;
				ids[q * k + j] = row < 0 ? -1 : index.ids === undefined ? row : (index.ids[row] as number);
			}
		}
		return { k, scores, ids, rows };
	}
}

/**
 * Whether scoring `useful` (query, vector) pairs by one product of `union` queries with `rows` vectors, then
 * `keep` candidates a query exactly, costs less than scoring the pairs exactly.
 */
function matrixPays(union: number, rows: number, useful: number, dim: number, keep: number): boolean {
	const exactCost = useful * dim;
	const matrixCost =
		CALL_COST + (union * rows * dim) / MATRIX_SPEEDUP + useful * SELECT_COST + Math.min(useful, union * keep) * dim;
	return matrixCost < exactCost;
}

/**
 * What the wide products over `vectors` (`[rows, dim]`: a flat index's vectors, or centroids) relative to `centre`
 * need: for L2 each row's ||x - c||² (float32, 4 bytes a row, as the norms of ||x||² - 2 q·x would be), and per
 * DATABASE_BLOCK rows the largest |x| for the error bound.
 */
function wideAround(metric: IndexMetric, vectors: Float32Array, dim: number, centre: Float32Array): Wide {
	const rows = vectors.length / dim;
	const blocks = Math.ceil(rows / DATABASE_BLOCK);
	const norms = metric === "l2" ? new Float32Array(rows) : undefined;
	const maxLength = new Float64Array(blocks);
	for (let r = 0; r < rows; r++) {
		let length = 0;
		let centred = 0;
		for (let d = r * dim, i = 0; i < dim; d++, i++) {
			const v = vectors[d] as number;
			length += v * v;
			const t = v - (centre[i] as number);
			centred += t * t;
		}
		if (norms !== undefined) norms[r] = centred;
		const b = Math.floor(r / DATABASE_BLOCK);
		// NaN or infinite values make the bound NaN or infinite: such blocks are always searched exactly.
		if (!(length < Number.POSITIVE_INFINITY && centred < Number.POSITIVE_INFINITY)) maxLength[b] = Number.NaN;
		else if (!Number.isNaN(maxLength[b])) maxLength[b] = Math.max(maxLength[b] as number, Math.sqrt(length));
	}
	return { metric, centre, norms, maxLength };
}

/** Rows of an IVF list scanned by one product (a longer list is scanned in pieces): an L2 list's is copied. */
function listPiece(metric: IndexMetric, dim: number): number {
	return Math.max(
		1,
		Math.min(DATABASE_BLOCK, metric === "l2" ? Math.floor(CENTRED_BYTES / (4 * dim)) : DATABASE_BLOCK),
	);
}

/**
 * Whether an IVF list of `rows` vectors that `m` queries probe is scanned by a product of its own, centred on its
 * own vectors (see #scanSegment): a large L2 list where that pays. Small ones (RVC's average 39 vectors) go
 * together, where the `keep` candidates a query re-scores per product cost less.
 */
function scannedAlone(metric: IndexMetric, m: number, rows: number, dim: number, keep: number): boolean {
	return metric === "l2" && rows >= 16 * keep && matrixPays(m, rows, m * rows, dim, keep);
}

/**
 * Shifts the `n` rows of `block` in place by `centre`, each value rounded to float32 as the product will read it:
 * the shifted rows' squared norms.
 */
function shiftRows(block: Float32Array, n: number, dim: number, centre: ArrayLike<number>): Float32Array {
	const norms = new Float32Array(n);
	for (let r = 0; r < n; r++) {
		let sum = 0;
		for (let d = 0; d < dim; d++) {
			const t = Math.fround((block[r * dim + d] as number) - (centre[d] as number));
			block[r * dim + d] = t;
			sum += t * t;
		}
		norms[r] = sum;
	}
	return norms;
}

/** One pass of #scanLists over a block of queries: every probed list, or one piece of one, or all but some. */
interface ListPass {
	only?: { list: number; start: number };
	/** Lists (1) another pass scans. */
	skip?: Uint8Array;
	copy: CentredCopy;
}

/** What every segment of one #scanLists pass shares: the block of queries, their pairs and their results. */
interface SegmentScan {
	index: FeatureIndex;
	queries: Float32Array;
	/** The block's first query in `ranked`. */
	q0: number;
	/** (query, rank) pairs grouped by list: those of list l are at byList[l] .. byList[l + 1]. */
	pairs: { byList: Int32Array; pairQuery: Int32Array; pairRank: Int32Array };
	ranked: RankedBestK[];
	keep: number;
	blockQueries: number;
	copy: CentredCopy;
}

/** One segment (see #scanLists): rows start..end of lists first..last-1, its distinct queries and asked pairs. */
interface ListSegment {
	first: number;
	last: number;
	start: number;
	end: number;
	union: number;
	useful: number;
}

/** The last rows an L2 segment shifted by their mean (see #scanSegment), kept for the next block of queries. */
interface CentredCopy {
	vectors?: Float32Array;
	start?: number;
	end?: number;
	mean?: Float64Array;
	block?: Float32Array;
	norms?: Float32Array;
}

/** What `IndexSearcher.#nearest` keeps per searched array (see `#wideOf`). */
interface Wide {
	metric: IndexMetric;
	/** L2: the mean of the rows (float32), the point products are taken relative to; inner product: zeros. */
	centre: Float32Array;
	/** L2: ||x - centre||² per row. */
	norms: Float32Array | undefined;
	/** Per DATABASE_BLOCK rows: the largest |x| (NaN where a value is not finite). */
	maxLength: Float64Array;
}

/** Whether every value is finite and small enough that no squared distance or product of two overflows. */
function finite(values: Float32Array): boolean {
	for (const v of values) if (!(Math.abs(v) < 1e15)) return false;
	return true;
}
