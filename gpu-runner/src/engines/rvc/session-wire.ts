/**
 * The requests `SessionHost` (the runner's thread) sends its model thread (`session-host-worker.ts`), on the
 * protocol of `thread-protocol.ts`. Types only, so the worker imports nothing else of ours for them.
 */
import type * as ort from "onnxruntime-node";

export type TensorData = Float32Array | BigInt64Array | Int32Array | Uint8Array;

export interface WireTensor {
	type: ort.Tensor.Type;
	data: TensorData;
	dims: number[];
}

export type HostRequest =
	| { id: number; op: "create"; source: string | Uint8Array; options: ort.InferenceSession.SessionOptions }
	| { id: number; op: "run"; session: number; feeds: Record<string, WireTensor> }
	| { id: number; op: "release"; session: number }
	/** Release every session; the last request a host sends. */
	| { id: number; op: "close" };
