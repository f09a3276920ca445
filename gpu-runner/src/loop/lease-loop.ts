/**
 * The runner's main loop. Glossary (see also src/contracts/runner.ts):
 * - slot: room for one concurrent job; a runner has `capacity` slots.
 * - lease: the Worker's time-limited claim on a job, kept alive by heartbeats.
 * - report: the one final call for a lease: complete, fail (transient or permanent) or release.
 *
 * Invariants: every lease this loop receives gets exactly one report, unless the Worker says the lease was
 * lost (then the Worker already took the job back and any report would be refused). Reports are retried with
 * backoff; if they still cannot get through, the lease expires and the Worker re-queues the job.
 *
 * Shutdown has two stages (like graphile-worker): `stop()` stops leasing and lets running jobs finish within
 * the grace period, then aborts what is left and releases those leases (no attempt charged). The process's
 * second signal is handled in main.ts by exiting at once.
 */
import { randomUUID } from "node:crypto";
import type { EngineName, FailRequest, Lease, VoiceValidationLease } from "../../../src/contracts/runner.ts";
import type { ApiError } from "../api/api-error.ts";
import type { RunnerApi } from "../api/runner-api-client.ts";
import type { LoadedEngine } from "../engines/registry.ts";
import { permanentFailure } from "../job-errors.ts";
import { describeError, type Logger } from "../logger.ts";
import type { RunnerState } from "../observability/health-server.ts";
import type { JobOutcome, RunnerMetrics } from "../observability/metrics.ts";
import type { VoiceValidator } from "../validation/voice-validator.ts";
import { type BackoffPolicy, backoffDelay, DEFAULT_BACKOFF, sleep } from "./backoff.ts";
import type { JobProcessor } from "./job-processor.ts";

export interface LeaseLoopOptions {
	runnerId: string;
	capacity: number;
	leaseWaitSeconds: number;
	backoff?: BackoffPolicy;
	/** Attempts for each final report before leaving the job to lease expiry... */
	reportAttempts?: number;
	/**
	 * ...and for how long (ms) it keeps trying past them: a finished job's report outlasts an API outage of up to
	 * this long instead of waiting out the lease and being converted again. Default 30 s, within the 45 s lease,
	 * whose last heartbeat was at most one interval (15 s) before the report.
	 */
	reportWindowMs?: number;
}

/** Longest wait between two tries of a final report, so that an API that comes back is heard from soon. */
const REPORT_RETRY_MAX_MS = 5_000;
/** How long a lease's acknowledgement is retried: within the broker's 10 s window (`ACK_WINDOW_MS`), with room. */
const ACKNOWLEDGE_RETRY_MS = 7_000;

/** The Worker as the lease loop last found it (`GET /healthz`'s `api`). */
export interface ApiStatus {
	reachable: boolean | null;
	failing_since: string | null;
	error: string | null;
}

export interface LeaseLoopDeps {
	api: RunnerApi;
	engines: ReadonlyMap<EngineName, LoadedEngine>;
	processJob: JobProcessor;
	metrics: RunnerMetrics;
	logger: Logger;
	/** Voices whose models are at hand, for the broker's model affinity. */
	affinity?: { list(): string[] };
	/** Validates accounts' uploaded voices (`validate_voice` jobs); without it the runner asks for conversions only. */
	validateVoice?: VoiceValidator;
	/** Removes what the runner holds of deleted voices (the lease response's `forget_voice_ids`). */
	forgetVoices?: (voiceIds: string[]) => Promise<void>;
}

class ShutdownAbort extends Error {
	constructor() {
		super("runner shutting down");
		this.name = "ShutdownAbort";
	}
}

class LeaseLostAbort extends Error {
	constructor() {
		super("lease lost");
		this.name = "LeaseLostAbort";
	}
}

interface ActiveJob {
	lease: Pick<Lease, "lease_id" | "heartbeat_interval_seconds">;
	controller: AbortController;
	progress: number | undefined;
	settled: Promise<void>;
}

/**
 * How a job ended, as the metrics count it: what the runner reported, unless the Worker never heard it (the
 * report gave up: the lease expires there and the job is tried again) or the lease was gone already.
 */
