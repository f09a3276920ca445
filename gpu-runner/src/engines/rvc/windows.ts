/**
 * The windows the rvc engine (`rvc-engine.ts`) cuts a stream into: its caps by provider and the longest window a
 * synthesizer run can get, apart from the engine so that the model inspection (`model-inspection.ts`) reads them
 * without loading the engine.
 */
import { makeChunkPlan } from "./chunker.ts";
import { RMVPE_HOP, RMVPE_SAMPLE_RATE } from "./mel.ts";
import { paramMaximum } from "./params.ts";

/** Input samples per ContentVec frame at 16 kHz (HuBERT's feature encoder stride). */
export const CONTENTVEC_STRIDE = 320;

/**
 * The longest chunk a voice's `chunk_seconds` gets on the CPU provider. The runner's thread stays free while a
 * model runs (`session-host.ts`), but a 120 s window would grow the synthesizer's arena to several GB and an
 * abort, checked between chunks, would wait minutes for the chunk in progress. At most 20 s keeps each run to
 * about 20 s on a slow 2-core machine.
 */
export const CPU_MAX_CHUNK_SECONDS = 20;

/**
 * On CUDA every window is lengthened (with more real audio on its right) to a multiple of this many seconds.
 * onnxruntime-node cannot set the CUDA provider's options, so cuDNN searches exhaustively for the fastest
 * algorithm of every convolution at every new input shape; a handful of window lengths keeps that search to
 * the first window of each length (the one most windows have is searched in `prepare`).
 */
export const GPU_WINDOW_MULTIPLE_SECONDS = 4;

/**
 * The most frames (100 a second) one synthesizer run can get on `provider`, under the largest settings a voice may
 * have (`params.ts`; on the CPU, chunks capped at `CPU_MAX_CHUNK_SECONDS`, the search under the chunk): a stream's
 * last window, whose segment is shorter than chunk + search + context + one window multiple (a longer rest would
 * have been cut again, `convertInChunks`), with context either side, lengthened to the window multiple. 6 998 on
 * the CPU, 18 400 on CUDA; an uploaded ONNX synthesizer's cost is weighed there (`onnx-cost.ts`).
 */
export function longestSynthesizerFrames(provider: "cpu" | "cuda"): number {
	const cpu = provider === "cpu";
	const chunkSeconds = cpu ? CPU_MAX_CHUNK_SECONDS : paramMaximum("chunkSeconds");
	const plan = makeChunkPlan({
		inputRate: RMVPE_SAMPLE_RATE,
		outputRate: RMVPE_SAMPLE_RATE,
		hop: RMVPE_HOP,
		cutStep: CONTENTVEC_STRIDE,
		chunkSeconds,
		// The search must leave a chunk at least one cut step (`validateChunkPlan`).
		searchSeconds: Math.min(paramMaximum("chunkSearchSeconds"), chunkSeconds - CONTENTVEC_STRIDE / RMVPE_SAMPLE_RATE),
		contextSeconds: paramMaximum("contextSeconds"),
		crossfadeSeconds: 0,
		...(cpu ? {} : { windowMultipleSeconds: GPU_WINDOW_MULTIPLE_SECONDS }),
	});
	const segment = plan.targetSamples + plan.searchSamples + plan.contextSamples + plan.windowMultiple - plan.hop;
	const window = Math.ceil((segment + 2 * plan.contextSamples) / plan.windowMultiple) * plan.windowMultiple;
	return window / plan.hop;
}
