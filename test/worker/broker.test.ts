/**
 * The JobBroker: lease expiry and retries stepped with its alarm and a shifted clock (no sleeping), attempt
 * limits, exclusive leases under concurrency, priority and model affinity, engines, long-poll wake-ups and
 * cancelled waits.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { ACK_WINDOW_MS, type JobBroker } from "../../durable-objects/job-broker.ts";
import {
	afterLeaseExpired,
	afterRunnerFailure,
	type CandidateJob,
	LEASE_SECONDS,
	PREVIEW_AGING_MS,
	selectJobs,
	transientRetryDelayMs,
} from "../../durable-objects/job-broker-logic.ts";
import { type ConversionJob, MAX_ATTEMPTS } from "../../src/contracts/broker.ts";
import { FAILURE_MESSAGES } from "../../src/conversions/failure-messages.ts";
import {
	broker,
	deliveredConversion,
	deliverJobs,
	eventsFor,
	finishPreprocessing,
	insertAudioFile,
	insertVoice,
	json,
	resetBroker,
	runner,
	shiftBrokerClock,
	user,
} from "./conversion-fixtures.ts";

beforeEach(resetBroker);

const LEASE_MS = LEASE_SECONDS * 1000;

/** A job for the broker alone (no D1 row): enough for selection and exclusivity tests. */
const job = (overrides: Partial<ConversionJob> = {}): ConversionJob => ({
	conversionId: crypto.randomUUID(),
	accountId: "acct",
	voiceId: crypto.randomUUID(),
	engine: "dsp",
	usePreview: false,
	...overrides,
});

const wants = (overrides: Record<string, unknown> = {}) => ({
	runnerId: "r1",
	capacity: 1,
	waitSeconds: 0,
	loadedVoiceIds: [] as string[],
	engines: ["dsp"],
	...overrides,
});

/** The one lease granted for `request`; fails the test when there is none. */
/** What `call` returns, and the rows the Durable Object's SQL read meanwhile (every statement `sql.exec` ran). */
async function readingRows<T>(sql: SqlStorage, call: () => Promise<T>): Promise<{ value: T; rowsRead: number }> {
	const exec = sql.exec;
	const cursors: { rowsRead: number }[] = [];
	sql.exec = ((...args: Parameters<typeof exec>) => {
		const cursor = exec.apply(sql, args);
		cursors.push(cursor);
		return cursor;
	}) as typeof exec;
	try {
		const value = await call();
		return { value, rowsRead: cursors.reduce((sum, cursor) => sum + cursor.rowsRead, 0) };
	} finally {
		sql.exec = exec;
	}
}

async function leaseOne(request: ReturnType<typeof wants>) {
	const [lease] = await broker().lease(request);
	if (!lease) throw new Error("no lease granted");
	return lease;
}

describe("lease expiry and attempts", () => {
	it("requeues a job whose runner stopped heartbeating, and fails it after the maximum attempts", async () => {
		const { alice, worker, created } = await deliveredConversion();

		let offset = 0;
		for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
			const lease = await worker.leaseOne();
			expect(lease).toMatchObject({ conversion_id: created.id, attempt });
			// The runner goes silent: the broker's clock passes the lease expiry and its alarm fires.
			offset += LEASE_MS + 1_000;
			await shiftBrokerClock(offset);
			expect(await runDurableObjectAlarm(broker())).toBe(true);
			expect(await json(await worker.heartbeat(lease.lease_id))).toMatchObject({ code: "lease_lost" });
			expect((await worker.complete(lease.lease_id)).status).toBe(409);
			const seen = await alice.get(created.id);
			if (attempt < MAX_ATTEMPTS) {
				// Status never goes backwards for the client while the job is retried.
				expect(seen.status).toBe("processing");
			} else {
				expect(seen).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES.attempts_exhausted });
			}
		}
		expect(FAILURE_MESSAGES.attempts_exhausted).toContain(`${MAX_ATTEMPTS} attempts`);
		expect(await worker.lease({ capacity: 4 })).toEqual([]);
		expect((await eventsFor(created.id)).map((e) => e.type)).toEqual(["conversion.failed"]);
		const row = await env.DB.prepare("SELECT attempts FROM voice_conversions WHERE id = ?").bind(created.id).first();
		expect(row).toEqual({ attempts: MAX_ATTEMPTS });
	});

	it("keeps a heartbeating lease alive past its first expiry", async () => {
		const spec = job();
		await broker().enqueue(spec);
		const [lease] = await broker().lease(wants());
		// The lease carries the job exactly as it was enqueued, and so does a later check of it.
		expect(lease?.job).toEqual(spec);
		expect(await broker().checkLease(lease!.leaseId)).toEqual({ status: "active", lease });
		await shiftBrokerClock(LEASE_MS - 5_000);
		const extended = await broker().heartbeat(lease!.leaseId);
		expect(extended?.expiresAt).toBeGreaterThan(lease!.expiresAt);
		await shiftBrokerClock(LEASE_MS + 5_000);
		await runDurableObjectAlarm(broker());
		expect((await broker().checkLease(lease!.leaseId)).status).toBe("active");
		await shiftBrokerClock(2 * LEASE_MS + 1_000);
		await broker().sweep();
		expect(await broker().checkLease(lease!.leaseId)).toMatchObject({ status: "ended", outcome: "expired" });
		expect(await broker().stats()).toMatchObject({ waiting: 1, leased: 0 });
	});
});

