/**
 * A feature index on a thread of its own: the thread reads the file, holds the vectors, and runs the whole
 * retrieval (search and blend, `feature-retrieval.ts`) for the jobs that use it; the main thread sends a window's
 * features and gets the blended ones back.
 *
 * Why: the search's matrix products run in onnxruntime, whose `run` is synchronous underneath (see
 * `session-host.ts`); on a large flat index they take about as long as ContentVec, time in which the runner's
 * main thread (lease heartbeats, health) would otherwise stop. The vectors live only on this thread, in its own
 * memory, so closing the thread when the index leaves the cache (`index-cache.ts`) frees them at once. (Sharing
 * them with the main thread as a `SharedArrayBuffer` was tried: V8 does not count shared memory towards
 * collecting garbage, and dropped indexes stayed resident, 300 MB each, until some unrelated collection.)
 */
import { RvcEngineError, type RvcErrorCode } from "./errors.ts";
import type { IndexDescription } from "./faiss-index.ts";
import { ThreadClient, ThreadRequestError, ThreadStoppedError } from "./thread-client.ts";
import { forPosting } from "./thread-protocol.ts";

/** What the thread tells of the index it read. */
export interface IndexFacts extends IndexDescription {
	/** Bytes of vectors, ids and centroids held. */
	heldBytes: number;
}

export type IndexRequest =
	| { id: number; op: "load"; path: string; options: { intraOpNumThreads?: number } }
	| { id: number; op: "retrieve"; features: Float32Array; frames: number; indexRate: number }
	| { id: number; op: "close" };

const WORKER_URL = new URL("./index-thread-worker.ts", import.meta.url);

/** The thread's error as the engine's own: the index's faults keep their code, a stopped thread is retryable. */
function engineError(doing: string, error: unknown): unknown {
	if (error instanceof ThreadStoppedError) {
		return new RvcEngineError("model_thread_stopped", `${doing}: ${error.message}`, { cause: error });
	}
	if (error instanceof ThreadRequestError && error.code !== undefined) {
		return new RvcEngineError(error.code as RvcErrorCode, error.message, {
			...(error.permanent !== undefined ? { permanent: error.permanent } : {}),
			cause: error,
		});
	}
	return error;
}

export class IndexThread {
	readonly path: string;
	readonly facts: IndexFacts;
	readonly #thread: ThreadClient<IndexRequest>;

	private constructor(path: string, facts: IndexFacts, thread: ThreadClient<IndexRequest>) {
		this.path = path;
		this.facts = facts;
		this.#thread = thread;
	}

	/** Reads the index at `path` on a new thread; a bad file fails as `invalid_index`, and the thread is closed. */
	static async open(path: string, options: { intraOpNumThreads?: number } = {}): Promise<IndexThread> {
		const thread = new ThreadClient<IndexRequest>(WORKER_URL, "feature index thread");
		try {
			const facts = (await thread.request({ op: "load", path, options })) as IndexFacts;
			return new IndexThread(path, facts, thread);
		} catch (error) {
			await thread.close();
			throw engineError(`reading feature index ${path}`, error);
		}
	}

	/**
	 * `features` (`[frames, dim]`) blended with their retrieved neighbours by `indexRate`, as a new array
	 * (`retrieveFeatures`, run on the index's thread).
	 */
	async retrieve(features: Float32Array, frames: number, indexRate: number): Promise<Float32Array> {
		try {
			return (await this.#thread.request({
				op: "retrieve",
				features: forPosting(features),
				frames,
				indexRate,
			})) as Float32Array;
		} catch (error) {
			throw engineError(`searching feature index ${this.path}`, error);
		}
	}

	/** Ends the thread once a retrieval in progress finishes; the vectors go with it. */
	close(): Promise<void> {
		return this.#thread.close();
	}
}
