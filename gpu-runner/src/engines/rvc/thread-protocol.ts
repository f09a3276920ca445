/**
 * How the runner's main thread and a worker thread of ours (a model thread, `session-host-worker.ts`, or a
 * feature index thread, `index-thread-worker.ts`) talk: numbered requests answered in order, and a close that
 * lets the request in progress finish. The main side is `ThreadClient` (`thread-client.ts`); the worker side is
 * `serveRequests` here. Kept to node builtins, so a worker loaded outside any bundler imports little.
 */
import { parentPort, workerData } from "node:worker_threads";

export interface ThreadRequest {
	id: number;
	op: string;
}

/**
 * `closed`: refused because the thread was closing when the request's turn came. `code` and `permanent`: those
 * of the error thrown in the thread, when it had them (an `RvcEngineError`), so the main side can rebuild it.
 */
export type ThreadResponse =
	| { id: number; ok: true; value: unknown }
	| { id: number; ok: false; message: string; closed?: true; code?: string; permanent?: boolean };

/** What a request handler returns: its value, and the buffers in it to hand over rather than copy. */
export interface Handled {
	value: unknown;
	transfer?: ArrayBuffer[];
}

/** What the main side's `workerData` carries for `serveRequests`. */
export interface ThreadData {
	/** Set to 1 by the main side's `close`: requests still queued are refused, not run. */
	closing: Int32Array;
	/** What the thread is, for messages: "model thread", "feature index thread". */
	name: string;
}

/** Why a request is refused once the thread called `name` is closing or closed. */
export const closedMessage = (name: string) => `the ${name} was closed`;

/**
 * True when `data` spans the whole of its own (not shared) `ArrayBuffer`, so the buffer can be handed to the
 * other thread in a transfer list instead of copied; the sender cannot use it afterwards.
 */
export function fillsOwnBuffer(data: ArrayBufferView): boolean {
	return data.buffer instanceof ArrayBuffer && data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
}

/**
 * `data` as it is best posted: itself when it fills its own buffer (which can then be handed over), otherwise a
 * copy of just its part. Posting a typed array clones its whole `ArrayBuffer`, not only the part it views.
 */
export function forPosting<T extends Float32Array | BigInt64Array | Int32Array | Uint8Array>(data: T): T {
	return fillsOwnBuffer(data) ? data : (data.slice() as T);
}

/**
 * Worker side: handles requests strictly in order (a native run occupies the thread until it returns anyway),
 * refusing those still queued once the main side closes. The handler must accept `{ op: "close" }`, the last
 * request, and release what the thread holds.
 */
export function serveRequests<R extends ThreadRequest>(handle: (request: R) => Promise<Handled>): void {
	if (parentPort === null) throw new Error("serveRequests runs in a worker thread only");
	const port = parentPort;
	const { closing, name } = workerData as ThreadData;
	let queue: Promise<void> = Promise.resolve();
	port.on("message", (request: R) => {
		queue = queue.then(async () => {
			if (request.op !== "close" && Atomics.load(closing, 0) === 1) {
				const refused: ThreadResponse = { id: request.id, ok: false, message: closedMessage(name), closed: true };
				port.postMessage(refused);
				return;
			}
			let response: ThreadResponse;
			let transfer: ArrayBuffer[] = [];
			try {
				const done = await handle(request);
				response = { id: request.id, ok: true, value: done.value };
				transfer = done.transfer ?? [];
			} catch (error) {
				const facts = error as { code?: unknown; permanent?: unknown };
				response = {
					id: request.id,
					ok: false,
					message: error instanceof Error ? error.message : String(error),
					...(typeof facts.code === "string" ? { code: facts.code } : {}),
					...(typeof facts.permanent === "boolean" ? { permanent: facts.permanent } : {}),
				};
			}
			port.postMessage(response, transfer);
		});
	});
}
