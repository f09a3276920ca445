/**
 * onnxruntime sessions on a thread of their own.
 *
 * onnxruntime-node's `InferenceSession.run` returns a promise but is synchronous underneath: the native run is
 * called from a `setImmediate` on the JavaScript thread (`dist/backend.js`, 1.30), so while a model runs nothing
 * else in the process does, lease heartbeats and the health server included, and two jobs' runs can only take
 * turns. A `SessionHost` is a worker thread that owns sessions and runs them: the main thread posts the feeds
 * and goes on, and two hosts run two models at the same time. Each host holds its own copy of what it loads.
 *
 * Tensors cross as `WireTensor`s: the feeds are copied (structured clone; a few MB per run, against runs of
 * seconds), the outputs are handed over without a copy.
 */
import { Worker } from "node:worker_threads";
import * as ort from "onnxruntime-node";
import {
	CLOSED_MESSAGE,
	fillsOwnBuffer,
	type HostRequest,
	type HostResponse,
	type TensorData,
	type WireTensor,
} from "./session-wire.ts";

interface Created {
	session: number;
	inputNames: string[];
	outputNames: string[];
	inputMetadata: ort.InferenceSession.ValueMetadata[];
	outputMetadata: ort.InferenceSession.ValueMetadata[];
}

/** What the engine uses of a session: its declared inputs and outputs, `run` and `release`. */
export interface ModelSession {
	readonly inputNames: readonly string[];
	readonly outputNames: readonly string[];
	readonly inputMetadata: readonly ort.InferenceSession.ValueMetadata[];
	readonly outputMetadata: readonly ort.InferenceSession.ValueMetadata[];
	run(feeds: Record<string, ort.Tensor>): Promise<Record<string, ort.Tensor>>;
	release(): Promise<void>;
}

const WORKER_URL = new URL("./session-host-worker.ts", import.meta.url);

/** What a request to a host whose thread has stopped (closed, or failed) rejects with. */
export class ModelThreadStoppedError extends Error {
	constructor(message: string, options?: { cause?: unknown }) {
		super(message, options);
		this.name = "ModelThreadStoppedError";
	}
}

export class SessionHost {
	readonly #worker: Worker;
	/** Set to 1 by `close`: the thread refuses the requests still queued rather than running them. */
	readonly #closing = new Int32Array(new SharedArrayBuffer(4));
	#closed: Promise<void> | undefined;
	readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
	#nextId = 1;
	/** Why the thread is gone, once it is. */
	#stopped: ModelThreadStoppedError | undefined;

	constructor() {
		this.#worker = new Worker(WORKER_URL, { workerData: { closing: this.#closing } });
		// Idle, the thread does not keep the process alive; while a request is out, it does (see #request).
		this.#worker.unref();
		this.#worker.on("message", (response: HostResponse) => {
			const pending = this.#pending.get(response.id);
			if (pending === undefined) return;
			this.#pending.delete(response.id);
			if (this.#pending.size === 0) this.#worker.unref();
			if (response.ok) pending.resolve(response.value);
			else if (response.closed) pending.reject(new ModelThreadStoppedError(response.message));
			else pending.reject(new Error(response.message));
		});
		this.#worker.on("error", (error) =>
			this.#stop(new ModelThreadStoppedError(`the model thread failed: ${error.message}`, { cause: error })),
		);
		this.#worker.on("exit", (code) =>
			this.#stop(new ModelThreadStoppedError(`the model thread exited (code ${code})`)),
		);
	}

	/** True once the thread is gone: every request fails with `ModelThreadStoppedError`. */
	get stopped(): boolean {
		return this.#stopped !== undefined;
	}

	#stop(reason: ModelThreadStoppedError): void {
		this.#stopped ??= reason;
		for (const pending of this.#pending.values()) pending.reject(this.#stopped);
		this.#pending.clear();
	}

	#request(request: HostRequest, transfer: ArrayBuffer[] = []): Promise<unknown> {
		if (this.#stopped !== undefined) return Promise.reject(this.#stopped);
		if (this.#closed !== undefined && request.op !== "close")
			return Promise.reject(new ModelThreadStoppedError(CLOSED_MESSAGE));
		return new Promise((resolve, reject) => {
			this.#pending.set(request.id, { resolve, reject });
			this.#worker.ref();
			this.#worker.postMessage(request, transfer);
		});
	}

	/**
	 * A session on this host's thread, from a file or the model's bytes. Bytes that fill their own `ArrayBuffer`
	 * are handed over, not copied (a model can be hundreds of MB), and are unusable here afterwards.
	 */
	async create(source: string | Uint8Array, options: ort.InferenceSession.SessionOptions): Promise<ModelSession> {
		const handOver = typeof source !== "string" && fillsOwnBuffer(source);
		const created = (await this.#request(
			{ id: this.#nextId++, op: "create", source, options },
			handOver ? [source.buffer as ArrayBuffer] : [],
		)) as Created;
		let released = false;
		return {
			inputNames: created.inputNames,
			outputNames: created.outputNames,
			inputMetadata: created.inputMetadata,
			outputMetadata: created.outputMetadata,
			run: async (feeds) => {
				const wire: Record<string, WireTensor> = {};
				for (const [name, tensor] of Object.entries(feeds)) {
					wire[name] = { type: tensor.type, data: tensor.data as TensorData, dims: [...tensor.dims] };
				}
				const outputs = (await this.#request({
					id: this.#nextId++,
					op: "run",
					session: created.session,
					feeds: wire,
				})) as Record<string, WireTensor>;
				const result: Record<string, ort.Tensor> = {};
				for (const [name, t] of Object.entries(outputs)) {
					result[name] = new ort.Tensor(t.type as "float32", t.data as Float32Array, t.dims);
				}
				return result;
			},
			release: async () => {
				if (released || this.#stopped !== undefined) return;
				released = true;
				await this.#request({ id: this.#nextId++, op: "release", session: created.session });
			},
		};
	}

	/**
	 * Stops the thread: the run in progress, if any, finishes (a native run cannot be interrupted, and terminating
	 * the thread under it aborts the whole process: onnxruntime-node then throws into a dying environment),
	 * requests still queued fail with `ModelThreadStoppedError`, every session is released, and the thread ends.
	 */
	close(): Promise<void> {
		this.#closed ??= (async () => {
			if (this.#stopped !== undefined) return;
			Atomics.store(this.#closing, 0, 1);
			try {
				await this.#request({ id: this.#nextId++, op: "close" });
			} catch {
				// The thread died meanwhile: nothing is left to release.
			}
			this.#stop(new ModelThreadStoppedError(CLOSED_MESSAGE));
			// Idle now (its last request answered), so ending it interrupts no native call.
			await this.#worker.terminate();
		})();
		return this.#closed;
	}
}
