/**
 * A runner-like parent of the runner's child processes, for tests that kill it hard (`uploaded-synthesizer-process.test.ts`,
 * `model-inspection.test.ts`). `host FILE`: a `ProcessSessionHost` loads the synthesizer file with no deadline to speak
 * of, and the model process's id is printed on a line of its own. `inspect FILE`: the file is inspected as an upload is
 * (`inspectModelFile`, in its inspection process), and `started` is printed. Then it waits.
 */
import { inspectModelFile } from "../../../src/engines/rvc/model-inspection.ts";
import { ProcessSessionHost } from "../../../src/engines/rvc/session-host-process.ts";

const [mode, file] = process.argv.slice(2);
if (file === undefined || (mode !== "host" && mode !== "inspect")) {
	throw new Error("usage: runner-like-parent.ts host|inspect <file>");
}
if (mode === "host") {
	const host = new ProcessSessionHost({
		runLimit: () => ({ seconds: 3600, run: "a test's run" }),
		loadSeconds: 3600,
		memoryBytes: 2 ** 40,
	});
	const loading = host.create(file, { executionProviders: ["cpu"], intraOpNumThreads: 1 });
	process.stdout.write(`${host.pid}\n`);
	await loading;
} else {
	const inspected = inspectModelFile(file, { onnxSeconds: 3600 });
	process.stdout.write("started\n");
	await inspected;
}
process.stdout.write("done\n");
