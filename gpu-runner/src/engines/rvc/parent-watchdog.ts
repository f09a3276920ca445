/**
 * Ends a child process of the runner's (a model process, `session-host-process-child.ts`; a model inspection,
 * `onnx-inspection-process.ts`) within about a second of the runner's death, even while its main thread is inside
 * onnxruntime. The runner dying hard (SIGKILL, the out-of-memory killer, a crash) runs none of its hooks, Node has no
 * parent-death signal, and a child notices its IPC channel close only once its main thread is out of a native load or
 * run: hours later for an uploaded graph that computes that long. A watchdog thread of the child's own, free while the
 * main thread is in a native call, reads the parent's id every 200 ms and kills the process once it is no longer the
 * runner's (reparented: the runner is gone). The runner's id comes in the child's environment (`RUNNER_PID_ENV`), set
 * as it forks, so a runner that died before the child started counts as gone too. Kept to node builtins: the children
 * are forked outside any bundler.
 */
import { Worker } from "node:worker_threads";

/** The environment variable that carries the runner's process id to its children. */
export const RUNNER_PID_ENV = "VC_RUNNER_PID";

/** The environment for a child forked by this process: its own, with its id for the child's watchdog. */
export function childEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
	return { ...env, [RUNNER_PID_ENV]: String(process.pid) };
}

/** In a child: kills this process once its parent is no longer the runner that forked it (nothing where none did). */
export function endWithRunner(): void {
	const runner = Number(process.env[RUNNER_PID_ENV]);
	if (!Number.isInteger(runner) || runner <= 0) return;
	new Worker(
		`const { workerData } = require("node:worker_threads");
		const watch = () => { if (process.ppid !== workerData) process.kill(process.pid, "SIGKILL"); };
		watch();
		setInterval(watch, 200);`,
		{ eval: true, workerData: runner, stdout: false, stderr: false },
	).unref();
}
