/**
 * The contract between the Worker and the `JobBroker` Durable Object: the job a conversion becomes, what a runner
 * asks for, what a lease is, and the constants both sides rely on. Types and constants only, so that the Worker
 * and the broker import it and neither imports the other.
 */
import type { EngineName, JobKind } from "./runner.ts";

/** Leases granted per job before the conversion fails for good. */
export const MAX_ATTEMPTS = 3;
/** Runners heartbeat this often; a lease lasts three intervals, so one lost heartbeat is not fatal. */
export const HEARTBEAT_INTERVAL_SECONDS = 15;

/**
 * A conversion as a job: everything the broker needs to queue, rank and hand it out, and what the lease tells the
 * runner about the job itself. Built once from D1 (`conversion-store.ts`), held by the broker, returned in each
 * lease of the job.
 */
export interface ConversionJob {
	/** `convert` when absent. A `validate_voice` job checks an account's uploaded voice instead. */
	kind?: JobKind;
	/** The job's id: the conversion's, or for `validate_voice` the voice's. */
	conversionId: string;
	accountId: string;
	voiceId: string;
	engine: EngineName;
	/** Convert only the first `PREVIEW_SECONDS` of the source; previews are leased first. */
	usePreview: boolean;
}

/** What a runner asks the broker for (the runner contract's `LeaseRequest`, in the broker's words). */
export interface LeaseWants {
	runnerId: string;
	capacity: number;
	waitSeconds: number;
	loadedVoiceIds: string[];
	engines: string[];
	/** Job kinds the runner takes; `convert` only when absent. */
	kinds?: JobKind[];
	/**
	 * Names this long-poll (a fresh UUID per request), so that the Worker can `cancelWait` it when the runner's
	 * request goes away; the broker cannot see the HTTP client itself.
	 */
	waitId?: string;
	/**
	 * The runner heartbeats each lease as it arrives: a lease without that heartbeat within the broker's window never
	 * reached it, and is given back uncharged.
	 */
	acknowledges?: boolean;
}

export interface GrantedLease {
	leaseId: string;
	/** The job as it was enqueued: the lease tells the runner what to do from this, not from a second read. */
	job: ConversionJob;
	attempt: number;
	/** Epoch milliseconds. */
	expiresAt: number;
}

export type LeaseCheck =
	| { status: "active"; lease: GrantedLease }
	| { status: "ended"; outcome: string; conversionId: string; accountId: string }
	| { status: "unknown" };

/**
 * What the broker knows of a job's life, for the safety net's time limit: a conversion whose runner is alive is
 * never failed by time, and one waiting for a runner is timed from its last sign of life, not from its creation.
 */
export interface JobActivity {
	conversionId: string;
	/** A runner holds the job under a lease that has not expired (its heartbeats arrive), or the broker is failing it. */
	attended: boolean;
	/** Epoch milliseconds of the last sign of life: enqueued, leased, a heartbeat, a lease ended, put back. */
	lastActiveAt: number;
}

export interface BrokerStats {
	waiting: number;
	leased: number;
	failing: number;
	done: number;
	waiters: number;
}
