/**
 * The thread behind `IndexThread`: it reads one feature index, keeps it, and answers retrievals from it, so the
 * runner's main thread neither holds the vectors nor waits on a search (see `index-thread.ts`). Loaded by a
 * worker thread outside any bundler: it imports only the reader, the search and the retrieval, which themselves
 * import node builtins and onnxruntime-node.
 */
import { describeFeatureIndex, type FeatureIndex, heldBytes, readFaissIndex } from "./faiss-index.ts";
import { retrieveFeatures } from "./feature-retrieval.ts";
import { IndexSearcher } from "./index-search.ts";
import type { IndexFacts, IndexRequest } from "./index-thread.ts";
import { type Handled, serveRequests } from "./thread-protocol.ts";

let loaded: { index: FeatureIndex; searcher: IndexSearcher } | undefined;

async function handle(request: IndexRequest): Promise<Handled> {
	switch (request.op) {
		case "load": {
			if (loaded !== undefined) throw new Error("this index thread already holds an index");
			const index = await readFaissIndex(request.path);
			loaded = { index, searcher: await IndexSearcher.create(request.options) };
			const facts: IndexFacts = { ...describeFeatureIndex(index), heldBytes: heldBytes(index) };
			return { value: facts };
		}
		case "retrieve": {
			if (loaded === undefined) throw new Error("this index thread holds no index");
			const { index, searcher } = loaded;
			const blended = await retrieveFeatures(request.features, request.frames, index, searcher, request.indexRate);
			return { value: blended, transfer: [blended.buffer as ArrayBuffer] };
		}
		case "close": {
			const held = loaded;
			loaded = undefined;
			await held?.searcher.release();
			return { value: undefined };
		}
	}
}

serveRequests(handle);
