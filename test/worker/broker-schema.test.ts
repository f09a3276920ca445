/**
 * The JobBroker's storage schema: what a new broker creates, what an existing one is migrated to when it starts,
 * and how SQLite plans each of the broker's queries on its jobs table (EXPLAIN QUERY PLAN, in the Durable Object's own
 * SQLite). Each test has a broker of its own, so the shared one's jobs do not show up here.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { JobBroker } from "../../durable-objects/job-broker.ts";
import { LEASE_SECONDS } from "../../durable-objects/job-broker-logic.ts";
import type { LeaseWants } from "../../src/contracts/broker.ts";

const freshBroker = () => env.JOB_BROKER.get(env.JOB_BROKER.idFromName(`schema-${crypto.randomUUID()}`));

const indexesOnJobs = (sql: SqlStorage) =>
	sql
		.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs' ORDER BY name")
		.toArray()
		.map((row) => row.name);

/**
 * Calls every public method of the broker, down each path that touches the jobs table (a grant with a loaded voice,
 * a completion, a transient and a permanent failure, a release, a cancelled wait, a discard, the lookups, and a sweep
 * that expires a lease and gives back an unacknowledged one), and answers each distinct statement it ran on the
 * Durable Object's SQL with the bindings it ran with.
 */
async function runEveryJobsQuery(instance: JobBroker, sql: SqlStorage): Promise<Map<string, unknown[]>> {
	const statements = new Map<string, unknown[]>();
	const exec = sql.exec;
	sql.exec = ((query: string, ...bindings: unknown[]) => {
		if (!statements.has(query)) statements.set(query, bindings);
		return exec.call(sql, query, ...bindings);
	}) as typeof exec;
	try {
		const wants: LeaseWants = {
			runnerId: "schema-runner",
			capacity: 2,
			waitSeconds: 0,
			loadedVoiceIds: ["voice-1"],
			engines: ["dsp"],
			kinds: ["convert", "validate_voice"],
		};
		for (let i = 0; i < 8; i++) {
			await instance.enqueue({
				conversionId: `job-${i}`,
				accountId: `account-${i % 2}`,
				voiceId: `voice-${i % 3}`,
				engine: "dsp",
				usePreview: i === 0,
			});
		}
		const [completed, failedOnce] = await instance.lease(wants);
		if (!completed || !failedOnce) throw new Error("the broker granted fewer than two jobs");
		await instance.heartbeat(completed.leaseId);
		instance.checkLease(completed.leaseId);
		instance.recordReport(completed.leaseId, "report");
		instance.complete(completed.leaseId);
		await instance.fail(failedOnce.leaseId, { kind: "transient", reason: "internal", message: "retry" }, "failure");
		const [failed, released] = await instance.lease(wants);
		if (!failed || !released) throw new Error("the broker granted fewer than two jobs");
		await instance.fail(failed.leaseId, { kind: "permanent", reason: "internal", message: "for good" });
		await instance.release(released.leaseId);
		await instance.lease({ ...wants, capacity: 1, waitId: "schema-wait" });
		await instance.cancelWait("schema-wait");
		await instance.lease({ ...wants, capacity: 1, acknowledges: true });
		await instance.lease({ ...wants, capacity: 1 });
		// A job no runner of these takes (another engine), discarded while it waits.
		await instance.enqueue({
			conversionId: "job-discarded",
			accountId: "account-0",
			voiceId: "voice-0",
			engine: "rvc",
			usePreview: false,
		});
		if ((await instance.discard(["job-discarded"])) !== 1) throw new Error("the waiting job was not discarded");
		instance.knownJobs(["job-1", "job-2"]);
		instance.activity(["job-1", "job-2"]);
		instance.stats();
		instance.clock = () => Date.now() + 2 * LEASE_SECONDS * 1000;
		const swept = await instance.sweep();
		if (swept.expired !== 1 || swept.unacknowledged !== 1) throw new Error(`the sweep did ${JSON.stringify(swept)}`);
	} finally {
		sql.exec = exec;
		instance.clock = () => Date.now();
	}
	return statements;
}

/** How each statement that reads or writes jobs reaches its rows: the jobs lines of its query plan. */
function jobsPlans(sql: SqlStorage, statements: Map<string, unknown[]>): Map<string, string[]> {
	const plans = new Map<string, string[]>();
	for (const [query, bindings] of statements) {
		if (!/\bjobs\b/.test(query)) continue;
		const lines = sql
			.exec<{ detail: string }>(`EXPLAIN QUERY PLAN ${query}`, ...bindings)
			.toArray()
			.map((row) => row.detail)
			.filter((detail) => /^(SEARCH|SCAN) (jobs|j)\b/.test(detail));
		plans.set(query.replace(/\s+/g, " ").trim(), lines);
	}
	return plans;
}

