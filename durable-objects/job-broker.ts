/**
 * JobBroker: the one object (`idFromName("global")`) that hands conversion jobs to runners.
 *
 * Storage (this object's SQLite):
 * - `jobs`: one row per conversion id. `state` is `waiting` (leasable once `available_at` is reached),
 *   `leased` (held by `lease_id`), `failing` (its conversion must be failed in D1; retried until that write
 *   succeeds) or `done` (kept for a day so a duplicate enqueue is a no-op). `attempts` counts leases granted.
 * - `leases`: every lease ever granted; `outcome` is null while it is active, then `completed`, `failed`,
 *   `released`, `expired` or `discarded`; `report_digest` is the runner's report for it (`recordReport`, or `fail`
 *   with `fail_decision`, the answer a repeat of that failure gets). Ended leases are kept for a day so a repeated
 *   report is answered.
 * - `output_uploads`: the R2 multipart uploads of outputs that runners started and have not completed or abandoned
 *   yet. One whose lease has ended is aborted here (`#abortAbandonedUploads`): its runner died or lost the lease
 *   mid-upload, and nobody else would ever abort it (R2 keeps an incomplete upload's parts until its lifecycle rule,
 *   7 days by default; a local bucket keeps them for good).
 * - `unused_outputs`: conversion leases that ended other than `completed`. Whatever such a lease uploaded can never
 *   become the conversion's output (only an active lease completes), so its object is removed from R2 at
 *   `remove_after` (retried by the alarm until that works); without this it would stay in storage for ever.
 *
 * Every state change happens inside one synchronous storage transaction, and a Durable Object runs one such
 * piece of code at a time, so a job can never be leased to two runners. Long-polling runners wait in an
 * in-memory list that is served whenever a job becomes available (plus a short timer for jobs that become
 * available with time); the alarm expires leases and retries D1 writes. Decisions live in `job-broker-logic.ts`.
 *
 * A waiter outlives its runner's request unless told otherwise: the broker cannot see the HTTP client. So a
 * long-poll carries a `waitId`, and the lease route calls `cancelWait` when its client goes away; the waiter then
 * ends with nothing, and what was granted under that id a moment earlier is given back without an attempt, so the
 * next job goes to a live runner instead of waiting out a lease nobody holds. A runner that says it acknowledges
 * (`LeaseWants.acknowledges`) heartbeats each lease the moment it arrives; one of its leases without that
 * heartbeat after `ACK_WINDOW_MS` never reached it (the runner died mid-poll, and the disconnect was not seen: local
 * workerd never reports it, a proxy can hide it), and is given back the same way, uncharged.
 */
import { DurableObject } from "cloudflare:workers";
import type {
	BrokerStats,
	ConversionJob,
	GrantedLease,
	JobActivity,
	LeaseCheck,
	LeaseWants,
} from "../src/contracts/broker.ts";
import type { EngineName, JobKind } from "../src/contracts/runner.ts";
import { type FailureCode, failure } from "../src/conversions/failure-messages.ts";
import { isNoSuchUpload, outputObjectKey, UNUSED_OUTPUT_GRACE_MS } from "../src/conversions/outputs.ts";
import { failConversion } from "../src/conversions/state-machine.ts";
import { failValidation } from "../src/voices/voice-validation.ts";
import {
	type AccountShare,
	afterLeaseExpired,
	afterRunnerFailure,
	type CandidateJob,
	FINISHED_RETENTION_MS,
	LEASE_SECONDS,
	MAX_WAIT_SECONDS,
	PREVIEW_AGING_MS,
	selectJobs,
} from "./job-broker-logic.ts";

/** A waiting job a grant may give this runner: available now (`?3`), of an engine (`?4`) and kind (`?5`) it takes. */
const LEASABLE = `available_at <= ?3 AND engine IN (SELECT value FROM json_each(?4))
	AND kind IN (SELECT value FROM json_each(?5))`;

/** How often a waiting runner re-checks on its own (jobs that become available with time, not by an event). */
const WAITER_POLL_MS = 1_000;
/** How soon the alarm retries a failed D1 write for a `failing` job, or a failed removal of unused outputs. */
const SETTLE_RETRY_MS = 5_000;
/**
 * How long the leases granted under a `waitId` can be given back by `cancelWait`. The route cancels only until it
 * has answered its runner, moments after the broker's answer, so this only has to outlast that (an answer lost
 * with a request that went away meanwhile would otherwise wait out the lease expiry, one attempt charged).
 */
const CANCELLABLE_GRANT_MS = 10_000;
/**
 * How long a lease granted to an acknowledging runner waits for its first heartbeat before it is taken to have never
 * arrived. The runner sends it as the lease arrives; this leaves room for a slow network and a busy runner.
 */
export const ACK_WINDOW_MS = 10_000;
/** The recorded output uploads whose lease has ended (or is forgotten): nobody will complete them. */
const ABANDONED_UPLOADS = `FROM output_uploads u LEFT JOIN leases l ON l.lease_id = u.lease_id
	WHERE l.outcome IS NOT NULL OR l.lease_id IS NULL`;

interface Waiter {
	wants: LeaseWants;
	settle(leases: GrantedLease[]): void;
}

type LeaseRow = {
	lease_id: string;
	conversion_id: string;
	account_id: string;
	attempt: number;
	expires_at: number;
	outcome: string | null;
	report_digest: string | null;
	fail_decision: string | null;
};

