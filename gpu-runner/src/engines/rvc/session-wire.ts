/**
 * What `SessionHost` (the runner's thread) and `session-host-worker.ts` (the model thread) say to each other.
 * Kept to types and two small values so the worker, loaded outside any bundler, imports nothing else of ours.
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

/** `closed`: refused because the host was closing when the request's turn came. */
export type HostResponse =
	| { id: number; ok: true; value: unknown }
	| { id: number; ok: false; message: string; closed?: true };

/** Why a request is refused once its host is closing or closed. */
export const CLOSED_MESSAGE = "the model thread was closed";

/**
 * True when `data` spans the whole of its own (not shared) `ArrayBuffer`, so the buffer can be handed to the
 * other thread in a transfer list instead of copied; the sender cannot use it afterwards.
 */
export function fillsOwnBuffer(data: ArrayBufferView): boolean {
	return data.buffer instanceof ArrayBuffer && data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
}
