/**
 * RVC's feature retrieval and `protect` (`Pipeline.vc` in `infer/modules/vc/pipeline.py`):
 *
 *   score, ix = index.search(feats, k=8)          per 20 ms ContentVec frame, faiss's squared L2 distances
 *   weight = (1 / score)², normalised per frame
 *   feats = (Σ weight · vectors[ix]) · index_rate + feats · (1 − index_rate)
 *
 * and later, at 100 frames/s, where pitchf < 1 Hz (unvoiced) only `protect` of that blend is kept.
 *
 * Two cases RVC leaves to numpy, decided here:
 * - A distance of exactly 0 (the frame is a stored training vector) makes RVC's weights inf / inf = NaN, and the
 *   frame's features NaN. Here the limit as the distance goes to 0 is used instead: the zero-distance neighbours
 *   share the weight equally and the others get none, so the frame becomes the stored vector itself.
 * - Neighbours faiss did not find (id -1, score float32 max, when the probed lists hold fewer than 8 vectors)
 *   get weight (1 / 3.4e38)² = 0 in RVC's float32 arithmetic, as here. A frame with none at all (an empty list
 *   probed) keeps its features, where RVC would divide 0 by 0.
 */
import type { FeatureIndex } from "./faiss-index.ts";
import type { IndexSearcher } from "./index-search.ts";

/** Neighbours per frame (RVC's `k=8`). */
export const RETRIEVAL_NEIGHBOURS = 8;

/**
 * `features` (`[frames, index.dim]`, 50 frames/s) blended with their retrieved vectors by `indexRate`, as a new
 * array; `features` is left as it is.
 */
export async function retrieveFeatures(
	features: Float32Array,
	frames: number,
	index: FeatureIndex,
	searcher: IndexSearcher,
	indexRate: number,
): Promise<Float32Array> {
	const { dim } = index;
	const k = RETRIEVAL_NEIGHBOURS;
	const found = await searcher.search(index, features, frames, k);
	const blended = new Float32Array(features.length);
	const weights = new Float64Array(k);
	const retrieved = new Float64Array(dim);
	for (let f = 0; f < frames; f++) {
		let exact = 0;
		for (let j = 0; j < k; j++) if ((found.rows[f * k + j] as number) >= 0 && found.scores[f * k + j] === 0) exact++;
		let total = 0;
		for (let j = 0; j < k; j++) {
			const row = found.rows[f * k + j] as number;
			const score = found.scores[f * k + j] as number;
			const weight = row < 0 ? 0 : exact > 0 ? (score === 0 ? 1 : 0) : (1 / score) ** 2;
			weights[j] = weight;
			total += weight;
		}
		const offset = f * dim;
		if (!(total > 0 && Number.isFinite(total))) {
			blended.set(features.subarray(offset, offset + dim), offset);
			continue;
		}
		retrieved.fill(0);
		for (let j = 0; j < k; j++) {
			const weight = (weights[j] as number) / total;
			if (weight === 0) continue;
			const row = (found.rows[f * k + j] as number) * dim;
			for (let i = 0; i < dim; i++)
				retrieved[i] = (retrieved[i] as number) + weight * (index.vectors[row + i] as number);
		}
		for (let i = 0; i < dim; i++) {
			blended[offset + i] = (retrieved[i] as number) * indexRate + (features[offset + i] as number) * (1 - indexRate);
		}
	}
	return blended;
}

/**
 * RVC's `protect`, in place on `phone` (`[frames, dim]`, 100 frames/s): per frame weight 1 where `pitchf` ≥ 1 Hz
 * (voiced) and `protect` elsewhere; `phone = phone · w + original · (1 − w)`. RVC applies it only when
 * protect < 0.5 and the model takes pitch.
 */
export function protectUnvoiced(
	phone: Float32Array,
	original: Float32Array,
	pitchf: Float32Array,
	protect: number,
): void {
	const dim = phone.length / pitchf.length;
	for (let f = 0; f < pitchf.length; f++) {
		const weight = (pitchf[f] as number) < 1 ? protect : 1;
		if (weight === 1) continue;
		for (let i = f * dim; i < (f + 1) * dim; i++) {
			phone[i] = (phone[i] as number) * weight + (original[i] as number) * (1 - weight);
		}
	}
}
