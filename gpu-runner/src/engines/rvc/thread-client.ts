/**
 * The main side of a worker thread of ours (`thread-protocol.ts`): numbered requests, answers matched to them,
 * every request failing with `ThreadStoppedError` once the thread is gone, and a graceful close.
 *
 * Closing never terminates a thread under a native call: onnxruntime-node then throws into the dying
 * environment and the whole process aborts (`terminate called after throwing an instance of 'Napi::Error'`).
 * `close` sets a shared flag so the thread refuses what is still queued, sends the thread's own `close` request
 * (it releases what it holds once the request in progress finishes), and only then ends the idle thread.
 */
import { Worker } from "node:worker_threads";
import { closedMessage, type ThreadData, type ThreadRequest, type ThreadResponse } from "./thread-protocol.ts";

/** A request as the caller writes it: the client numbers it. */
export type RequestBody<R extends ThreadRequest> = R extends unknown ? Omit<R, "id"> : never;

/** What a request to a thread that has stopped (closed, or failed) rejects with. */
export class ThreadStoppedError extends Error {
	constructor(message: string, options?: { cause?: unknown }) {
		super(message, options);
		this.name = "ThreadStoppedError";
	}
}

/** A request the thread ran and failed, with the `code` and `permanent` of the error it threw, if any. */
export class ThreadRequestError extends Error {
	readonly code: string | undefined;
	readonly permanent: boolean | undefined;

	constructor(message: string, code: string | undefined, permanent: boolean | undefined) {
		super(message);
		this.name = "ThreadRequestError";
		this.code = code;
		this.permanent = permanent;
	}
}

/** `R`: the requests the thread takes, `{ op: "close" }` among them. */
export class ThreadClient<R extends ThreadRequest> {
	readonly #worker: Worker;
	readonly #closing = new Int32Array(new SharedArrayBuffer(4));
	#closed: Promise<void> | undefined;
	readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
	#nextId = 1;
	/** Why the thread is gone, once it is. */
	#stopped: ThreadStoppedError | undefined;

	/** What the thread is, in messages: "model thread", "feature index thread". */
	readonly name: string;

	constructor(url: URL, name: string) {
		this.name = name;
		const data: ThreadData = { closing: this.#closing, name };
		this.#worker = new Worker(url, { workerData: data });
		// Idle, the thread does not keep the process alive; while a request is out, it does (see `request`).
		this.#worker.unref();
		this.#worker.on("message", (response: ThreadResponse) => {
			const pending = this.#pending.get(response.id);
			if (pending === undefined) return;
			this.#pending.delete(response.id);
			if (this.#pending.size === 0) this.#worker.unref();
			if (response.ok) pending.resolve(response.value);
			else if (response.closed) pending.reject(new ThreadStoppedError(response.message));
			else pending.reject(new ThreadRequestError(response.message, response.code, response.permanent));
		});
		this.#worker.on("error", (error) =>
			this.#stop(new ThreadStoppedError(`the ${name} failed: ${error.message}`, { cause: error })),
		);
		this.#worker.on("exit", (code) => this.#stop(new ThreadStoppedError(`the ${name} exited (code ${code})`)));
	}

	/** True once the thread is gone: every request fails with `ThreadStoppedError`. */
	get stopped(): boolean {
		return this.#stopped !== undefined;
	}

	#stop(reason: ThreadStoppedError): void {
		this.#stopped ??= reason;
		for (const pending of this.#pending.values()) pending.reject(this.#stopped);
		this.#pending.clear();
	}

	/** Sends `{ op, ...fields }` and resolves with the handler's value; `transfer` is handed over, not copied. */
	request(body: RequestBody<R>, transfer: ArrayBuffer[] = []): Promise<unknown> {
		if (this.#stopped !== undefined) return Promise.reject(this.#stopped);
		if (this.#closed !== undefined && body.op !== "close")
			return Promise.reject(new ThreadStoppedError(closedMessage(this.name)));
		const id = this.#nextId++;
		return new Promise((resolve, reject) => {
			this.#pending.set(id, { resolve, reject });
			this.#worker.ref();
			this.#worker.postMessage({ ...body, id }, transfer);
		});
	}

	/**
	 * Stops the thread: the request in progress, if any, finishes, requests still queued fail with
	 * `ThreadStoppedError`, the thread releases what it holds, and it ends.
	 */
	close(): Promise<void> {
		this.#closed ??= (async () => {
			if (this.#stopped !== undefined) return;
			Atomics.store(this.#closing, 0, 1);
			try {
				await this.request({ op: "close" } as RequestBody<R>);
			} catch {
				// The thread died meanwhile: nothing is left to release.
			}
			this.#stop(new ThreadStoppedError(closedMessage(this.name)));
			// Idle now (its last request answered), so ending it interrupts no native call.
			await this.#worker.terminate();
		})();
		return this.#closed;
	}
}
