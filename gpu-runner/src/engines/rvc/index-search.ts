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
 * to onnxruntime as views of the index's one Float32Array, never copied. Candidates from every block (a few more
 * than needed, so float32 rounding in the product cannot drop a true neighbour at the boundary) are then scored
 * exactly in double precision, which is also how IVF lists are scanned, and the best k kept.
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
/** Extra candidates taken from the matrix product and re-scored exactly. */
const CANDIDATE_MARGIN = 8;
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
	g.output("rows", "int64", ["q", "k"]);
	return g.toModel();
}

export class IndexSearcher {
	readonly #sessions: Record<IndexMetric, ort.InferenceSession>;
	/** Squared norms of the rows of large arrays searched by L2 matrix products (flat vectors, centroids). */
	readonly #norms = new WeakMap<Float32Array, Float32Array>();

	private constructor(sessions: Record<IndexMetric, ort.InferenceSession>) {
		this.#sessions = sessions;
	}

	/** Always on the CPU: the stored vectors stay in host memory and are passed without copying. */
	static async create(options: { intraOpNumThreads?: number } = {}): Promise<IndexSearcher> {
		const settings = sessionOptionsFor("cpu", options);
		const [l2, innerProduct] = await Promise.all([
			ort.InferenceSession.create(blockTopKModel("l2"), settings),
			ort.InferenceSession.create(blockTopKModel("inner_product"), settings),
		]);
		return new IndexSearcher({ l2, inner_product: innerProduct });
	}

	async release(): Promise<void> {
		await Promise.all([this.#sessions.l2.release(), this.#sessions.inner_product.release()]);
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

	/**
	 * For each query, about `keep` candidate rows of `vectors` (`[rows, dim]`) ranked by one float32 matrix product
	 * per block; `candidates[q]` lists them (block by block, so up to blocks x keep of them).
	 */
	async #candidates(
		metric: IndexMetric,
		queries: Float32Array,
		count: number,
		vectors: Float32Array,
		dim: number,
		keep: number,
	): Promise<Int32Array[]> {
		const rows = vectors.length / dim;
		const norms = metric === "l2" ? this.#normsOf(vectors, dim) : undefined;
		const perBlock = Math.min(keep, rows);
		const blocks = Math.ceil(rows / DATABASE_BLOCK);
		const candidates = Array.from({ length: count }, () => new Int32Array(blocks * perBlock).fill(-1));
		for (let q0 = 0; q0 < count; q0 += QUERY_BLOCK) {
			const nq = Math.min(QUERY_BLOCK, count - q0);
			const queryTensor = new ort.Tensor("float32", queries.subarray(q0 * dim, (q0 + nq) * dim), [nq, dim]);
			for (let b = 0; b < blocks; b++) {
				const r0 = b * DATABASE_BLOCK;
				const n = Math.min(DATABASE_BLOCK, rows - r0);
				const k = Math.min(perBlock, n);
				const feeds: Record<string, ort.Tensor> = {
					queries: queryTensor,
					vectors: new ort.Tensor("float32", vectors.subarray(r0 * dim, (r0 + n) * dim), [n, dim]),
					k: new ort.Tensor("int64", BigInt64Array.of(BigInt(k)), [1]),
				};
				if (norms !== undefined) feeds.norms = new ort.Tensor("float32", norms.subarray(r0, r0 + n), [n]);
				const result = await this.#sessions[metric].run(feeds);
				const top = result.rows?.data as BigInt64Array;
				for (let q = 0; q < nq; q++) {
					const list = candidates[q0 + q] as Int32Array;
					for (let j = 0; j < k; j++) list[b * perBlock + j] = r0 + Number(top[q * k + j]);
				}
			}
		}
		return candidates;
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
		const best = Array.from({ length: count }, () => new BestK(k, metric));
		if (index.kind === "flat") {
			const candidates = await this.#candidates(metric, queries, count, index.vectors, dim, k + CANDIDATE_MARGIN);
			for (let q = 0; q < count; q++) {
				const top = best[q] as BestK;
				for (const row of candidates[q] as Int32Array)
					if (row >= 0) top.offer(row, score(metric, queries, q, index.vectors, row, dim));
			}
		} else {
			const centroids = index.centroids as Float32Array;
			const centroidMetric = index.centroidMetric as IndexMetric;
			const listStarts = index.listStarts as Uint32Array;
			const nprobe = Math.min(index.nprobe, index.nlist);
			const coarse = await this.#candidates(centroidMetric, queries, count, centroids, dim, nprobe + CANDIDATE_MARGIN);
			for (let q = 0; q < count; q++) {
				const probes = new BestK(nprobe, centroidMetric);
				for (const list of coarse[q] as Int32Array)
					if (list >= 0) probes.offer(list, score(centroidMetric, queries, q, centroids, list, dim));
				const top = best[q] as BestK;
				for (const list of probes.rows) {
					if (list < 0) continue;
					const end = listStarts[list + 1] as number;
					for (let row = listStarts[list] as number; row < end; row++)
						top.offer(row, score(metric, queries, q, index.vectors, row, dim));
				}
			}
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
