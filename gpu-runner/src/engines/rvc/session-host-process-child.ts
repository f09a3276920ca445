/**
 * The process behind `ProcessSessionHost` (`session-host-process.ts`): it owns the onnxruntime session of an account's
 * uploaded synthesizer and runs it, one request at a time, answering over IPC (advanced serialization: typed arrays
 * cross as they are) with the responses of `thread-protocol.ts`. The runner kills it when a run outlasts its deadline
 * or the process its memory ceiling. Kept to node builtins, onnxruntime-node and `session-host-handler.ts`: it is
 * forked outside any bundler.
 */
import { writeFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { handleHostRequest } from "./session-host-handler.ts";
import type { HostRequest } from "./session-wire.ts";
import type { ThreadResponse } from "./thread-protocol.ts";

// The first process the kernel's out-of-memory killer takes, before the runner and the other jobs' processes: where
// memory runs out (an uploaded graph growing faster than the runner's reads of it, or a machine with less free memory
// than the ceiling), the process to lose is this one, whose job is tried again, not the runner with every job on it.
// Raising it needs no privilege; where it cannot be written (not Linux), the process goes as any other would.
try {
	writeFileSync("/proc/self/oom_score_adj", "1000");
} catch {}

// The runner dying hard (SIGKILL, the out-of-memory killer, a crash) runs none of its hooks, and Node has no
// parent-death signal: this process would notice its channel close (`disconnect` below) only once its main thread is
// out of onnxruntime, hours later for a load or run that computes that long. A watchdog thread of its own, free while
// the main thread is in a native call, reads the parent's id every 200 ms and kills this process once it is no longer
// the runner's (reparented: the runner is gone). The runner's id comes as the first argument, read before anything
// else, so a runner that died before this line still counts as gone.
const runner = Number(process.argv[2]);
if (Number.isInteger(runner) && runner > 0) {
	new Worker(
		`const { workerData } = require("node:worker_threads");
		const watch = () => { if (process.ppid !== workerData) process.kill(process.pid, "SIGKILL"); };
		watch();
		setInterval(watch, 200);`,
		{ eval: true, workerData: runner, stdout: false, stderr: false },
	).unref();
}

let queue: Promise<void> = Promise.resolve();

process.on("message", (request: HostRequest) => {
	queue = queue.then(async () => {
		let response: ThreadResponse;
		try {
			response = { id: request.id, ok: true, value: (await handleHostRequest(request)).value };
		} catch (error) {
			response = { id: request.id, ok: false, message: error instanceof Error ? error.message : String(error) };
		}
		await new Promise<void>((resolve) => process.send?.(response, undefined, {}, () => resolve()));
	});
});
// The runner gone (its end of the channel closed): nothing is left to serve.
process.on("disconnect", () => process.exit(0));
