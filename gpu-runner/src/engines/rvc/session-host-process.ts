/**
 * onnxruntime sessions in a child process that the runner can kill: the host of an account's uploaded synthesizer.
 *
 * An uploaded ONNX graph decides what onnxruntime computes and allocates. Validation refuses control flow
 * (`onnx-graph-rules.ts`) and a cost that grows too fast between 125 and 500 frames (`onnx-cost.ts`), but a graph can
 * misbehave only above 500 frames (a shape of `max(0, frames - 1000)`), only at some lengths or on some input values.
 * On a model thread (`session-host.ts`) such a run could not be ended: onnxruntime-node's `run` holds its thread until
 * it returns, for hours, or until the machine's memory is gone, and every job of the runner with it. Here each run
 * gets a deadline, and the process a ceiling on its peak resident memory (`VmHWM`, read from `/proc` while a request
 * is out and again when its answer comes, so a peak between two reads is seen too); past either, the process is
 * killed and the request fails with `ModelLimitError`. The host is then `stopped`, as a model thread that died is, and
 * the cache that owns it starts a fresh one for the next job (`ModelCache`). A run whose job ends meanwhile (its lease
 * lost, the runner's shutdown: the job's `AbortSignal`, `RunControl`) fails at once with the abort's reason, and its
 * process is killed with it where no other job holds the session, rather than left computing a result nobody wants
 * until its deadline.
 *
 * Requests go one at a time (a run's deadline starts when it is sent, not while it waits behind another), over IPC
 * with advanced serialization: tensors are copied across (structured clone), which the process hop costs on top of a
 * model thread's (README, "Uploaded ONNX synthesizers").
 */
import { type ChildProcess, fork } from "node:child_process";
import { readFile } from "node:fs/promises";
import "./onnxruntime-telemetry-off.ts";
import type * as ort from "onnxruntime-node";
import { childEnv } from "./parent-watchdog.ts";
import {
	type CreatedSession,
	declaredBy,
	type ModelHost,
	type ModelSession,
	type RunControl,
	tensorsFromWire,
	untilAborted,
	wireFeeds,
} from "./session-host.ts";
import type { HostRequest } from "./session-wire.ts";
import { type RequestBody, ThreadRequestError, ThreadStoppedError } from "./thread-client.ts";
import type { ThreadResponse } from "./thread-protocol.ts";

/** The limits a `ProcessSessionHost` holds its process to. */
export interface ProcessHostLimits {
	/** How long a run of these feeds may take, and what the run is, in words (for the failure's message). */
	runLimit(feeds: Record<string, ort.Tensor>): { seconds: number; run: string };
	/** How long loading a session may take. */
	loadSeconds: number;
	/** The most resident memory the process may reach (its peak, `VmHWM`), in bytes. */
	memoryBytes: number;
	/** How often the process's memory is read while a request is out (default 50 ms). */
	pollMilliseconds?: number;
}

/** A request stopped because the process passed one of its limits; the process is gone. */
export class ModelLimitError extends Error {
	readonly limit: "time" | "memory";

	constructor(limit: "time" | "memory", message: string) {
		super(message);
		this.name = "ModelLimitError";
		this.limit = limit;
	}
}

interface Pending {
	resolve: (value: unknown) => void;
	reject: (error: Error) => void;
}

const CHILD_URL = new URL("./session-host-process-child.ts", import.meta.url);
const MIB = 1024 * 1024;

/**
 * The model processes alive, killed when the runner's process exits: a process in a run notices its channel close only
 * after the run, which for a graph that computes for hours is hours after the runner is gone.
 */
const alive = new Set<ChildProcess>();
let killOnExit = false;

/** An abort's reason in words, for the message of a process stopped by it. */
function describeReason(reason: unknown): string {
	return reason instanceof Error ? reason.message : String(reason);
}

/** The peak resident memory of process `pid` in bytes (`VmHWM` in `/proc/<pid>/status`); undefined once it is gone. */
async function peakResidentBytes(pid: number): Promise<number | undefined> {
	try {
		const status = await readFile(`/proc/${pid}/status`, "utf8");
		const kib = /^VmHWM:\s+(\d+) kB/m.exec(status)?.[1];
		return kib === undefined ? undefined : Number(kib) * 1024;
	} catch {
		return undefined;
	}
}

