/**
 * The process behind `ProcessSessionHost` (`session-host-process.ts`): it owns the onnxruntime session of an account's
 * uploaded synthesizer and runs it, one request at a time, answering over IPC (advanced serialization: typed arrays
 * cross as they are) with the responses of `thread-protocol.ts`. The runner kills it when a run outlasts its deadline
 * or the process its memory ceiling. Kept to node builtins, onnxruntime-node, `session-host-handler.ts` and
 * `parent-watchdog.ts`: it is forked outside any bundler.
 */
import { writeFileSync } from "node:fs";
import { endWithRunner } from "./parent-watchdog.ts";
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

// Gone within about a second of a runner that dies hard, even inside a native load or run (`parent-watchdog.ts`).
endWithRunner();

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
