/**
 * The child process `model-inspection.ts` loads an uploaded ONNX model in and runs its probe: argv[2] is the file;
 * the facts go back as one IPC message, and the process exits. A model's graph decides what onnxruntime computes
 * and allocates (a `Loop` of 10^15 iterations is 500 bytes), and a run holds the thread that started it, so it is
 * never run in the runner's own process: there the event loop, its heartbeats and every other job would wait on it.
 * A synthesizer's speaker count is read from its graph here too (`onnx-speakers.ts`), from the bytes already read.
 */
import { readFileBytes } from "./file-bytes.ts";
import { inspectOnnx } from "./model-inspection.ts";
import { bytesSource, onnxSpeakers } from "./onnx-speakers.ts";

const path = process.argv[2] as string;
const bytes = await readFileBytes(path);
const facts = await inspectOnnx(bytes);
if (facts.role === "synthesizer" && facts.refused === undefined) {
	const speakers = onnxSpeakers(bytesSource(bytes));
	if (speakers !== undefined) facts.speakers = speakers;
}
process.send?.(facts, () => process.exit(0));
