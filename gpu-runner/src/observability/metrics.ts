/**
 * Prometheus metrics of one runner. Names follow Prometheus conventions (`_total`, `_seconds`). A registry per
 * runner instance (not prom-client's global one) keeps tests independent.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

export type JobOutcome =
	| "completed"
	| "failed_permanent"
	| "failed_transient"
	| "released"
	| "lease_lost"
	/** The final report never reached the Worker (it gave up retrying): the lease expires there. */
	| "not_reported";

export class RunnerMetrics {
	readonly registry = new Registry();
	readonly jobs = new Counter({
		name: "runner_jobs_total",
		help: "Leased jobs by engine and how they ended",
		labelNames: ["engine", "outcome"] as const,
		registers: [this.registry],
	});
	readonly jobDuration = new Histogram({
		name: "runner_job_duration_seconds",
		help: "Wall time from lease to the job's final report",
		labelNames: ["engine", "outcome"] as const,
		buckets: [0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320, 640, 1280],
		registers: [this.registry],
	});
	readonly realTimeFactor = new Histogram({
		name: "runner_real_time_factor",
		help: "Processing seconds per second of audio for completed jobs (below 1 is faster than real time)",
		labelNames: ["engine"] as const,
		buckets: [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5],
		registers: [this.registry],
	});
	readonly leaseWait = new Histogram({
		name: "runner_lease_wait_seconds",
		help: "How long a lease request waited before jobs arrived (idle time with free capacity); queued_at is not in the lease, so the broker's own queue wait is the Worker's metric",
		buckets: [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 20, 25],
		registers: [this.registry],
	});
	readonly activeJobs = new Gauge({
		name: "runner_active_jobs",
		help: "Jobs being processed now",
		registers: [this.registry],
	});
	readonly capacity = new Gauge({
		name: "runner_capacity",
		help: "Jobs this runner may process at once",
		registers: [this.registry],
	});
	readonly apiErrors = new Counter({
		name: "runner_api_errors_total",
		help: "Failed runner API calls by operation",
		labelNames: ["operation"] as const,
		registers: [this.registry],
	});
	readonly engineInfo = new Gauge({
		name: "runner_engine_info",
		help: "Engines loaded and their execution provider (value 1)",
		labelNames: ["engine", "execution_provider"] as const,
		registers: [this.registry],
	});

	constructor(options: { processMetrics?: boolean } = {}) {
		if (options.processMetrics) collectDefaultMetrics({ register: this.registry });
	}
}