/** A plan line's kind of access: a lookup through an index, a pass over an index alone, or a pass over the table. */
const access = (line: string) =>
	line.startsWith("SEARCH") ? "index lookup" : line.includes("USING COVERING INDEX") ? "index pass" : "table pass";

describe("jobs table indexes", () => {
	it("a new broker never creates jobs_by_state", async () => {
		const indexes = await runInDurableObject(freshBroker(), (_instance: JobBroker, state) =>
			indexesOnJobs(state.storage.sql),
		);
		expect(indexes).not.toContain("jobs_by_state");
		expect(indexes).toEqual(
			expect.arrayContaining([
				"jobs_by_state_available",
				"jobs_by_state_updated",
				"jobs_waiting_by_account",
				"jobs_waiting_by_voice",
			]),
		);
	});

	it("a broker stored with jobs_by_state drops it on start, keeps its jobs, and each jobs query still uses an index", async () => {
		const result = await runInDurableObject(freshBroker(), async (instance: JobBroker, state) => {
			const sql = state.storage.sql;
			// The indexes a broker kept before, in the order it created them: `jobs_by_state` with the table, the others
			// later (SQLite's planner takes the later of two equally good indexes, so the order is part of the schema).
			sql.exec(`
				DROP INDEX IF EXISTS jobs_by_state;
				DROP INDEX jobs_waiting_by_account;
				DROP INDEX jobs_waiting_by_voice;
				DROP INDEX jobs_by_state_available;
				DROP INDEX jobs_by_state_updated;
				CREATE INDEX jobs_by_state ON jobs (state, use_preview, enqueued_at);
				CREATE INDEX jobs_waiting_by_account ON jobs (state, account_id, use_preview, enqueued_at, conversion_id);
				CREATE INDEX jobs_waiting_by_voice ON jobs (state, voice_id, account_id, use_preview, enqueued_at, conversion_id);
				CREATE INDEX jobs_by_state_available ON jobs (state, available_at);
				CREATE INDEX jobs_by_state_updated ON jobs (state, updated_at);
			`);
			const statements = await runEveryJobsQuery(instance, sql);
			const before = jobsPlans(sql, statements);
			const jobsBefore = sql.exec("SELECT * FROM jobs ORDER BY conversion_id").toArray();
			// The broker starts again on the same storage, as after a deploy.
			const upgraded = new JobBroker(state, env);
			const indexes = indexesOnJobs(sql);
			const jobsAfter = sql.exec("SELECT * FROM jobs ORDER BY conversion_id").toArray();
			const after = jobsPlans(sql, statements);
			// And it works on the jobs it kept: the one put back by the sweep is granted again.
			const granted = await upgraded.lease({
				runnerId: "after-upgrade",
				capacity: 8,
				waitSeconds: 0,
				loadedVoiceIds: [],
				engines: ["dsp"],
			});
			return { before, after, indexes, jobsBefore, jobsAfter, granted: granted.length };
		});

		expect(result.indexes).not.toContain("jobs_by_state");
		expect(result.jobsAfter).toEqual(result.jobsBefore);
		expect(result.jobsBefore.length).toBe(9);
		expect(result.granted).toBeGreaterThan(0);
		// The workload reached the broker's statements on jobs (grant, enqueue, state changes, lookups, sweep, alarm).
		expect(result.before.size).toBeGreaterThanOrEqual(15);
		const queries = [...result.before.keys()];
		expect(queries.some((q) => q.startsWith("DELETE FROM jobs WHERE state = 'done'"))).toBe(true);
		expect(queries.some((q) => q.startsWith("SELECT state, COUNT(*)"))).toBe(true);
		expect(queries.some((q) => q.includes("INDEXED BY jobs_waiting_by_voice"))).toBe(true);
		// No query used the index while it was there.
		for (const lines of result.before.values()) for (const line of lines) expect(line).not.toMatch(/jobs_by_state\b/);
		// Each statement reaches jobs as it did before the upgrade: by index lookups, never by a pass over the table;
		// only the count by state (stats) reads every job, through an index alone.
		const accesses = (plans: Map<string, string[]>) =>
			Object.fromEntries([...plans].map(([query, lines]) => [query, lines.map(access)]));
		expect(accesses(result.after)).toEqual(accesses(result.before));
		const passes = [...result.after].flatMap(([query, lines]) =>
			lines.filter((line) => access(line) !== "index lookup").map((line) => `${query} -> ${line}`),
		);
		expect(passes).toEqual([expect.stringMatching(/^SELECT state, COUNT\(\*\) .* -> SCAN jobs USING COVERING INDEX /)]);
	});
});