/** A job as stored: SQLite has no booleans, so `use_preview` is 0 or 1 here and nowhere else. */
type JobRow = {
	conversion_id: string;
	account_id: string;
	voice_id: string;
	engine: EngineName;
	use_preview: number;
	kind: JobKind;
};

/** The job as it was enqueued: `kind` only for jobs other than conversions (absent means `convert`). */
const jobOf = (row: JobRow): ConversionJob => ({
	...(row.kind === "convert" ? {} : { kind: row.kind }),
	conversionId: row.conversion_id,
	accountId: row.account_id,
	voiceId: row.voice_id,
	engine: row.engine,
	usePreview: row.use_preview === 1,
});

export class JobBroker extends DurableObject<Env> {
	/** The broker's clock. Tests replace it (through `runInDurableObject`) to step lease expiry without sleeping. */
	clock: () => number = () => Date.now();
	readonly #waiters: Waiter[] = [];
	/** Leases recently granted to each `waitId`, for `cancelWait` (the answer may be lost with the request). */
	readonly #grantsByWait = new Map<string, string[]>();
	readonly #sql: SqlStorage;

	constructor(ctx: DurableObjectState, env: Env) {
		super(ctx, env);
		this.#sql = ctx.storage.sql;
		this.#sql.exec(`
			CREATE TABLE IF NOT EXISTS jobs (
				conversion_id TEXT PRIMARY KEY,
				account_id TEXT NOT NULL,
				voice_id TEXT NOT NULL,
				engine TEXT NOT NULL,
				use_preview INTEGER NOT NULL,
				state TEXT NOT NULL,
				attempts INTEGER NOT NULL DEFAULT 0,
				enqueued_at INTEGER NOT NULL,
				available_at INTEGER NOT NULL,
				lease_id TEXT,
				failure_code TEXT,
				failure_detail TEXT,
				updated_at INTEGER NOT NULL
			);
			CREATE TABLE IF NOT EXISTS leases (
				lease_id TEXT PRIMARY KEY,
				conversion_id TEXT NOT NULL,
				account_id TEXT NOT NULL,
				runner_id TEXT NOT NULL,
				attempt INTEGER NOT NULL,
				granted_at INTEGER NOT NULL,
				expires_at INTEGER NOT NULL,
				heartbeat_at INTEGER,
				ended_at INTEGER,
				outcome TEXT
			);
			CREATE INDEX IF NOT EXISTS leases_active ON leases (outcome, expires_at);
			CREATE INDEX IF NOT EXISTS leases_by_account ON leases (account_id, granted_at);
			CREATE TABLE IF NOT EXISTS output_uploads (
				upload_id TEXT PRIMARY KEY,
				lease_id TEXT NOT NULL,
				object_key TEXT NOT NULL
			);
			CREATE TABLE IF NOT EXISTS unused_outputs (
				lease_id TEXT PRIMARY KEY,
				conversion_id TEXT NOT NULL,
				account_id TEXT NOT NULL,
				remove_after INTEGER NOT NULL
			);
		`);
		// `kind` came with voice validation; jobs stored before it are conversions.
		const columns = this.#sql.exec<{ name: string }>("PRAGMA table_info(jobs)").toArray();
		if (!columns.some((column) => column.name === "kind")) {
			this.#sql.exec("ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'convert'");
		}
		// `ack_by` came with acknowledging runners; leases granted before it wait for their expiry, as they did.
		const leaseColumns = this.#sql.exec<{ name: string }>("PRAGMA table_info(leases)").toArray();
		if (!leaseColumns.some((column) => column.name === "ack_by")) {
			this.#sql.exec("ALTER TABLE leases ADD COLUMN ack_by INTEGER");
		}
		// `use_preview` came with aging by account (`selectJobs`); leases granted before it count as neither kind.
		if (!leaseColumns.some((column) => column.name === "use_preview")) {
			this.#sql.exec("ALTER TABLE leases ADD COLUMN use_preview INTEGER");
		}
		// `report_digest` came with repeatable reports; a lease completed before it answers any repeat, as it did.
		if (!leaseColumns.some((column) => column.name === "report_digest")) {
			this.#sql.exec("ALTER TABLE leases ADD COLUMN report_digest TEXT");
		}
		// `fail_decision` came with repeatable failure reports; a lease failed before it answers a repeat as lost, as it did.
		if (!leaseColumns.some((column) => column.name === "fail_decision")) {
			this.#sql.exec("ALTER TABLE leases ADD COLUMN fail_decision TEXT");
		}
		// For each grant's account shares (`#shares`): a lookup per account, not a pass over its day of leases.
		this.#sql.exec("CREATE INDEX IF NOT EXISTS leases_by_account_kind ON leases (account_id, use_preview, ended_at)");
		// For each grant's candidates (`#grant`): the accounts with waiting jobs (of a voice), and the oldest waiting jobs
		// of an account and kind (and voice), read in order, not every waiting job ranked. For the alarm each grant sets
		// (`#arm`): the next delayed job, and the oldest finished one, looked up rather than found among them all.
		this.#sql.exec(`
			CREATE INDEX IF NOT EXISTS jobs_waiting_by_account
			  ON jobs (state, account_id, use_preview, enqueued_at, conversion_id);
			CREATE INDEX IF NOT EXISTS jobs_waiting_by_voice
			  ON jobs (state, voice_id, account_id, use_preview, enqueued_at, conversion_id);
			CREATE INDEX IF NOT EXISTS jobs_by_state_available ON jobs (state, available_at);
			CREATE INDEX IF NOT EXISTS jobs_by_state_updated ON jobs (state, updated_at);
		`);
		// `jobs_by_state` (state, use_preview, enqueued_at) served the grant before it read its candidates through the
		// indexes above; no query uses it since, and every job written kept it up to date for nothing.
		this.#sql.exec("DROP INDEX IF EXISTS jobs_by_state");
	}

	/** Adds a job; idempotent by conversion id (a job the broker has or had recently is left as it is). */
	async enqueue(job: ConversionJob): Promise<"added" | "exists"> {
		const now = this.clock();
		const inserted = this.#sql
			.exec(
				`INSERT INTO jobs (conversion_id, account_id, voice_id, engine, use_preview, state, attempts, enqueued_at,
				 available_at, updated_at, kind) VALUES (?, ?, ?, ?, ?, 'waiting', 0, ?, ?, ?, ?)
				 ON CONFLICT (conversion_id) DO NOTHING RETURNING conversion_id`,
				job.conversionId,
				job.accountId,
				job.voiceId,
				job.engine,
				job.usePreview ? 1 : 0,
				now,
				now,
				now,
				job.kind ?? "convert",
			)
			.toArray();
		if (inserted.length === 0) return "exists";
		this.#serveWaiters();
		return "added";
	}

	/**
	 * Leases up to `capacity` jobs; when none is ready, waits up to `waitSeconds` for one to arrive. A `waitId`
	 * lets the caller end the wait early with `cancelWait` (its client went away).
	 */
	async lease(wants: LeaseWants): Promise<GrantedLease[]> {
		const granted = this.#grant(wants);
		const waitMs = Math.min(MAX_WAIT_SECONDS, Math.max(0, wants.waitSeconds)) * 1000;
		if (granted.length > 0 || waitMs === 0) {
			if (granted.length > 0) {
				this.#rememberGrants(wants.waitId, granted);
				await this.#arm();
			}
			return granted;
		}
		return new Promise<GrantedLease[]>((resolve) => {
			const timers: ReturnType<typeof setTimeout>[] = [];
			const waiter: Waiter = {
				wants,
				settle: (leases) => {
					const index = this.#waiters.indexOf(waiter);
					if (index >= 0) this.#waiters.splice(index, 1);
					for (const timer of timers) clearTimeout(timer);
					clearInterval(poll);
					if (leases.length > 0) {
						this.#rememberGrants(wants.waitId, leases);
						this.#arm().catch((error) => this.#log("error", "arming alarm failed", { error }));
					}
					resolve(leases);
				},
			};
			timers.push(setTimeout(() => waiter.settle([]), waitMs));
			const poll = setInterval(() => this.#serve(waiter), WAITER_POLL_MS);
			this.#waiters.push(waiter);
		});
	}

	/**
	 * The request that leased under `waitId` is gone (its runner died or stopped mid-poll): a waiter still waiting
	 * ends at once with nothing, so it takes no later job, and leases granted to it just before are released, with
	 * no attempt charged, since no runner received them. Answers how many leases it gave back.
	 */
	async cancelWait(waitId: string): Promise<{ waiting: boolean; released: number }> {
		const waiter = this.#waiters.find((candidate) => candidate.wants.waitId === waitId);
		waiter?.settle([]);
		const leaseIds = this.#grantsByWait.get(waitId) ?? [];
		this.#grantsByWait.delete(waitId);
		let released = 0;
		for (const leaseId of leaseIds) if (await this.release(leaseId)) released++;
		return { waiting: waiter !== undefined, released };
	}

	/** Extends an active lease; null when the lease is gone (the runner must stop: `lease_lost`). */
	async heartbeat(leaseId: string): Promise<{ expiresAt: number } | null> {
		const now = this.clock();
		const expiresAt = now + LEASE_SECONDS * 1000;
		const updated = this.#sql
			.exec(
				"UPDATE leases SET expires_at = ?, heartbeat_at = ? WHERE lease_id = ? AND outcome IS NULL RETURNING lease_id",
				expiresAt,
				now,
				leaseId,
			)
			.toArray();
		return updated.length === 1 ? { expiresAt } : null;
	}

	checkLease(leaseId: string): LeaseCheck {
		const row = this.#leaseRow(leaseId);
		if (!row) return { status: "unknown" };
		if (row.outcome !== null) {
			return { status: "ended", outcome: row.outcome, conversionId: row.conversion_id, accountId: row.account_id };
		}
		const job = this.#sql
			.exec<JobRow>(
				"SELECT conversion_id, account_id, voice_id, engine, use_preview, kind FROM jobs WHERE conversion_id = ?",
				row.conversion_id,
			)
			.one();
		return {
			status: "active",
			lease: { leaseId: row.lease_id, job: jobOf(job), attempt: row.attempt, expiresAt: row.expires_at },
		};
	}

	/**
	 * Records an output upload the runner of `leaseId` started, so that it is aborted if the lease ends before the
	 * upload is completed or abandoned. False (nothing recorded) when the lease is no longer active: the caller aborts.
	 */
	trackOutputUpload(leaseId: string, uploadId: string, objectKey: string): boolean {
		return this.ctx.storage.transactionSync(() => {
			if (this.#leaseRow(leaseId)?.outcome !== null) return false;
			this.#sql.exec(
				"INSERT OR IGNORE INTO output_uploads (upload_id, lease_id, object_key) VALUES (?, ?, ?)",
				uploadId,
				leaseId,
				objectKey,
			);
			return true;
		});
	}

	/** The lease's upload was completed or abandoned by its runner: nothing is left to abort. */
	untrackOutputUpload(leaseId: string, uploadId: string): void {
		this.#sql.exec("DELETE FROM output_uploads WHERE upload_id = ? AND lease_id = ?", uploadId, leaseId);
	}

	/**
	 * Records the digest of the report (a completion, a validation outcome) a runner makes for a lease, before the
	 * Worker applies it: `first` for the first report, `same` for a repeat of it (a runner retrying after it lost the
	 * answer, even while the first is still being applied), `different` for another report after it, which is not
	 * taken. `lost` when the lease is unknown, or ended without a report (expired, released, failed, discarded).
	 */
	recordReport(leaseId: string, digest: string): "first" | "same" | "different" | "lost" {
		return this.ctx.storage.transactionSync(() => {
			const row = this.#sql
				.exec<{ outcome: string | null; report_digest: string | null }>(
					"SELECT outcome, report_digest FROM leases WHERE lease_id = ?",
					leaseId,
				)
				.toArray()[0];
			if (!row) return "lost";
			if (row.report_digest !== null) return row.report_digest === digest ? "same" : "different";
			// Completed before digests were recorded: a repeat is answered as one, as it was then.
			if (row.outcome === "completed") return "same";
			if (row.outcome !== null) return "lost";
			this.#sql.exec("UPDATE leases SET report_digest = ? WHERE lease_id = ?", digest, leaseId);
			return "first";
		});
	}

	/** Ends an active lease as completed (the conversion is already `completed` in D1). Repeats are answered true. */
	complete(leaseId: string): boolean {
		const now = this.clock();
		return this.ctx.storage.transactionSync(() => {
			const row = this.#leaseRow(leaseId);
			if (!row) return false;
			if (row.outcome === "completed") return true;
			if (row.outcome !== null) return false;
			this.#endLease(leaseId, "completed", now);
			this.#sql.exec(
				"UPDATE jobs SET state = 'done', lease_id = NULL, updated_at = ? WHERE conversion_id = ?",
				now,
				row.conversion_id,
			);
			return true;
		});
	}

	/**
	 * A runner failed its job. Transient failures go back to the queue after a delay until the attempts run out;
	 * permanent ones (and exhausted ones) fail the conversion in D1 with the client-facing message for `reason`.
	 * `digest` names the report (`reportDigest` of its body): the same report again (its runner lost the answer) is
	 * answered with the decision taken for it, and changes nothing; null when the lease is no longer active otherwise.
	 */
	async fail(
		leaseId: string,
		report: { kind: "transient" | "permanent"; reason: FailureCode; message: string; reportedReason?: string },
		digest?: string,
	): Promise<{ decision: "requeued" | "failed" } | null> {
		const now = this.clock();
		const decision = this.ctx.storage.transactionSync(() => {
			const row = this.#leaseRow(leaseId);
			if (!row) return null;
			if (row.outcome !== null) {
				const repeated = row.outcome === "failed" && digest !== undefined && row.report_digest === digest;
				return repeated && row.fail_decision ? { repeat: row.fail_decision as "requeued" | "failed" } : null;
			}
			this.#endLease(leaseId, "failed", now);
			const attempts = this.#attempts(row.conversion_id);
			const next = afterRunnerFailure(attempts, report.kind, report.reason, now);
			this.#apply(row.conversion_id, next, now);
			this.#sql.exec(
				"UPDATE leases SET report_digest = ?, fail_decision = ? WHERE lease_id = ?",
				digest ?? null,
				next.action === "requeue" ? "requeued" : "failed",
				leaseId,
			);
			return next;
		});
		if (!decision) return null;
		if ("repeat" in decision) return { decision: decision.repeat };
		this.#log("warn", "runner reported a failure", {
			lease_id: leaseId,
			kind: report.kind,
			reason: report.reason,
			...(report.reportedReason ? { reported_reason: report.reportedReason } : {}),
			detail: report.message,
			decision: decision.action,
		});
		await this.#afterChange();
		return { decision: decision.action === "requeue" ? "requeued" : "failed" };
	}

	/** Gives a job back unfinished (runner shutting down): no attempt is charged, and it is leasable at once. */
	/**
	 * A runner gives its job back unfinished. True once it is back (or was given back by this lease before: a runner
	 * repeating the release after its answer was lost is told the same, and nothing changes again); false for a lease
	 * unknown or ended otherwise.
	 */
	async release(leaseId: string): Promise<boolean> {
		const now = this.clock();
		const released = this.ctx.storage.transactionSync(() => this.#giveBack(leaseId, now));
		if (released) await this.#afterChange();
		return released || this.#leaseRow(leaseId)?.outcome === "released";
	}

	/** Ends an active lease as released and puts its job back, uncharged (inside a transaction). */
	#giveBack(leaseId: string, now: number): boolean {
		const row = this.#leaseRow(leaseId);
		if (!row || row.outcome !== null) return false;
		this.#endLease(leaseId, "released", now);
		this.#sql.exec(
			`UPDATE jobs SET state = 'waiting', lease_id = NULL, attempts = MAX(0, attempts - 1), available_at = ?,
			 updated_at = ? WHERE conversion_id = ? AND state = 'leased'`,
			now,
			now,
			row.conversion_id,
		);
		return true;
	}

	/** Drops jobs whose conversions ended elsewhere (terminal in D1, failed by the safety net); ends their leases. */
	async discard(conversionIds: string[]): Promise<number> {
		const now = this.clock();
		const discarded = this.ctx.storage.transactionSync(() => {
			let count = 0;
			for (const id of conversionIds) {
				const job = this.#sql
					.exec<{ lease_id: string | null; state: string }>(
						"SELECT lease_id, state FROM jobs WHERE conversion_id = ?",
						id,
					)
					.toArray()[0];
				if (!job || job.state === "done") continue;
				if (job.lease_id) this.#endLease(job.lease_id, "discarded", now);
				this.#sql.exec(
					"UPDATE jobs SET state = 'done', lease_id = NULL, updated_at = ? WHERE conversion_id = ?",
					now,
					id,
				);
				count++;
			}
			return count;
		});
		// The ended leases' outputs go after their grace (`UNUSED_OUTPUT_GRACE_MS`), when the alarm fires.
		await this.#arm();
		return discarded;
	}

	/** Which of these conversions the broker currently holds (waiting, leased or failing). */
	knownJobs(conversionIds: string[]): string[] {
		if (conversionIds.length === 0) return [];
		return this.#sql
			.exec<{ conversion_id: string }>(
				"SELECT conversion_id FROM jobs WHERE state != 'done' AND conversion_id IN (SELECT value FROM json_each(?))",
				JSON.stringify(conversionIds),
			)
			.toArray()
			.map((row) => row.conversion_id);
	}

	/**
	 * The activity of these conversions' jobs (those it holds or finished recently). A lease counts as alive until
	 * its expiry even if the sweep has not ended it yet; a `failing` job is the broker's to fail, so it is attended.
	 */
	activity(conversionIds: string[]): JobActivity[] {
		if (conversionIds.length === 0) return [];
		return this.#sql
			.exec<{ conversion_id: string; attended: number; last_active_at: number }>(
				`SELECT j.conversion_id,
				   (j.state = 'failing' OR (l.lease_id IS NOT NULL AND l.outcome IS NULL AND l.expires_at > ?)) AS attended,
				   MAX(j.updated_at, COALESCE(l.heartbeat_at, 0)) AS last_active_at
				 FROM jobs j LEFT JOIN leases l ON l.lease_id = j.lease_id
				 WHERE j.conversion_id IN (SELECT value FROM json_each(?))`,
				this.clock(),
				JSON.stringify(conversionIds),
			)
			.toArray()
			.map((row) => ({
				conversionId: row.conversion_id,
				attended: row.attended === 1,
				lastActiveAt: row.last_active_at,
			}));
	}

	stats(): BrokerStats {
		const counts = Object.fromEntries(
			this.#sql
				.exec<{ state: string; n: number }>("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")
				.toArray()
				.map((row) => [row.state, row.n]),
		);
		return {
			waiting: counts.waiting ?? 0,
			leased: counts.leased ?? 0,
			failing: counts.failing ?? 0,
			done: counts.done ?? 0,
			waiters: this.#waiters.length,
		};
	}

	/**
	 * Gives back, uncharged, the leases an acknowledging runner never acknowledged; expires overdue leases; settles
	 * failing jobs; forgets old finished ones. Run by the alarm (and the cron).
	 */
	async sweep(): Promise<{ expired: number; requeued: number; failed: number; unacknowledged: number }> {
		const now = this.clock();
		const report = this.ctx.storage.transactionSync(() => {
			const unacknowledged = this.#sql
				.exec<{ lease_id: string }>(
					`SELECT lease_id FROM leases
					 WHERE outcome IS NULL AND ack_by IS NOT NULL AND ack_by <= ? AND heartbeat_at IS NULL`,
					now,
				)
				.toArray()
				.filter((lease) => this.#giveBack(lease.lease_id, now)).length;
			const overdue = this.#sql
				.exec<Omit<LeaseRow, "report_digest" | "fail_decision">>(
					`SELECT l.lease_id, l.conversion_id, l.account_id, l.attempt, l.expires_at, l.outcome
					 FROM leases l WHERE l.outcome IS NULL AND l.expires_at <= ?`,
					now,
				)
				.toArray();
			let requeued = 0;
			let failed = 0;
			for (const lease of overdue) {
				this.#endLease(lease.lease_id, "expired", now);
				const next = afterLeaseExpired(this.#attempts(lease.conversion_id), now);
				this.#apply(lease.conversion_id, next, now);
				if (next.action === "requeue") requeued++;
				else failed++;
			}
			const forgetBefore = now - FINISHED_RETENTION_MS;
			this.#sql.exec("DELETE FROM jobs WHERE state = 'done' AND updated_at < ?", forgetBefore);
			this.#sql.exec("DELETE FROM leases WHERE outcome IS NOT NULL AND ended_at < ?", forgetBefore);
			return { expired: overdue.length, requeued, failed, unacknowledged };
		});
		if (report.expired > 0) this.#log("warn", "leases expired", report);
		if (report.unacknowledged > 0) this.#log("warn", "leases never acknowledged, given back", report);
		await this.#afterChange();
		return report;
	}

	override async alarm(): Promise<void> {
		await this.sweep();
	}

	// --- private ---

	#grant(wants: LeaseWants): GrantedLease[] {
		const now = this.clock();
		return this.ctx.storage.transactionSync(() => {
			// Within an account, `selectJobs` ranks previews and full jobs each by urgency, affinity and age, and merges
			// the two (urgency first, or previews first once the account is being served), so its picks from an account
			// are among the best `capacity` of each kind by that order.
			//
			// Those are found without ranking every waiting job: urgency is age (a full job is urgent once it waited past
			// the aging limit, a preview always), so each of the best `capacity` is among the oldest `capacity` of its
			// account and kind, or, for a voice the runner has loaded, among the oldest `capacity` of that voice there.
			// The accounts with waiting jobs (and those of each loaded voice) are found by stepping from one to the next
			// along an index, each list is read in order from one (`jobs_waiting_by_account`, `jobs_waiting_by_voice`),
			// and only their union is ranked: a few rows per account and kind, however many jobs wait.
			const candidates = this.#sql
				.exec<CandidateJob>(
					`WITH RECURSIVE
					   accounts(id) AS (
					     SELECT MIN(account_id) FROM jobs INDEXED BY jobs_waiting_by_account WHERE state = 'waiting'
					     UNION ALL
					     SELECT (SELECT MIN(account_id) FROM jobs INDEXED BY jobs_waiting_by_account
					       WHERE state = 'waiting' AND account_id > a.id)
					     FROM accounts a WHERE a.id IS NOT NULL),
					   loaded(voice_id, account_id) AS (
					     SELECT v.value, (SELECT MIN(account_id) FROM jobs INDEXED BY jobs_waiting_by_voice
					       WHERE state = 'waiting' AND voice_id = v.value)
					     FROM json_each(?2) v
					     UNION ALL
					     SELECT l.voice_id, (SELECT MIN(account_id) FROM jobs INDEXED BY jobs_waiting_by_voice
					       WHERE state = 'waiting' AND voice_id = l.voice_id AND account_id > l.account_id)
					     FROM loaded l WHERE l.account_id IS NOT NULL),
					   kinds(use_preview) AS (VALUES (0), (1))
					 SELECT conversion_id, account_id, voice_id, use_preview, enqueued_at FROM (
					   SELECT conversion_id, account_id, voice_id, use_preview, enqueued_at, ROW_NUMBER() OVER (
					     PARTITION BY account_id, use_preview ORDER BY (use_preview = 1 OR enqueued_at <= ?1) DESC,
					     voice_id IN (SELECT value FROM json_each(?2)) DESC, enqueued_at ASC, conversion_id ASC) AS nth
					   FROM jobs WHERE conversion_id IN (
					     SELECT j.conversion_id FROM accounts a CROSS JOIN kinds k CROSS JOIN jobs j
					     WHERE a.id IS NOT NULL AND j.conversion_id IN (
					       SELECT conversion_id FROM jobs INDEXED BY jobs_waiting_by_account
					       WHERE state = 'waiting' AND account_id = a.id AND use_preview = k.use_preview AND ${LEASABLE}
					       ORDER BY enqueued_at, conversion_id LIMIT ?6)
					     UNION ALL
					     SELECT j.conversion_id FROM loaded l CROSS JOIN kinds k CROSS JOIN jobs j
					     WHERE l.account_id IS NOT NULL AND j.conversion_id IN (
					       SELECT conversion_id FROM jobs INDEXED BY jobs_waiting_by_voice
					       WHERE state = 'waiting' AND voice_id = l.voice_id AND account_id = l.account_id
					       AND use_preview = k.use_preview AND ${LEASABLE} ORDER BY enqueued_at, conversion_id LIMIT ?6)
					   )
					 ) WHERE nth <= ?6`,
					now - PREVIEW_AGING_MS,
					JSON.stringify(wants.loadedVoiceIds),
					now,
					JSON.stringify(wants.engines),
					JSON.stringify(wants.kinds ?? ["convert"]),
					wants.capacity,
				)
				.toArray();
			const shares = this.#shares([...new Set(candidates.map((job) => job.account_id))], now);
			const expiresAt = now + LEASE_SECONDS * 1000;
			return selectJobs(candidates, wants, now, shares).map((job) => {
				const leaseId = crypto.randomUUID();
				const updated = this.#sql
					.exec<JobRow & { attempts: number }>(
						`UPDATE jobs SET state = 'leased', lease_id = ?, attempts = attempts + 1, updated_at = ?
						 WHERE conversion_id = ? AND state = 'waiting'
						 RETURNING conversion_id, account_id, voice_id, engine, use_preview, kind, attempts`,
						leaseId,
						now,
						job.conversion_id,
					)
					.one();
				this.#sql.exec(
					`INSERT INTO leases (lease_id, conversion_id, account_id, runner_id, attempt, granted_at, expires_at, ack_by,
					 use_preview) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
					leaseId,
					job.conversion_id,
					updated.account_id,
					wants.runnerId,
					updated.attempts,
					now,
					expiresAt,
					wants.acknowledges ? now + ACK_WINDOW_MS : null,
					updated.use_preview,
				);
				return { leaseId, job: jobOf(updated), attempt: updated.attempts, expiresAt };
			});
		});
	}

	/**
	 * The share of each account (`AccountShare`). The leases table keeps a day of ended leases, so each figure is read
	 * through an index: the running leases (few), and per account its latest grant and latest ended full job.
	 */
	#shares(accountIds: string[], now: number): Map<string, AccountShare> {
		if (accountIds.length === 0) return new Map();
		const running = new Map(
			this.#sql
				.exec<{ account_id: string; active: number; full: number }>(
					`SELECT account_id, COUNT(*) AS active, SUM(use_preview = 0) AS full FROM leases WHERE outcome IS NULL
					 GROUP BY account_id`,
				)
				.toArray()
				.map((row) => [row.account_id, row]),
		);
		const latest = this.#sql
			.exec<{ account_id: string; last_granted_at: number | null; last_full_ended_at: number | null }>(
				`SELECT a.value AS account_id,
				   (SELECT MAX(granted_at) FROM leases WHERE account_id = a.value) AS last_granted_at,
				   (SELECT MAX(ended_at) FROM leases WHERE account_id = a.value AND use_preview = 0) AS last_full_ended_at
				 FROM json_each(?) a`,
				JSON.stringify(accountIds),
			)
			.toArray();
		return new Map(
			latest.map((row) => {
				const held = running.get(row.account_id);
				return [
					row.account_id,
					{
						active: held?.active ?? 0,
						lastGrantedAt: row.last_granted_at ?? 0,
						// A full job running now was served now.
						lastFullServedAt: (held?.full ?? 0) > 0 ? now : (row.last_full_ended_at ?? 0),
					},
				];
			}),
		);
	}

	#rememberGrants(waitId: string | undefined, leases: GrantedLease[]): void {
		if (waitId === undefined) return;
		this.#grantsByWait.set(waitId, [...(this.#grantsByWait.get(waitId) ?? []), ...leases.map((l) => l.leaseId)]);
		setTimeout(() => this.#grantsByWait.delete(waitId), CANCELLABLE_GRANT_MS);
	}

	#serve(waiter: Waiter): void {
		const granted = this.#grant(waiter.wants);
		if (granted.length > 0) waiter.settle(granted);
	}

	/** Offers available jobs to waiting runners, longest-waiting first. */
	#serveWaiters(): void {
		for (const waiter of [...this.#waiters]) this.#serve(waiter);
	}

	#apply(conversionId: string, next: ReturnType<typeof afterLeaseExpired>, now: number): void {
		if (next.action === "requeue") {
			this.#sql.exec(
				"UPDATE jobs SET state = 'waiting', lease_id = NULL, available_at = ?, updated_at = ? WHERE conversion_id = ?",
				next.availableAt,
				now,
				conversionId,
			);
		} else {
			this.#sql.exec(
				`UPDATE jobs SET state = 'failing', lease_id = NULL, failure_code = ?, failure_detail = ?, updated_at = ?
				 WHERE conversion_id = ?`,
				next.failure,
				next.detail,
				now,
				conversionId,
			);
		}
	}

	/**
	 * After jobs changed: remove the outputs of leases that ended without completing (after their grace), write
	 * pending conversion failures to D1, serve waiters, abort the output uploads of ended leases, and re-arm the alarm.
	 */
	async #afterChange(): Promise<void> {
		await this.#removeUnusedOutputs();
		await this.#settleFailing();
		this.#serveWaiters();
		await this.#abortAbandonedUploads();
		await this.#arm();
	}

	/**
	 * Aborts the output uploads still recorded for leases that have ended (their parts go with them). An abort that
	 * fails stays recorded and is tried again at the alarm; one R2 no longer knows (completed just before its lease
	 * ended, or aborted by its runner) is done.
	 */
	async #abortAbandonedUploads(): Promise<void> {
		const abandoned = this.#sql
			.exec<{ upload_id: string; lease_id: string; object_key: string }>(
				`SELECT u.upload_id, u.lease_id, u.object_key ${ABANDONED_UPLOADS}`,
			)
			.toArray();
		for (const upload of abandoned) {
			try {
				await this.env.BUCKET.resumeMultipartUpload(upload.object_key, upload.upload_id)
					.abort()
					.catch((error: unknown) => {
						if (!isNoSuchUpload(error)) throw error;
					});
				this.untrackOutputUpload(upload.lease_id, upload.upload_id);
			} catch (error) {
				this.#log("error", "could not abort an abandoned output upload; will retry", {
					upload_id: upload.upload_id,
					error: error instanceof Error ? error.message : String(error),
				});
			}
		}
	}

	/** Fails in D1 the conversions of `failing` jobs; a job stays `failing` (retried by the alarm) until that works. */
	async #settleFailing(): Promise<void> {
		const failing = this.#sql
			.exec<{ conversion_id: string; failure_code: FailureCode; failure_detail: string | null; kind: JobKind }>(
				"SELECT conversion_id, failure_code, failure_detail, kind FROM jobs WHERE state = 'failing'",
			)
			.toArray();
		for (const job of failing) {
			try {
				if (job.kind === "validate_voice") {
					// Problems in the voice's files are reports, not job failures: this one is the service's own.
					await failValidation(
						this.env,
						job.conversion_id,
						`the service's check of it failed on our side, not because of its files (${job.failure_detail})`,
					);
				} else await failConversion(this.env, job.conversion_id, failure(job.failure_code));
				this.#log("warn", "conversion failed", {
					conversion_id: job.conversion_id,
					code: job.failure_code,
					detail: job.failure_detail,
				});
				this.#sql.exec(
					"UPDATE jobs SET state = 'done', updated_at = ? WHERE conversion_id = ? AND state = 'failing'",
					this.clock(),
					job.conversion_id,
				);
			} catch (error) {
				this.#log("error", "could not record a conversion failure; will retry", {
					conversion_id: job.conversion_id,
					error: error instanceof Error ? error.message : String(error),
				});
			}
		}
	}

	/**
	 * Removes from R2 the outputs of conversion leases that ended without completing (`unused_outputs`) once their
	 * grace is over; what cannot be removed now stays listed, and the alarm tries again.
	 */
	async #removeUnusedOutputs(): Promise<void> {
		const now = this.clock();
		const rows = this.#sql
			.exec<{ lease_id: string; conversion_id: string; account_id: string }>(
				"SELECT lease_id, conversion_id, account_id FROM unused_outputs WHERE remove_after <= ? LIMIT 500",
				now,
			)
			.toArray();
		if (rows.length === 0) return;
		try {
			// A lease can end after its complete was recorded in D1 (the broker's part of it failed or came late): then
			// its output is the conversion's, and stays.
			const kept = await this.env.DB.prepare(
				"SELECT output_key FROM voice_conversions WHERE id IN (SELECT value FROM json_each(?)) AND output_key IS NOT NULL",
			)
				.bind(JSON.stringify([...new Set(rows.map((row) => row.conversion_id))]))
				.all<{ output_key: string }>();
			const used = new Set(kept.results.map((row) => row.output_key));
			const keys = rows
				.map((row) => outputObjectKey(row.account_id, row.conversion_id, row.lease_id))
				.filter((key) => !used.has(key));
			if (keys.length > 0) await this.env.BUCKET.delete(keys);
			this.#sql.exec(
				"DELETE FROM unused_outputs WHERE lease_id IN (SELECT value FROM json_each(?))",
				JSON.stringify(rows.map((row) => row.lease_id)),
			);
		} catch (error) {
			this.#sql.exec(
				"UPDATE unused_outputs SET remove_after = ? WHERE lease_id IN (SELECT value FROM json_each(?))",
				now + SETTLE_RETRY_MS,
				JSON.stringify(rows.map((row) => row.lease_id)),
			);
			this.#log("error", "could not remove the outputs of ended leases; will retry", {
				leases: rows.length,
				error: error instanceof Error ? error.message : String(error),
			});
		}
	}

	/**
	 * Sets the alarm for the next thing that is due: a lease expiry or acknowledgement, a delayed job, a retry, the
	 * removal of an unused output.
	 */
	async #arm(): Promise<void> {
		const now = this.clock();
		const failing = this.#sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM jobs WHERE state = 'failing'").one().n;
		const next = this.#sql
			.exec<{ at: number | null }>(
				`SELECT MIN(at) AS at FROM (
					SELECT MIN(expires_at) AS at FROM leases WHERE outcome IS NULL
					UNION ALL SELECT MIN(ack_by) FROM leases WHERE outcome IS NULL AND heartbeat_at IS NULL
					UNION ALL SELECT MIN(available_at) FROM jobs WHERE state = 'waiting' AND available_at > ?
					UNION ALL SELECT MIN(updated_at) + ? FROM jobs WHERE state = 'done'
					UNION ALL SELECT MIN(remove_after) FROM unused_outputs
				)`,
				now,
				FINISHED_RETENTION_MS,
			)
			.one().at;
		const abandoned = this.#sql.exec<{ n: number }>(`SELECT COUNT(*) AS n ${ABANDONED_UPLOADS}`).one().n;
		const retry = failing > 0 || abandoned > 0 ? now + SETTLE_RETRY_MS : null;
		const due = [next, retry].filter((t): t is number => t !== null);
		if (due.length === 0) return;
		await this.ctx.storage.setAlarm(Math.min(...due));
	}

	#leaseRow(leaseId: string): LeaseRow | undefined {
		return this.#sql
			.exec<LeaseRow>(
				`SELECT lease_id, conversion_id, account_id, attempt, expires_at, outcome, report_digest, fail_decision
				 FROM leases WHERE lease_id = ?`,
				leaseId,
			)
			.toArray()[0];
	}

	#attempts(conversionId: string): number {
		return (
			this.#sql
				.exec<{ attempts: number }>("SELECT attempts FROM jobs WHERE conversion_id = ?", conversionId)
				.toArray()[0]?.attempts ?? 0
		);
	}

	/** Ends an active lease; a conversion lease that did not complete has its output (if any) removed after. */
	#endLease(leaseId: string, outcome: string, now: number): void {
		this.#sql.exec(
			"UPDATE leases SET outcome = ?, ended_at = ? WHERE lease_id = ? AND outcome IS NULL",
			outcome,
			now,
			leaseId,
		);
		this.#sql.exec(
			`INSERT INTO unused_outputs (lease_id, conversion_id, account_id, remove_after)
			 SELECT l.lease_id, l.conversion_id, l.account_id, ? FROM leases l JOIN jobs j ON j.conversion_id = l.conversion_id
			 WHERE l.lease_id = ? AND l.outcome != 'completed' AND j.kind = 'convert'
			 ON CONFLICT (lease_id) DO NOTHING`,
			now + UNUSED_OUTPUT_GRACE_MS,
			leaseId,
		);
	}

	#log(level: "warn" | "error", msg: string, fields: Record<string, unknown>): void {
		const line = JSON.stringify({ level, msg, component: "job-broker", ...fields });
		if (level === "error") console.error(line);
		else console.warn(line);
	}
}
