/**
 * The child process `model-inspection.ts` loads an uploaded ONNX model in and runs its probes: argv[2] is the file;
 * the facts go back as one IPC message (`{facts}`, after `{stage: "cost"}` when the cost runs begin), and the process
 * exits. A model's graph decides what onnxruntime computes and allocates (a `Loop` of 10^15 iterations is 500 bytes),
 * and a run holds the thread that started it, so it is never run in the runner's own process: there the event loop,
 * its heartbeats and every other job would wait on it. A synthesizer's speaker count is read from its graph here too
 * (`onnx-speakers.ts`), from the bytes already read. With `--reference WIDTH F0` it measures the engine's own
 * synthesizer instead (`measureReference`), the yardstick of a candidate's costs (`onnx-cost.ts`).
 */
import { readFileBytes } from "./file-bytes.ts";
import { type InspectionMessage, inspectOnnx, measureReference } from "./model-inspection.ts";
import { bytesSource, onnxSpeakers } from "./onnx-speakers.ts";
import { endWithRunner } from "./parent-watchdog.ts";

// Gone within about a second of a runner that dies hard, even inside a native load or run: the runner's time limit
// on this process dies with it (`parent-watchdog.ts`).
endWithRunner();

const send = (message: InspectionMessage, then: () => void = () => {}) => process.send?.(message, undefined, {}, then);

let facts: Record<string, unknown>;
if (process.argv[2] === "--reference") {
	facts = { cost: await measureReference(Number(process.argv[3]), process.argv[4] === "1") };
} else {
	const path = process.argv[2] as string;
	const bytes = await readFileBytes(path);
	facts = await inspectOnnx(bytes, (stage) => send({ stage }));
	if (facts.role === "synthesizer" && facts.refused === undefined) {
		const speakers = onnxSpeakers(bytesSource(bytes));
		if (speakers !== undefined) facts.speakers = speakers;
	}
}
send({ facts }, () => process.exit(0));
