/**
 * The cron safety net (every minute). Normal progress never waits for it: it only repairs what a lost message
 * or a crash left behind, and every repair is idempotent, so running it twice (or concurrently) is harmless.
 * 1. Outbox events never marked sent are sent again on `webhook-events`.
 * 2. `queued` conversions whose job message was lost (dispatched a while ago, unknown to the broker) are re-sent.
 * 3. Conversions stuck beyond `STUCK_CONVERSION_SECONDS` are failed with a clear message and dropped by the broker.
 * 4. The broker sweeps overdue leases (its alarm does this too), and expired idempotency keys are forgotten.
 * 5. Uploaded files whose preprocessing message was lost (still pending, or claimed by a consumer that died) are re-sent.
 */
import { resendStalePreprocessing } from "../audio-files/send-audio-uploaded.ts";
import { conversionsStuckSince, markDispatched, queuedDispatchedBefore } from "../conversions/conversion-store.ts";
import { failure } from "../conversions/failure-messages.ts";
import { jobBroker } from "../conversions/job-broker-client.ts";
import { dispatchConversions } from "../conversions/promotion.ts";
import { failConversion, NON_TERMINAL_STATUSES } from "../conversions/state-machine.ts";
import { purgeExpiredIdempotencyKeys } from "../http/idempotency.ts";
import { unsentEventsBefore } from "../webhooks/event-outbox.ts";

/** An event still unsent after this long is assumed lost (its consumer marks `sent_at`). */
export const EVENT_RESEND_AFTER_SECONDS = 60;
/** A queued job dispatched this long ago and unknown to the broker is assumed lost. */
export const JOB_REDISPATCH_AFTER_SECONDS = 120;
/** Rows handled per category and run; a backlog drains over a few minutes instead of one long invocation. */
const BATCH = 100;

export interface SafetyNetReport {
	eventsResent: number;
	jobsRedispatched: number;
	stuckFailed: number;
	leasesExpired: number;
	idempotencyKeysPurged: number;
	preprocessingResent: number;
	errors: string[];
}

const secondsBefore = (now: Date, seconds: number) => new Date(now.getTime() - seconds * 1000).toISOString();

export async function resendUnsentEvents(env: Env, now: Date): Promise<number> {
	const ids = await unsentEventsBefore(env, secondsBefore(now, EVENT_RESEND_AFTER_SECONDS), BATCH);
	if (ids.length === 0) return 0;
	await env.WEBHOOK_EVENTS_QUEUE.sendBatch(ids.map((id) => ({ body: { event_id: id }, contentType: "json" as const })));
	return ids.length;
}

export async function redispatchLostJobs(env: Env, now: Date): Promise<number> {
	const cutoff = secondsBefore(now, JOB_REDISPATCH_AFTER_SECONDS);
	const ids = await queuedDispatchedBefore(env, cutoff, BATCH);
	if (ids.length === 0) return 0;
	const known = new Set(await jobBroker(env).knownJobs(ids));
	const lost = ids.filter((id) => !known.has(id));
	if (lost.length === 0) return 0;
	await dispatchConversions(env, lost);
	await markDispatched(env, lost, now);
	return lost.length;
}

export async function failStuckConversions(env: Env, now: Date): Promise<number> {
	const stuckSeconds = Number(env.STUCK_CONVERSION_SECONDS) || 3600;
	const results = await conversionsStuckSince(env, NON_TERMINAL_STATUSES, secondsBefore(now, stuckSeconds), BATCH);
	let failed = 0;
	for (const row of results) {
		const neverUploaded = row.status === "pending_preprocessing" && row.uploadStatus === "awaiting_upload";
		const result = await failConversion(env, row.id, failure(neverUploaded ? "never_uploaded" : "timed_out"), now);
		if (result.outcome === "applied") failed++;
	}
	if (results.length > 0) await jobBroker(env).discard(results.map((row) => row.id));
	return failed;
}

export async function runSafetyNet(env: Env, now = new Date()): Promise<SafetyNetReport> {
	const report: SafetyNetReport = {
		eventsResent: 0,
		jobsRedispatched: 0,
		stuckFailed: 0,
		leasesExpired: 0,
		idempotencyKeysPurged: 0,
		preprocessingResent: 0,
		errors: [],
	};
	// Each repair runs on its own: one failing (say, the queue is down) must not block the others.
	const step = async (name: string, run: () => Promise<void>) => {
		try {
			await run();
		} catch (error) {
			report.errors.push(`${name}: ${error instanceof Error ? error.message : String(error)}`);
		}
	};
	await step("events", async () => {
		report.eventsResent = await resendUnsentEvents(env, now);
	});
	await step("jobs", async () => {
		report.jobsRedispatched = await redispatchLostJobs(env, now);
	});
	await step("stuck", async () => {
		report.stuckFailed = await failStuckConversions(env, now);
	});
	await step("leases", async () => {
		report.leasesExpired = (await jobBroker(env).sweep()).expired;
	});
	await step("idempotency", async () => {
		report.idempotencyKeysPurged = await purgeExpiredIdempotencyKeys(env, now);
	});
	await step("preprocessing", async () => {
		report.preprocessingResent = await resendStalePreprocessing(env, now);
	});
	const acted =
		report.eventsResent +
		report.jobsRedispatched +
		report.stuckFailed +
		report.leasesExpired +
		report.preprocessingResent;
	if (acted > 0 || report.errors.length > 0) {
		const line = JSON.stringify({ level: report.errors.length ? "error" : "warn", msg: "safety net", ...report });
		if (report.errors.length) console.error(line);
		else console.warn(line);
	}
	return report;
}