const reportedAs = (sent: "sent" | "lost" | "gave_up", outcome: JobOutcome): JobOutcome =>
	sent === "lost" ? "lease_lost" : sent === "gave_up" ? "not_reported" : outcome;

/** The Worker answered 400 `invalid_request`: it does not take this request as it is (an older contract). */
const refusedAsInvalid = (error: unknown): boolean =>
	(error as Partial<ApiError>).status === 400 && (error as Partial<ApiError>).code === "invalid_request";

/** The least time between the starts of two lease requests that came back empty. */
export const MIN_LEASE_INTERVAL_MS = 1000;

export class LeaseLoop {
	#options: Required<LeaseLoopOptions>;
	#deps: LeaseLoopDeps;
	#active = new Map<string, ActiveJob>();
	#stopping = new AbortController();
	/** The `wait_id` of the lease request on its way, which `stop()` cancels. */
	#waitInFlight: string | undefined;
	/** Whether a lease request was ever answered, and the failure of the latest ones since, if they fail. */
	#leased = false;
	#apiProblem: { since: string; error: string } | undefined;
	#slotFreed: (() => void) | undefined;
	#running: Promise<void> | undefined;
	/** Reports not tied to a running job (malformed leases); awaited before the loop ends. */
	#pendingReports = new Set<Promise<unknown>>();

	constructor(options: LeaseLoopOptions, deps: LeaseLoopDeps) {
		this.#options = { backoff: DEFAULT_BACKOFF, reportAttempts: 5, reportWindowMs: 30_000, ...options };
		this.#deps = deps;
		deps.metrics.capacity.set(options.capacity);
	}

