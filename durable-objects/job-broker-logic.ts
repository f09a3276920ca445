/**
 * The JobBroker's decisions as pure functions (no storage, no clock of their own), so each rule can be read
 * and tested alone: which jobs a runner gets, how long a lease lasts, and what happens when a lease ends badly.
 */
import { HEARTBEAT_INTERVAL_SECONDS, MAX_ATTEMPTS } from "../src/contracts/broker.ts";
import type { FailureCode } from "../src/conversions/failure-messages.ts";

/** A lease lasts three heartbeat intervals, so one lost heartbeat is not fatal. */
export const LEASE_SECONDS = 3 * HEARTBEAT_INTERVAL_SECONDS;
/** Longest long-poll (the runner contract allows `wait_seconds` up to 25). */
export const MAX_WAIT_SECONDS = 25;
/**
 * A full job waiting this long is served like a preview while its account is not being served (`goesFirst`):
 * previews go first, but a steady stream of them must not starve full conversions forever.
 */
export const PREVIEW_AGING_MS = 5 * 60_000;
/** Finished jobs and ended leases are remembered this long, so duplicates (enqueue, complete) stay harmless. */
export const FINISHED_RETENTION_MS = 24 * 3600_000;

/** A `type`, not an interface, so that it can type rows of the broker's SQL cursor. */
export type CandidateJob = {
	conversion_id: string;
	account_id: string;
	voice_id: string;
	use_preview: number;
	enqueued_at: number;
};

export interface RunnerWants {
	capacity: number;
	loadedVoiceIds: readonly string[];
}

/**
 * An account's share of the runners as the broker sees it: leases it holds now, when it was last granted one, and
 * when a full (not preview) job of it last ran (now while one runs).
 */
export interface AccountShare {
	active: number;
	lastGrantedAt: number;
	lastFullServedAt: number;
}

const NO_SHARE: AccountShare = { active: 0, lastGrantedAt: 0, lastFullServedAt: 0 };

/** A preview, or a full job that has waited past the aging limit: served before the rest of its own account's. */
export const isUrgent = (job: CandidateJob, now: number) =>
	job.use_preview === 1 || job.enqueued_at <= now - PREVIEW_AGING_MS;

/**
 * Served before every account's other jobs: previews, and aged full jobs of an account that is not being served
 * (none of its full jobs ran for as long as the aging limit), so that a stream of previews cannot hold an account's
 * conversions back for ever. An account whose batch is running (or whose last job just ended) does not put its aged
 * jobs ahead of another account's newer ones: those take turns with it.
 */
const goesFirst = (job: CandidateJob, account: AccountShare, now: number) =>
	job.use_preview === 1 || (isUrgent(job, now) && account.lastFullServedAt <= now - PREVIEW_AGING_MS);

/**
 * Picks up to `capacity` jobs, one at a time: previews (and the aged full jobs of an account not being served)
 * before the rest; then the account holding the fewest leases, and of those the one served longest ago, so one
 * account's batch of a thousand jobs does not hold every other account's jobs behind it (each pick counts as a lease
 * of its account for the next); then, within an account, previews and aged jobs, jobs whose voice the runner has
 * loaded (model affinity), then the oldest. Candidates may contain duplicates.
 */
export function selectJobs(
	candidates: readonly CandidateJob[],
	wants: RunnerWants,
	now: number,
	shares: ReadonlyMap<string, AccountShare> = new Map(),
): CandidateJob[] {
	const loaded = new Set(wants.loadedVoiceIds);
	const pool = new Map(candidates.map((job) => [job.conversion_id, job]));
	const share = new Map(shares);
	const rank = (job: CandidateJob) => {
		const account = share.get(job.account_id) ?? NO_SHARE;
		return [
			goesFirst(job, account, now) ? 0 : 1,
			account.active,
			account.lastGrantedAt,
			isUrgent(job, now) ? 0 : 1,
			loaded.has(job.voice_id) ? 0 : 1,
			job.enqueued_at,
		];
	};
	const before = (a: CandidateJob, b: CandidateJob) => {
		const [ra, rb] = [rank(a), rank(b)];
		for (let i = 0; i < ra.length; i++) {
			const d = (ra[i] as number) - (rb[i] as number);
			if (d !== 0) return d < 0;
		}
		return a.conversion_id < b.conversion_id;
	};
	const picked: CandidateJob[] = [];
	while (picked.length < wants.capacity && pool.size > 0) {
		let best: CandidateJob | undefined;
		for (const job of pool.values()) if (!best || before(job, best)) best = job;
		const chosen = best as CandidateJob;
		picked.push(chosen);
		pool.delete(chosen.conversion_id);
		const account = share.get(chosen.account_id) ?? NO_SHARE;
		share.set(chosen.account_id, {
			active: account.active + 1,
			lastGrantedAt: now,
			lastFullServedAt: chosen.use_preview === 1 ? account.lastFullServedAt : now,
		});
	}
	return picked;
}

export type AfterLease =
	| { action: "requeue"; availableAt: number }
	| { action: "fail"; failure: FailureCode; detail: string };

/** A lease expired (the runner stopped heartbeating): try again, unless the job has used all its attempts. */
export function afterLeaseExpired(attempts: number, now: number): AfterLease {
	if (attempts >= MAX_ATTEMPTS) {
		return {
			action: "fail",
			failure: "attempts_exhausted",
			detail: `lease expired on attempt ${attempts} of ${MAX_ATTEMPTS}`,
		};
	}
	return { action: "requeue", availableAt: now };
}

/** Delay before a transiently failed job may be leased again: 5, 10, 20 ... seconds, at most a minute. */
export const transientRetryDelayMs = (attempts: number) => Math.min(60_000, 5_000 * 2 ** Math.max(0, attempts - 1));

/** A runner reported a failure: permanent ones fail at once, transient ones retry until the attempts run out. */
export function afterRunnerFailure(
	attempts: number,
	kind: "transient" | "permanent",
	reason: FailureCode,
	now: number,
): AfterLease {
	if (kind === "permanent") return { action: "fail", failure: reason, detail: "permanent failure reported by runner" };
	if (attempts >= MAX_ATTEMPTS) {
		return { action: "fail", failure: reason, detail: `transient failure on attempt ${attempts} of ${MAX_ATTEMPTS}` };
	}
	return { action: "requeue", availableAt: now + transientRetryDelayMs(attempts) };
}
