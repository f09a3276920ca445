/**
 * The child process `model-inspection.ts` loads an uploaded ONNX model in and runs its probe: argv[2] is the file;
 * the facts go back as one IPC message, and the process exits. A model's graph decides what onnxruntime computes
 * and allocates (a `Loop` of 10^15 iterations is 500 bytes), and a run holds the thread that started it, so it is
 * never run in the runner's own process: there the event loop, its heartbeats and every other job would wait on it.
 */
import { readFileBytes } from "./file-bytes.ts";
import { inspectOnnx } from "./model-inspection.ts";

const path = process.argv[2] as string;
const facts = await inspectOnnx(await readFileBytes(path));
process.send?.(facts, () => process.exit(0));