	get state(): RunnerState {
		if (this.#stopping.signal.aborted) return "stopping";
		if (!this.#running) return "starting";
		return this.#active.size >= this.#options.capacity ? "busy" : "ready";
	}

	get activeJobs(): number {
		return this.#active.size;
	}

	/**
	 * Whether the Worker answered the last lease request (null before the first), and since when and why it has not:
	 * health stays 200 for a runner that merely cannot reach the API (restarting it would not help), but says so.
	 */
	get api(): ApiStatus {
		if (this.#apiProblem === undefined)
			return { reachable: this.#leased ? true : null, failing_since: null, error: null };
		return { reachable: false, failing_since: this.#apiProblem.since, error: this.#apiProblem.error };
	}

	/** Run until `stop()`; resolves once every leased job has been reported. */
	start(): Promise<void> {
		this.#running ??= this.#run();
		return this.#running;
	}

	/** Stop leasing; give running jobs `graceMs` to finish, then release the rest. Resolves when all are reported. */
	async stop(graceMs: number): Promise<void> {
		if (!this.#stopping.signal.aborted) {
			this.#deps.logger.info("stopping: no new leases", { active_jobs: this.#active.size, grace_ms: graceMs });
			this.#stopping.abort();
			// The long-poll is abandoned; the Worker may not learn that from the connection (a proxy between them can
			// keep it open), and would grant the next job to nobody: 45 s and an attempt lost. So the runner says it.
			// One try: the Worker may also have seen the connection close, and a stop is not held up by an outage.
			const waitId = this.#waitInFlight;
			if (waitId !== undefined) {
				this.#track(
					this.#deps.api.cancelWait(waitId).catch((error: unknown) => {
						this.#deps.metrics.apiErrors.inc({ operation: "cancel wait" });
						this.#deps.logger.warn("could not cancel the lease wait", { error: describeError(error) });
					}),
				);
			}
		}
		const allSettled = Promise.all([...this.#active.values()].map((job) => job.settled));
		const graceOver = await Promise.race([allSettled.then(() => false), sleep(graceMs).then(() => true)]);
		if (graceOver) {
			for (const job of this.#active.values()) job.controller.abort(new ShutdownAbort());
		}
		await this.#running;
	}

	async #run(): Promise<void> {
		const { api, logger, metrics } = this.#deps;
		const stopSignal = this.#stopping.signal;
		let failures = 0;
		while (!stopSignal.aborted) {
			const free = this.#options.capacity - this.#active.size;
			if (free <= 0) {
				await new Promise<void>((resolve) => {
					const done = () => {
						stopSignal.removeEventListener("abort", done);
						this.#slotFreed = undefined;
						resolve();
					};
					this.#slotFreed = done;
					stopSignal.addEventListener("abort", done, { once: true });
				});
				continue;
			}
			const asked = performance.now();
			let batch: Awaited<ReturnType<RunnerApi["lease"]>>;
			const waitId = randomUUID();
			this.#waitInFlight = waitId;
			try {
				batch = await api.lease(
					{
						runner_id: this.#options.runnerId,
						capacity: free,
						wait_seconds: this.#options.leaseWaitSeconds,
						loaded_voice_ids: this.#deps.affinity?.list() ?? [],
						engines: [...this.#deps.engines.keys()],
						...(this.#deps.validateVoice ? { job_kinds: ["convert", "validate_voice"] } : {}),
						wait_id: waitId,
						// Each lease is heartbeaten as it arrives (`#startHeartbeats`): one the Worker granted to a request
						// of ours that died unseen goes back to the queue, uncharged, instead of waiting out its expiry.
						acknowledges: true,
					},
					stopSignal,
				);
				failures = 0;
				this.#leased = true;
				this.#apiProblem = undefined;
			} catch (error) {
				if (stopSignal.aborted) break;
				failures++;
				this.#apiProblem = {
					since: this.#apiProblem?.since ?? new Date().toISOString(),
					error: describeError(error).slice(0, 500),
				};
				metrics.apiErrors.inc({ operation: "lease" });
				const delay = backoffDelay(failures, this.#options.backoff);
				logger.warn("lease request failed; backing off", {
					error: describeError(error),
					attempt: failures,
					delay_ms: delay,
				});
				await sleep(delay, stopSignal);
				continue;
			} finally {
				this.#waitInFlight = undefined;
			}
			const forget = batch.forgetVoiceIds ?? [];
			if (forget.length > 0 && this.#deps.forgetVoices) {
				this.#deps
					.forgetVoices(forget)
					.catch((error: unknown) =>
						logger.warn("could not remove the files of deleted voices", { error: describeError(error) }),
					);
			}
			const validations = batch.validations ?? [];
			if (batch.leases.length + validations.length > 0) metrics.leaseWait.observe((performance.now() - asked) / 1000);
			else {
				// Nothing came: ask again no sooner than a second after asking (with RUNNER_LEASE_WAIT_SECONDS 0 the answer
				// comes at once, and the loop would otherwise send thousands of requests a second).
				const early = MIN_LEASE_INTERVAL_MS - (performance.now() - asked);
				if (early > 0) await sleep(early, stopSignal);
			}
			for (const bad of batch.malformed) {
				logger.error("lease does not match the contract", { lease_id: bad.leaseId, problem: bad.problem });
				this.#track(
					this.#report(bad.leaseId, "fail", () =>
						api.fail(bad.leaseId, {
							kind: "transient",
							reason: "internal",
							message: `runner could not read the lease: ${bad.problem}`.slice(0, 2000),
						}),
					),
				);
			}
			for (const lease of [...batch.leases, ...validations]) {
				if (stopSignal.aborted) {
					// The stop came while this batch was on its way: hand the jobs straight back.
					this.#track(
						this.#report(lease.lease_id, "release", () => api.release(lease.lease_id, "runner shutting down")),
					);
				} else if ("voice_id" in lease) this.#startJob(lease, (job) => this.#runValidation(job, lease));
				else this.#startJob(lease, (job) => this.#runJob(job, lease));
			}
		}
		await Promise.all([...this.#active.values()].map((job) => job.settled));
		await Promise.all(this.#pendingReports);
	}

	#track(report: Promise<unknown>): void {
		this.#pendingReports.add(report);
		void report.finally(() => this.#pendingReports.delete(report));
	}

	#startJob(lease: ActiveJob["lease"], run: (job: ActiveJob) => Promise<void>): void {
		const controller = new AbortController();
		const job: ActiveJob = { lease, controller, progress: undefined, settled: Promise.resolve() };
		this.#active.set(lease.lease_id, job);
		this.#deps.metrics.activeJobs.set(this.#active.size);
		job.settled = run(job).finally(() => {
			this.#active.delete(lease.lease_id);
			this.#deps.metrics.activeJobs.set(this.#active.size);
			this.#slotFreed?.();
		});
	}

	/** A `validate_voice` job: its outcome (ready or failed) is one report; an error is a transient failure. */
	async #runValidation(job: ActiveJob, lease: VoiceValidationLease): Promise<void> {
		const { api, logger, metrics } = this.#deps;
		const log = {
			lease_id: lease.lease_id,
			voice_id: lease.voice_id,
			attempt: lease.attempt,
			job_kind: "validate_voice",
		};
		logger.info("voice validation started", log);
		const heartbeat = this.#startHeartbeats(job);
		let outcome: JobOutcome;
		try {
			if (!this.#deps.validateVoice) throw new Error("this runner does not validate voices");
			const report = await this.#deps.validateVoice(lease, job.controller.signal);
			heartbeat.stop();
			if (job.controller.signal.reason instanceof LeaseLostAbort) throw job.controller.signal.reason;
			const sent = await this.#report(lease.lease_id, "report validation", () =>
				api.reportValidation(lease.lease_id, report),
			);
			outcome = reportedAs(sent, "completed");
			logger.info("voice validation finished", {
				...log,
				outcome: report.outcome,
				...(report.outcome === "failed" ? { problem: report.problem, reason: report.message } : {}),
			});
		} catch (error) {
			heartbeat.stop();
			outcome = await this.#reportFailure(job, error);
			logger.warn("voice validation ended without an outcome", { ...log, outcome, error: describeError(error) });
		}
		metrics.jobs.inc({ engine: "rvc", outcome });
	}

	async #runJob(job: ActiveJob, lease: Lease): Promise<void> {
		const { api, logger, metrics } = this.#deps;
		const { controller } = job;
		const engineName = lease.voice.engine;
		const started = performance.now();
		const log = {
			lease_id: lease.lease_id,
			conversion_id: lease.conversion_id,
			attempt: lease.attempt,
			engine: engineName,
		};
		logger.info("job started", {
			...log,
			preview: lease.use_preview,
			semitones: lease.semitones,
			pitch_shift: lease.pitch_shift,
		});
		const heartbeat = this.#startHeartbeats(job);
		let outcome: JobOutcome;
		try {
			const loaded = this.#deps.engines.get(engineName);
			if (!loaded) throw new Error(`this runner has no ${engineName} engine`);
			const result = await this.#deps.processJob(lease, {
				engine: loaded.engine,
				signal: controller.signal,
				onProgress: (fraction) => {
					job.progress = fraction;
				},
			});
			heartbeat.stop();
			// The output is uploaded: complete it even if the grace period ran out meanwhile. Only a lost lease
			// means someone else owns the job now.
			if (controller.signal.reason instanceof LeaseLostAbort) throw controller.signal.reason;
			const sent = await this.#report(lease.lease_id, "complete", () =>
				api.complete(lease.lease_id, {
					output: {
						size_bytes: result.sizeBytes,
						duration_seconds: result.durationSeconds,
						sample_rate: result.sampleRate,
						channels: result.channels,
					},
					metrics: {
						processing_seconds: result.processingSeconds,
						real_time_factor: result.realTimeFactor,
						execution_provider: loaded.info.executionProvider,
					},
					...(result.pitchShiftApplied ? { pitch_shift_applied: result.pitchShiftApplied } : {}),
				}),
			);
			outcome = reportedAs(sent, "completed");
			if (outcome === "completed") metrics.realTimeFactor.observe({ engine: engineName }, result.realTimeFactor);
			logger.info("job finished", {
				...log,
				outcome,
				pitch_shift_applied: result.pitchShiftApplied,
				rtf: result.realTimeFactor,
				output_seconds: result.durationSeconds,
			});
		} catch (error) {
			heartbeat.stop();
			outcome = await this.#reportFailure(job, error);
			logger[outcome === "released" ? "info" : "warn"]("job ended without output", {
				...log,
				outcome,
				error: describeError(error),
			});
		}
		const seconds = (performance.now() - started) / 1000;
		metrics.jobs.inc({ engine: engineName, outcome });
		metrics.jobDuration.observe({ engine: engineName, outcome }, seconds);
	}

