/**
 * A runner-like parent of a model process, for tests that kill it hard (`uploaded-synthesizer-process.test.ts`): it
 * starts a `ProcessSessionHost`, has it load the synthesizer file given as its argument with no deadline to speak of,
 * prints the model process's id on a line of its own, and waits.
 */
import { ProcessSessionHost } from "../../../src/engines/rvc/session-host-process.ts";

const file = process.argv[2];
if (file === undefined) throw new Error("usage: process-host-parent.ts <synthesizer.onnx>");
const host = new ProcessSessionHost({
	runLimit: () => ({ seconds: 3600, run: "a test's run" }),
	loadSeconds: 3600,
	memoryBytes: 2 ** 40,
});
const loading = host.create(file, { executionProviders: ["cpu"], intraOpNumThreads: 1 });
process.stdout.write(`${host.pid}\n`);
await loading;
process.stdout.write("loaded\n");