describe("exclusive leases", () => {
	it("never gives one job to two runners polling at the same time", async () => {
		const specs = Array.from({ length: 30 }, () => job());
		for (const spec of specs) await broker().enqueue(spec);
		const rounds = await Promise.all(
			Array.from({ length: 20 }, (_, i) => broker().lease(wants({ runnerId: `r${i}`, capacity: 3 }))),
		);
		const leased = rounds.flat().map((lease) => lease.job.conversionId);
		expect(leased).toHaveLength(30);
		expect(new Set(leased).size).toBe(30);
		expect(await broker().stats()).toMatchObject({ waiting: 0, leased: 30 });
	});

	it("splits real jobs between concurrent runners over HTTP without overlap", async () => {
		const alice = await user();
		const voiceId = await insertVoice();
		const ids: string[] = [];
		const files: string[] = [];
		for (let i = 0; i < 6; i++) {
			const file = await insertAudioFile(alice.accountId, "pending");
			files.push(file.id);
			ids.push((await alice.convert({ audio_file_id: file.id, voice_model_id: voiceId })).id);
		}
		const runners = await Promise.all([runner(), runner(), runner(), runner()]);
		// All four are long-polling before the jobs arrive (8 places for 6 jobs: one poll ends empty).
		const polls = runners.map((r) => r.lease({ capacity: 2, wait_seconds: 1 }));
		await Promise.all(files.map((id) => finishPreprocessing(alice.accountId, id, "ready")));
		await deliverJobs(ids);
		const more = await Promise.all(runners.map((r) => r.lease({ capacity: 2, wait_seconds: 0 })));
		const leases = [...(await Promise.all(polls)).flat(), ...more.flat()];
		const leasedIds = leases.map((lease) => lease.conversion_id);
		expect(new Set(leasedIds).size).toBe(leasedIds.length);
		expect(new Set(leasedIds)).toEqual(new Set(ids));
		for (const id of ids) expect((await alice.get(id)).status).toBe("processing");
		// Finish them so nothing is left queued for the other tests of this file.
		for (const lease of leases) expect((await runners[0]!.finish(lease)).status).toBe(200);
	});
});