	async #reportFailure(job: ActiveJob, error: unknown): Promise<JobOutcome> {
		const { api } = this.#deps;
		const id = job.lease.lease_id;
		const reason = job.controller.signal.aborted ? job.controller.signal.reason : undefined;
		if (reason instanceof LeaseLostAbort) return "lease_lost";
		if (reason instanceof ShutdownAbort) {
			const sent = await this.#report(id, "release", () => api.release(id, "runner shutting down"));
			return reportedAs(sent, "released");
		}
		const permanent = permanentFailure(error);
		const message = describeError(error).slice(0, 2000);
		const report: FailRequest = permanent
			? { kind: "permanent", reason: permanent.reason, message }
			: { kind: "transient", reason: "internal", message };
		const sent = await this.#report(id, "fail", async () => {
			try {
				await api.fail(id, report);
			} catch (refused) {
				// A Worker older than this runner refuses a reason it does not know (`output_too_large`) as invalid: the
				// failure goes again as `internal`, which every Worker takes, so the job still ends now (unreported, it
				// would wait out its lease on every attempt and end as a worker that stopped responding).
				if (report.reason === "internal" || !refusedAsInvalid(refused)) throw refused;
				await api.fail(id, { ...report, reason: "internal" });
			}
		});
		return reportedAs(sent, permanent ? "failed_permanent" : "failed_transient");
	}

	/**
	 * Heartbeat at once (the lease's acknowledgement, asked for in the lease request: retried every second for a few
	 * seconds, since the broker takes back a lease not acknowledged within 10 s), then at the lease's interval; a
	 * `lease_lost` answer aborts the job. Other errors are retried next tick.
	 */
	#startHeartbeats(job: ActiveJob): { stop(): void } {
		const intervalMs = job.lease.heartbeat_interval_seconds * 1000;
		let inFlight = false;
		let stopped = false;
		/** One heartbeat; false when it failed other than by `lease_lost` (or another was under way). */
		const beat = async (): Promise<boolean> => {
			if (inFlight) return false;
			inFlight = true;
			try {
				await this.#deps.api.heartbeat(job.lease.lease_id, job.progress);
				return true;
			} catch (error) {
				if ((error as ApiError).leaseLost) {
					this.#deps.logger.warn("lease lost; stopping the job", { lease_id: job.lease.lease_id });
					job.controller.abort(new LeaseLostAbort());
					return true;
				}
				this.#deps.metrics.apiErrors.inc({ operation: "heartbeat" });
				this.#deps.logger.warn("heartbeat failed", { lease_id: job.lease.lease_id, error: describeError(error) });
				return false;
			} finally {
				inFlight = false;
			}
		};
		void (async () => {
			const giveUpAt = performance.now() + ACKNOWLEDGE_RETRY_MS;
			while (!(await beat()) && !stopped && performance.now() < giveUpAt) await sleep(1_000);
		})();
		const timer = setInterval(beat, intervalMs);
		return {
			stop: () => {
				stopped = true;
				clearInterval(timer);
			},
		};
	}

	/** Send a final report, retrying transient API errors with backoff. */
	async #report(leaseId: string, operation: string, send: () => Promise<void>): Promise<"sent" | "lost" | "gave_up"> {
		const { logger, metrics } = this.#deps;
		const giveUpAt = performance.now() + this.#options.reportWindowMs;
		for (let attempt = 1; ; attempt++) {
			try {
				await send();
				return "sent";
			} catch (error) {
				const apiError = error as Partial<ApiError>;
				if (apiError.leaseLost) return "lost";
				metrics.apiErrors.inc({ operation });
				const tried = attempt >= this.#options.reportAttempts && performance.now() >= giveUpAt;
				if (!apiError.retryable || tried) {
					logger.error("could not report job; the lease will expire and the job be retried", {
						lease_id: leaseId,
						operation,
						error: describeError(error),
					});
					return "gave_up";
				}
				const { backoff } = this.#options;
				await sleep(backoffDelay(attempt, { ...backoff, maxMs: Math.min(backoff.maxMs, REPORT_RETRY_MAX_MS) }));
			}
		}
	}
}
