/**
 * What a model host's thread or process does with each request (`session-wire.ts`): it owns onnxruntime sessions and
 * runs them. Shared by the model thread (`session-host-worker.ts`) and the model process of an account's uploaded
 * synthesizer (`session-host-process-child.ts`). Kept to node builtins, onnxruntime-node and `thread-protocol.ts`:
 * it is loaded outside any bundler.
 */
import "./onnxruntime-telemetry-off.ts";
import * as ort from "onnxruntime-node";
import type { HostRequest, WireTensor } from "./session-wire.ts";
import { forPosting, type Handled } from "./thread-protocol.ts";

const sessions = new Map<number, ort.InferenceSession>();
let nextSession = 1;

function session(id: number): ort.InferenceSession {
	const found = sessions.get(id);
	if (found === undefined) throw new Error(`session ${id} is not open (released, or never created)`);
	return found;
}

export async function handleHostRequest(request: HostRequest): Promise<Handled> {
	switch (request.op) {
		case "create": {
			const created =
				typeof request.source === "string"
					? await ort.InferenceSession.create(request.source, request.options)
					: await ort.InferenceSession.create(request.source, request.options);
			const id = nextSession++;
			sessions.set(id, created);
			return {
				value: {
					session: id,
					inputNames: [...created.inputNames],
					outputNames: [...created.outputNames],
					inputMetadata: created.inputMetadata.map((m) => ({ ...m })),
					outputMetadata: created.outputMetadata.map((m) => ({ ...m })),
				},
			};
		}
		case "run": {
			const feeds: Record<string, ort.Tensor> = {};
			for (const [name, t] of Object.entries(request.feeds)) {
				feeds[name] = new ort.Tensor(t.type as "float32", t.data as Float32Array, t.dims);
			}
			const result = await session(request.session).run(feeds);
			const outputs: Record<string, WireTensor> = {};
			const transfer: ArrayBuffer[] = [];
			for (const [name, tensor] of Object.entries(result)) {
				// Its own buffer, so it is handed over rather than copied.
				const data = forPosting(tensor.data as WireTensor["data"]);
				outputs[name] = { type: tensor.type, data, dims: [...tensor.dims] };
				transfer.push(data.buffer as ArrayBuffer);
			}
			return { value: outputs, transfer };
		}
		case "release": {
			const released = session(request.session);
			sessions.delete(request.session);
			await released.release();
			return { value: undefined };
		}
		case "close": {
			const all = [...sessions.values()];
			sessions.clear();
			await Promise.allSettled(all.map((s) => s.release()));
			return { value: undefined };
		}
	}
}