describe("priority and affinity", () => {
	it("leases preview jobs before older full ones", async () => {
		const full = job();
		const preview = job({ usePreview: true });
		await broker().enqueue(full);
		await broker().enqueue(preview);
		const [first] = await broker().lease(wants());
		expect(first?.job.conversionId).toBe(preview.conversionId);
		const [second] = await broker().lease(wants());
		expect(second?.job.conversionId).toBe(full.conversionId);
	});

	it("prefers jobs for voices the runner has loaded", async () => {
		const loadedVoice = crypto.randomUUID();
		const other = job();
		const affine = job({ voiceId: loadedVoice });
		await broker().enqueue(other);
		await broker().enqueue(affine);
		const [pick] = await broker().lease(wants({ loadedVoiceIds: [loadedVoice] }));
		expect(pick?.job.conversionId).toBe(affine.conversionId);
		// Without loaded voices it is first come, first served.
		const [next] = await broker().lease(wants());
		expect(next?.job.conversionId).toBe(other.conversionId);
	});

	it("only leases jobs for the runner's engines", async () => {
		const rvc = job({ engine: "rvc" });
		await broker().enqueue(rvc);
		expect(await broker().lease(wants({ engines: ["dsp"] }))).toEqual([]);
		const [got] = await broker().lease(wants({ engines: ["dsp", "rvc"] }));
		expect(got?.job.conversionId).toBe(rvc.conversionId);
	});

	it("takes turns between accounts: one account's batch does not hold another's job behind it", async () => {
		const batch = Array.from({ length: 4 }, () => job({ accountId: "batch" }));
		for (const queued of batch) await broker().enqueue(queued);
		await shiftBrokerClock(10);
		const single = job({ accountId: "single" });
		await broker().enqueue(single);
		const order: string[] = [];
		for (let i = 0; i < 3; i++) {
			const lease = await leaseOne(wants());
			order.push(lease.job.conversionId);
			expect(await broker().complete(lease.leaseId)).toBe(true);
		}
		// First come, first served; then the account served longest ago (the other had the last turn).
		expect(order).toEqual([batch[0]?.conversionId, single.conversionId, batch[1]?.conversionId]);

		// One runner taking two: one job of each account, not two of the batch.
		await resetBroker();
		const second = Array.from({ length: 4 }, () => job({ accountId: "batch" }));
		for (const queued of second) await broker().enqueue(queued);
		await shiftBrokerClock(20);
		const other = job({ accountId: "single" });
		await broker().enqueue(other);
		const both = await broker().lease(wants({ capacity: 2 }));
		expect(both.map((lease) => lease.job.conversionId).sort()).toEqual(
			[second[0]?.conversionId, other.conversionId].sort(),
		);
	});

	it("keeps taking turns once a running batch's jobs have waited 5 minutes; aging still serves an account left out", async () => {
		const batch = Array.from({ length: 5 }, () => job({ accountId: "batch" }));
		for (const queued of batch) await broker().enqueue(queued);
		await shiftBrokerClock(PREVIEW_AGING_MS + 60_000);
		// One runner works through the batch, whose jobs have all waited past the aging limit.
		const first = await leaseOne(wants());
		expect(first.job.conversionId).toBe(batch[0]?.conversionId);
		expect(await broker().complete(first.leaseId)).toBe(true);
		const single = job({ accountId: "single" });
		await broker().enqueue(single);
		// Its next job goes to the other account, whose conversion came after the batch's finished job.
		expect((await leaseOne(wants())).job.conversionId).toBe(single.conversionId);
		// The same after a batch job that ran for 10 minutes.
		const long = await leaseOne(wants({ runnerId: "r2" }));
		expect(long.job.conversionId).toBe(batch[1]?.conversionId);
		await shiftBrokerClock(PREVIEW_AGING_MS + 11 * 60_000);
		expect(await broker().complete(long.leaseId)).toBe(true);
		const later = job({ accountId: "later" });
		await broker().enqueue(later);
		expect((await leaseOne(wants({ runnerId: "r2" }))).job.conversionId).toBe(later.conversionId);
		// A preview of the batch's account still goes before the batch's older jobs.
		const preview = job({ accountId: "batch", usePreview: true });
		await broker().enqueue(preview);
		expect((await leaseOne(wants({ runnerId: "r3" }))).job.conversionId).toBe(preview.conversionId);
		expect((await leaseOne(wants({ runnerId: "r4" }))).job.conversionId).toBe(batch[2]?.conversionId);

		// An account's aged job still goes before previews of others, and before its own, while the account is not
		// being served (none of its full jobs ran for as long as the aging limit).
		const now = 10 * PREVIEW_AGING_MS;
		const candidate = (id: string, account: string, preview: boolean, age: number): CandidateJob => ({
			conversion_id: id,
			account_id: account,
			voice_id: "v",
			use_preview: preview ? 1 : 0,
			enqueued_at: now - age,
		});
		const jobs = [
			candidate("flood-preview", "flood", true, 1_000),
			candidate("own-preview", "left-out", true, 1_000),
			candidate("left-out-aged", "left-out", false, PREVIEW_AGING_MS + 1),
			candidate("left-out-aged-2", "left-out", false, PREVIEW_AGING_MS),
		];
		const pick = (shares: Map<string, { active: number; lastGrantedAt: number; lastFullServedAt: number }>) =>
			selectJobs(jobs, { capacity: 4, loadedVoiceIds: [] }, now, shares).map((j) => j.conversion_id);
		// Its previews keep it running, but none of its full jobs ran for 6 minutes.
		const previewsOnly = { active: 2, lastGrantedAt: now - 1_000, lastFullServedAt: now - 6 * 60_000 };
		const flood = { active: 5, lastGrantedAt: now - 10, lastFullServedAt: 0 };
		expect(
			pick(
				new Map([
					["left-out", previewsOnly],
					["flood", flood],
				]),
			),
		).toEqual(["left-out-aged", "own-preview", "flood-preview", "left-out-aged-2"]);
		// A full job of it ran a minute ago: its aged jobs take turns, after every preview.
		const served = { active: 1, lastGrantedAt: now - 60_000, lastFullServedAt: now - 60_000 };
		expect(
			pick(
				new Map([
					["left-out", served],
					["flood", flood],
				]),
			),
		).toEqual(["own-preview", "flood-preview", "left-out-aged", "left-out-aged-2"]);
	});

	it("ranks accounts by leases held, then by their last turn; affinity within an account (pure rule)", () => {
		const now = 10 * PREVIEW_AGING_MS;
		const candidate = (id: string, account: string, voice: string, age: number): CandidateJob => ({
			conversion_id: id,
			account_id: account,
			voice_id: voice,
			use_preview: 0,
			enqueued_at: now - age,
		});
		const jobs = [
			candidate("busy-old", "busy", "v1", 60_000),
			candidate("busy-loaded", "busy", "v2", 50_000),
			candidate("idle-new", "idle", "v1", 1_000),
			candidate("recent-older", "recent", "v3", 2_000),
		];
		const shares = new Map([
			["busy", { active: 2, lastGrantedAt: now - 30_000, lastFullServedAt: now - 30_000 }],
			["recent", { active: 0, lastGrantedAt: now - 100, lastFullServedAt: now - 100 }],
		]);
		const picked = selectJobs(jobs, { capacity: 4, loadedVoiceIds: ["v2"] }, now, shares);
		// idle (nothing held, never served), recent (nothing held, served lately), then busy's two: its loaded voice
		// first, though the other is older.
		expect(picked.map((j) => j.conversion_id)).toEqual(["idle-new", "recent-older", "busy-loaded", "busy-old"]);
		// A preview still goes first, whoever holds what.
		const preview = { ...candidate("busy-preview", "busy", "v1", 10), use_preview: 1 };
		expect(selectJobs([...jobs, preview], { capacity: 1, loadedVoiceIds: [] }, now, shares)[0]?.conversion_id).toBe(
			"busy-preview",
		);
	});

	it("ranks urgency, then affinity, then age (pure selection rule)", () => {
		const now = 10 * PREVIEW_AGING_MS;
		const candidate = (id: string, voice: string, preview: boolean, age: number): CandidateJob => ({
			conversion_id: id,
			account_id: "acct",
			voice_id: voice,
			use_preview: preview ? 1 : 0,
			enqueued_at: now - age,
		});
		const jobs = [
			candidate("full-old", "v1", false, 60_000),
			candidate("full-loaded", "v2", false, 1_000),
			candidate("preview-new", "v1", true, 10),
			candidate("full-aged", "v1", false, PREVIEW_AGING_MS + 1),
			candidate("preview-loaded", "v2", true, 5),
		];
		const picked = selectJobs([...jobs, jobs[0]!], { capacity: 5, loadedVoiceIds: ["v2"] }, now);
		expect(picked.map((j) => j.conversion_id)).toEqual([
			"preview-loaded",
			"full-aged",
			"preview-new",
			"full-loaded",
			"full-old",
		]);
		expect(selectJobs(jobs, { capacity: 2, loadedVoiceIds: [] }, now)).toHaveLength(2);
	});

	it("decides retries and failures by attempts (pure rules)", () => {
		expect(afterLeaseExpired(1, 100)).toEqual({ action: "requeue", availableAt: 100 });
		expect(afterLeaseExpired(MAX_ATTEMPTS, 100)).toMatchObject({ action: "fail", failure: "attempts_exhausted" });
		expect(afterRunnerFailure(1, "permanent", "too_large", 0)).toMatchObject({ action: "fail", failure: "too_large" });
		expect(afterRunnerFailure(1, "transient", "internal", 0)).toEqual({ action: "requeue", availableAt: 5_000 });
		expect(afterRunnerFailure(MAX_ATTEMPTS, "transient", "internal", 0)).toMatchObject({ action: "fail" });
		expect([1, 2, 3, 10].map(transientRetryDelayMs)).toEqual([5_000, 10_000, 20_000, 60_000]);
	});
	it("reads a lease's account shares through indexes, not each account's day of ended leases", async () => {
		const accounts = ["busy", "quiet"];
		for (const accountId of accounts) await broker().enqueue(job({ accountId }));
		const rowsRead = await runInDurableObject(broker(), async (instance: JobBroker, state) => {
			const sql = state.storage.sql;
			// A day of finished work: 20,000 ended leases of the two accounts.
			sql.exec(
				`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000)
				 INSERT INTO leases (lease_id, conversion_id, account_id, runner_id, attempt, granted_at, expires_at, ended_at,
				 outcome, use_preview) SELECT 'ended-' || x, 'gone-' || x, CASE x % 2 WHEN 0 THEN 'busy' ELSE 'quiet' END,
				 'r', 1, ?1 - x, ?1 - x, ?1 - x, 'completed', 0 FROM n`,
				Date.now() - 60_000,
			);
			const { value: leases, rowsRead } = await readingRows(sql, () => instance.lease(wants({ capacity: 2 })));
			expect(leases).toHaveLength(2);
			return rowsRead;
		});
		expect(rowsRead).toBeLessThan(200);
	});

	it("grants from a deep queue beside a day of finished jobs through indexes, as ranking every waiting job would", async () => {
		const now = Date.now();
		const leaseWants = wants({ capacity: 3, loadedVoiceIds: ["voice-3", "voice-404"], engines: ["dsp", "rvc"] });
		const { granted, rowsRead, waiting } = await runInDurableObject(broker(), async (instance: JobBroker, state) => {
			const sql = state.storage.sql;
			// 20,000 jobs waiting: 10 accounts, 5 voices, both engines, a tenth of them previews, from 1 to 11 minutes
			// old (the older ones past the aging limit), a few not available yet (a retry's delay).
			sql.exec(
				`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000)
				 INSERT INTO jobs (conversion_id, account_id, voice_id, engine, use_preview, state, attempts, enqueued_at,
				 available_at, updated_at, kind) SELECT printf('deep-%05d', x), 'account-' || (x % 10), 'voice-' || (x % 5),
				 CASE x % 7 WHEN 0 THEN 'rvc' ELSE 'dsp' END, x % 10 = 3, 'waiting', 0, ?1 - 60000 - x * 30,
				 CASE x % 13 WHEN 0 THEN ?1 + 60000 ELSE ?1 - 60000 - x * 30 END, ?1, 'convert' FROM n`,
				now,
			);
			// And a day of finished ones, which the broker keeps.
			sql.exec(
				`WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 20000)
				 INSERT INTO jobs (conversion_id, account_id, voice_id, engine, use_preview, state, attempts, enqueued_at,
				 available_at, updated_at, kind) SELECT printf('done-%05d', x), 'account-' || (x % 10), 'voice-' || (x % 5),
				 'dsp', 0, 'done', 1, ?1 - x * 4000, ?1 - x * 4000, ?1 - x * 4000, 'convert' FROM n`,
				now,
			);
			const waiting = sql
				.exec<CandidateJob>(
					`SELECT conversion_id, account_id, voice_id, use_preview, enqueued_at FROM jobs
					 WHERE state = 'waiting' AND available_at <= ?`,
					now,
				)
				.toArray();
			const { value: leases, rowsRead } = await readingRows(sql, () => instance.lease(leaseWants));
			return { granted: leases.map((lease) => lease.job.conversionId), rowsRead, waiting };
		});
		// No account holds or held a lease: each one's share is none.
		expect(granted).toEqual(selectJobs(waiting, leaseWants, now).map((job) => job.conversion_id));
		expect(granted).toHaveLength(3);
		expect(rowsRead).toBeLessThan(2_000);
	});
});