export class ProcessSessionHost implements ModelHost {
	readonly #child: ChildProcess;
	readonly #limits: ProcessHostLimits;
	#pending: (Pending & { id: number }) | undefined;
	/** Requests go one at a time: each waits for the one before it. */
	#queue: Promise<unknown> = Promise.resolve();
	#nextId = 1;
	#stopped: Error | undefined;
	/** The request whose job was aborted while it ran, left to finish (`abandonedRun`). */
	#abandoned: number | undefined;
	#closed: Promise<void> | undefined;
	#stderr = "";
	/** The process's peak resident memory as last read, in bytes. */
	#lastPeak: number | undefined;
	readonly #exited: Promise<void>;

	constructor(limits: ProcessHostLimits) {
		this.#limits = limits;
		this.#child = fork(CHILD_URL, [], {
			env: childEnv(),
			stdio: ["ignore", "ignore", "pipe", "ipc"],
			serialization: "advanced",
		});
		alive.add(this.#child);
		if (!killOnExit) {
			killOnExit = true;
			process.once("exit", () => {
				for (const child of alive) child.kill("SIGKILL");
			});
		}
		this.#child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
			this.#stderr = (this.#stderr + chunk).slice(-4000);
		});
		this.#child.on("message", (response: ThreadResponse) => {
			const pending = this.#pending;
			if (pending === undefined || pending.id !== response.id) return;
			this.#pending = undefined;
			if (response.ok) pending.resolve(response.value);
			else pending.reject(new ThreadRequestError(response.message, response.code, response.permanent));
		});
		this.#child.on("error", (error) =>
			this.#stop(new ThreadStoppedError(`the model process failed: ${error.message}`, { cause: error })),
		);
		this.#exited = new Promise((resolve) => {
			this.#child.on("exit", (code, signal) => {
				alive.delete(this.#child);
				const said = this.#stderr.trim().split("\n").at(-1);
				// Killed, and not by this host (its kills stop it first): the kernel's out-of-memory killer, most likely,
				// which takes this process first (`session-host-process-child.ts`).
				const killed =
					signal === "SIGKILL" && this.#stopped === undefined
						? `, not by the runner: most likely the system's out-of-memory killer (its memory last read ${this.#lastPeak === undefined ? "never" : `${Math.round(this.#lastPeak / MIB)} MiB`}, the ceiling ${Math.round(this.#limits.memoryBytes / MIB)} MiB)`
						: "";
				this.#stop(
					new ThreadStoppedError(
						`the model process exited (${signal ?? `code ${code}`}${killed})${said ? `: ${said}` : ""}`,
					),
				);
				resolve();
			});
		});
		this.#idle(true);
	}

	/** True once the process is gone (killed at a limit, closed, or died): every request fails. */
	get stopped(): boolean {
		return this.#stopped !== undefined;
	}

	/** True while the process computes a run whose job was aborted but was left to it (`RunControl.soleUser`). */
	get abandonedRun(): boolean {
		return this.#abandoned !== undefined && this.#pending?.id === this.#abandoned;
	}

	/** The process's id, while it runs. */
	get pid(): number | undefined {
		return this.#child.pid;
	}

	/** Idle, the process does not keep the runner alive; while a request is out, it does. */
	#idle(idle: boolean): void {
		const channel = this.#child.channel as { ref(): void; unref(): void } | undefined;
		if (idle) {
			this.#child.unref();
			channel?.unref();
		} else {
			this.#child.ref();
			channel?.ref();
		}
	}

	#stop(reason: Error): void {
		this.#stopped ??= reason;
		const pending = this.#pending;
		this.#pending = undefined;
		pending?.reject(reason);
	}

	/** Kills the process for passing a limit: the request out fails with `error`, later ones as stopped. */
	#kill(error: ModelLimitError): void {
		this.#stopFor(error, new ThreadStoppedError(`the model process was stopped: ${error.message}`));
	}

	/** Kills the process: the request out fails with `error`, later ones with `stopped`. */
	#stopFor(error: Error, stopped: ThreadStoppedError): void {
		if (this.#stopped !== undefined) return;
		this.#stop(error);
		this.#stopped = stopped;
		this.#child.kill("SIGKILL");
	}

	/** Kills the process where `peak` is past the ceiling; the error the request out fails with, if so. */
	#overMemory(peak: number | undefined): ModelLimitError | undefined {
		if (peak !== undefined) this.#lastPeak = peak;
		if (peak === undefined || peak <= this.#limits.memoryBytes) return undefined;
		const error = new ModelLimitError(
			"memory",
			`its process reached ${Math.round(peak / MIB)} MiB of memory, past the ceiling of ${Math.round(this.#limits.memoryBytes / MIB)} MiB (RUNNER_RVC_ONNX_MEMORY_MB)`,
		);
		this.#kill(error);
		return error;
	}

	/**
	 * Sends one request once those before it are answered, killing the process if it outlasts `deadline` or the process
	 * passes its memory ceiling meanwhile (checked again when the answer comes, before it is taken). With `control`,
	 * the job's abort fails the request at once with the signal's reason: one still waiting is never sent; one in the
	 * process is killed with it where the job is its session's only user (`soleUser`), else left to finish unwatched
	 * (`abandonedRun`), its answer dropped.
	 */
	#request(
		body: RequestBody<HostRequest>,
		deadline?: { seconds: number; message: () => string },
		control?: RunControl,
	): Promise<unknown> {
		const signal = control?.signal;
		if (signal?.aborted) return Promise.reject(signal.reason);
		/** The request's id once it is sent. */
		let sentId: number | undefined;
		const answered = this.#queue.then(
			() =>
				new Promise<unknown>((resolve, reject) => {
					if (this.#stopped !== undefined) return reject(this.#stopped);
					if (signal?.aborted) return reject(signal.reason);
					const id = this.#nextId++;
					sentId = id;
					const pid = this.#child.pid as number;
					let timer: NodeJS.Timeout | undefined;
					let reading = false;
					const poll = setInterval(() => {
						if (reading) return;
						reading = true;
						void peakResidentBytes(pid).then((peak) => {
							reading = false;
							if (this.#pending?.id === id) this.#overMemory(peak);
						});
					}, this.#limits.pollMilliseconds ?? 50);
					const done = () => {
						clearInterval(poll);
						clearTimeout(timer);
						this.#idle(true);
					};
					this.#pending = {
						id,
						resolve: (value) => {
							clearTimeout(timer);
							clearInterval(poll);
							// The answer is in; its peak may have come between two reads.
							void peakResidentBytes(pid).then((peak) => {
								done();
								// Its answer already taken off `#pending`: the limit's error goes to it here.
								const exceeded = this.#overMemory(peak);
								if (exceeded !== undefined) reject(exceeded);
								else resolve(value);
							});
						},
						reject: (error) => {
							done();
							reject(error);
						},
					};
					if (deadline !== undefined) {
						timer = setTimeout(
							() => this.#kill(new ModelLimitError("time", deadline.message())),
							deadline.seconds * 1000,
						);
					}
					this.#idle(false);
					this.#child.send({ ...body, id } as HostRequest);
				}),
		);
		this.#queue = answered.catch(() => undefined);
		return untilAborted(answered, signal, () => {
			// Not sent yet: it fails when its turn comes, unsent.
			if (sentId === undefined || this.#pending?.id !== sentId) return true;
			if (control?.soleUser?.() ?? true) {
				const stopped = new ThreadStoppedError(
					`the model process was stopped: the job running it ended (${describeReason(signal?.reason)})`,
				);
				this.#stopFor(stopped, stopped);
			} else this.#abandoned = sentId;
			return true;
		});
	}

	/** A session in the process, from a file or the model's bytes (copied across). */
	async create(source: string | Uint8Array, options: ort.InferenceSession.SessionOptions): Promise<ModelSession> {
		const { loadSeconds } = this.#limits;
		const created = (await this.#request(
			{ op: "create", source, options },
			{ seconds: loadSeconds, message: () => `it did not load within ${loadSeconds} s` },
		)) as CreatedSession;
		let released = false;
		return {
			...declaredBy(created),
			run: async (feeds, control) => {
				const limit = this.#limits.runLimit(feeds);
				const outputs = await this.#request(
					{ op: "run", session: created.session, feeds: wireFeeds(feeds) },
					{
						seconds: limit.seconds,
						message: () =>
							`a run of ${limit.run} did not finish within its deadline of ${Math.round(limit.seconds)} s (RUNNER_RVC_ONNX_RUN_SECONDS_PER_AUDIO_SECOND, RUNNER_RVC_ONNX_RUN_MIN_SECONDS)`,
					},
					control,
				);
				return tensorsFromWire(outputs);
			},
			release: async () => {
				if (released || this.stopped) return;
				released = true;
				await this.#request({ op: "release", session: created.session });
			},
		};
	}

	/**
	 * Ends the process at once, its sessions with it: a run in progress fails (`ThreadStoppedError`) instead of being
	 * waited for, so that disposing of the engine (the runner's shutdown) is not held by an uploaded graph for up to its
	 * deadline. Unlike a model thread's, ending a process under a native run is safe: the system frees what it held.
	 */
	close(): Promise<void> {
		this.#closed ??= (async () => {
			this.#stop(new ThreadStoppedError("the model process was closed"));
			if (this.#child.exitCode === null && this.#child.signalCode === null) {
				this.#child.kill("SIGKILL");
				await this.#exited;
			}
		})();
		return this.#closed;
	}
}
