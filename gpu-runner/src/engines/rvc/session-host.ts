/**
 * onnxruntime sessions on a thread of their own.
 *
 * onnxruntime-node's `InferenceSession.run` returns a promise but is synchronous underneath: the native run is
 * called from a `setImmediate` on the JavaScript thread (`dist/backend.js`, 1.30), so while a model runs nothing
 * else in the process does, lease heartbeats and the health server included, and two jobs' runs can only take
 * turns. A `SessionHost` is a worker thread that owns sessions and runs them: the main thread posts the feeds
 * and goes on, and two hosts run two models at the same time. Each host holds its own copy of what it loads.
 *
 * Tensors cross as `WireTensor`s: the feeds are copied (structured clone, of the feed's own part only; a few MB per
 * run, against runs of seconds), the outputs are handed over without a copy.
 */
import "./onnxruntime-telemetry-off.ts";
import * as ort from "onnxruntime-node";
import type { HostRequest, TensorData, WireTensor } from "./session-wire.ts";
import { ThreadClient } from "./thread-client.ts";
import { fillsOwnBuffer, forPosting } from "./thread-protocol.ts";

/** What a host's `create` request answers: the session's number on the host, and what it declares. */
export interface CreatedSession {
	session: number;
	inputNames: string[];
	outputNames: string[];
	inputMetadata: ort.InferenceSession.ValueMetadata[];
	outputMetadata: ort.InferenceSession.ValueMetadata[];
}

/**
 * The job a run is for, where its host can act on the job's end: a process host (`ProcessSessionHost`) stops a run
 * whose job was aborted; a model thread cannot stop a native run and ignores it.
 */
export interface RunControl {
	/** The job's abort (its lease lost, the runner's shutdown): the run fails with `signal.reason`. */
	signal?: AbortSignal;
	/**
	 * Whether the host may be ended for this abort: true where no other job holds the session (default true). Where
	 * another does, the run goes on to its end (or its limits) without its job waiting for it.
	 */
	soleUser?: () => boolean;
}

/**
 * `promise`, or its job's abort (`signal`) if that comes first: the job stops waiting at once with the abort's reason,
 * and what it waited for goes on without it. `onAbort`, called at the abort, may act on it (a process host ends the
 * run) and answers whether the job stops waiting (default: it does); false keeps it waiting for `promise`.
 */
export function untilAborted<T>(
	promise: Promise<T>,
	signal: AbortSignal | undefined,
	onAbort: () => boolean = () => true,
): Promise<T> {
	if (signal === undefined) return promise;
	if (signal.aborted) return Promise.reject(signal.reason);
	return new Promise<T>((resolve, reject) => {
		const aborted = () => {
			if (onAbort()) reject(signal.reason);
		};
		signal.addEventListener("abort", aborted, { once: true });
		promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", aborted));
	});
}

/** What the engine uses of a session: its declared inputs and outputs, `run` and `release`. */
export interface ModelSession {
	readonly inputNames: readonly string[];
	readonly outputNames: readonly string[];
	readonly inputMetadata: readonly ort.InferenceSession.ValueMetadata[];
	readonly outputMetadata: readonly ort.InferenceSession.ValueMetadata[];
	run(feeds: Record<string, ort.Tensor>, control?: RunControl): Promise<Record<string, ort.Tensor>>;
	release(): Promise<void>;
}

/**
 * Where sessions are made and run: a thread of the runner's (`SessionHost`), or a process of their own that the
 * runner can kill (`ProcessSessionHost`, `session-host-process.ts`, for an account's uploaded synthesizer).
 */
export interface ModelHost {
	/** True once the host is gone: every request fails. */
	readonly stopped: boolean;
	/**
	 * True while the host computes a run whose job stopped waiting for it (`RunControl`): a process host's, ended by
	 * its cache once no job holds it. A model thread has none.
	 */
	readonly abandonedRun?: boolean;
	create(source: string | Uint8Array, options: ort.InferenceSession.SessionOptions): Promise<ModelSession>;
	close(): Promise<void>;
}

/** What a created session declares (its inputs' and outputs' names and metadata), as its `ModelSession` holds it. */
export function declaredBy({
	inputNames,
	outputNames,
	inputMetadata,
	outputMetadata,
}: CreatedSession): Pick<ModelSession, "inputNames" | "outputNames" | "inputMetadata" | "outputMetadata"> {
	return { inputNames, outputNames, inputMetadata, outputMetadata };
}

/** A run's feeds as they cross to a host: the feed's own part of each tensor's data (`forPosting`). */
export function wireFeeds(feeds: Record<string, ort.Tensor>): Record<string, WireTensor> {
	const wire: Record<string, WireTensor> = {};
	for (const [name, tensor] of Object.entries(feeds)) {
		wire[name] = { type: tensor.type, data: forPosting(tensor.data as TensorData), dims: [...tensor.dims] };
	}
	return wire;
}

/** A run's outputs as a host answers them (`Record<string, WireTensor>`), as tensors over the same data. */
export function tensorsFromWire(outputs: unknown): Record<string, ort.Tensor> {
	const result: Record<string, ort.Tensor> = {};
	for (const [name, t] of Object.entries(outputs as Record<string, WireTensor>)) {
		result[name] = new ort.Tensor(t.type as "float32", t.data as Float32Array, t.dims);
	}
	return result;
}

const WORKER_URL = new URL("./session-host-worker.ts", import.meta.url);

export class SessionHost implements ModelHost {
	readonly #thread = new ThreadClient<HostRequest>(WORKER_URL, "model thread");

	/** True once the thread is gone: every request fails with `ThreadStoppedError`. */
	get stopped(): boolean {
		return this.#thread.stopped;
	}

	/**
	 * A session on this host's thread, from a file or the model's bytes. Bytes that fill their own `ArrayBuffer`
	 * are handed over, not copied (a model can be hundreds of MB), and are unusable here afterwards.
	 */
	async create(source: string | Uint8Array, options: ort.InferenceSession.SessionOptions): Promise<ModelSession> {
		const handOver = typeof source !== "string" && fillsOwnBuffer(source);
		const created = (await this.#thread.request(
			{ op: "create", source, options },
			handOver ? [source.buffer as ArrayBuffer] : [],
		)) as CreatedSession;
		let released = false;
		return {
			...declaredBy(created),
			run: async (feeds) =>
				tensorsFromWire(await this.#thread.request({ op: "run", session: created.session, feeds: wireFeeds(feeds) })),
			release: async () => {
				if (released || this.#thread.stopped) return;
				released = true;
				await this.#thread.request({ op: "release", session: created.session });
			},
		};
	}

	/**
	 * Stops the thread (`ThreadClient.close`): the run in progress, if any, finishes, requests still queued fail
	 * with `ThreadStoppedError`, every session is released, and the thread ends.
	 */
	close(): Promise<void> {
		return this.#thread.close();
	}
}