describe("long-poll", () => {
	it("wakes a waiting runner as soon as a job is added", async () => {
		const spec = job({ usePreview: true });
		const started = Date.now();
		const waiting = broker().lease(wants({ waitSeconds: 20 }));
		await broker().enqueue(spec);
		const [lease] = await waiting;
		expect(lease?.job).toEqual(spec);
		expect(Date.now() - started).toBeLessThan(2_000);
	});

	it("returns an empty list when nothing arrives within the wait", async () => {
		const started = Date.now();
		expect(await broker().lease(wants({ waitSeconds: 1 }))).toEqual([]);
		expect(Date.now() - started).toBeGreaterThanOrEqual(900);
	});

	it("ends a cancelled wait with nothing, and the next job goes to a live waiter at attempt 1", async () => {
		const waitId = crypto.randomUUID();
		const dead = broker().lease(wants({ runnerId: "dead", waitSeconds: 20, waitId }));
		await vi.waitFor(async () => expect((await broker().stats()).waiters).toBe(1));
		// Waiters are served longest-waiting first: without the cancel, the dead one would take the job.
		const live = broker().lease(wants({ runnerId: "live", waitSeconds: 20 }));
		await vi.waitFor(async () => expect((await broker().stats()).waiters).toBe(2));
		expect(await broker().cancelWait(waitId)).toEqual({ waiting: true, released: 0 });
		expect(await dead).toEqual([]);
		const spec = job();
		await broker().enqueue(spec);
		const [lease] = await live;
		expect(lease).toMatchObject({ job: spec, attempt: 1 });
		expect(await broker().stats()).toMatchObject({ waiting: 0, leased: 1, waiters: 0 });
	});

	it("gives back uncharged what it granted to a wait cancelled after the answer left", async () => {
		const spec = job();
		await broker().enqueue(spec);
		const waitId = crypto.randomUUID();
		const lost = await broker().lease(wants({ runnerId: "dead", waitSeconds: 20, waitId }));
		expect(lost).toEqual([expect.objectContaining({ job: spec, attempt: 1 })]);
		expect(await broker().cancelWait(waitId)).toEqual({ waiting: false, released: 1 });
		for (const { leaseId } of lost) {
			expect(await broker().checkLease(leaseId)).toMatchObject({ status: "ended", outcome: "released" });
		}
		const [again] = await broker().lease(wants({ runnerId: "live" }));
		expect(again).toMatchObject({ job: spec, attempt: 1 });
		// A second cancel of the same wait changes nothing.
		expect(await broker().cancelWait(waitId)).toEqual({ waiting: false, released: 0 });
	});

	it("gives back uncharged a lease an acknowledging runner never heartbeated (it died mid-poll, unseen)", async () => {
		const spec = job();
		await broker().enqueue(spec);
		const lost = await leaseOne(wants({ runnerId: "dead", acknowledges: true }));
		expect(lost).toMatchObject({ job: spec, attempt: 1 });
		await shiftBrokerClock(ACK_WINDOW_MS - 1_000);
		await broker().sweep();
		expect((await broker().checkLease(lost.leaseId)).status).toBe("active");
		await shiftBrokerClock(ACK_WINDOW_MS + 1_000);
		// The alarm was set for the acknowledgement's deadline, well before the lease's expiry.
		expect(await runDurableObjectAlarm(broker())).toBe(true);
		expect(await broker().checkLease(lost.leaseId)).toMatchObject({ status: "ended", outcome: "released" });
		const [again] = await broker().lease(wants({ runnerId: "live", acknowledges: true }));
		expect(again).toMatchObject({ job: spec, attempt: 1 });
	});

	it("keeps an acknowledged lease, and leaves a runner that does not acknowledge to the lease expiry", async () => {
		const [acked, quiet] = [job(), job()];
		await broker().enqueue(acked);
		const first = await leaseOne(wants({ acknowledges: true }));
		expect(await broker().heartbeat(first.leaseId)).not.toBeNull();
		await broker().enqueue(quiet);
		const second = await leaseOne(wants());
		await shiftBrokerClock(ACK_WINDOW_MS + 1_000);
		await broker().sweep();
		expect((await broker().checkLease(first.leaseId)).status).toBe("active");
		expect((await broker().checkLease(second.leaseId)).status).toBe("active");
		await shiftBrokerClock(LEASE_MS + 1_000);
		await broker().sweep();
		// Expired, charged: the attempt counts (a job that kills its runner after taking it must run out of attempts).
		expect(await broker().checkLease(second.leaseId)).toMatchObject({ status: "ended", outcome: "expired" });
	});

	it("is idempotent by conversion id", async () => {
		const spec = job();
		expect(await broker().enqueue(spec)).toBe("added");
		expect(await broker().enqueue(spec)).toBe("exists");
		const [lease] = await broker().lease(wants());
		expect(await broker().enqueue(spec)).toBe("exists");
		expect(await broker().complete(lease!.leaseId)).toBe(true);
		expect(await broker().enqueue(spec)).toBe("exists");
		expect(await broker().lease(wants())).toEqual([]);
	});
});
