/**
 * The cron safety net (every minute). Normal progress never waits for it: it only repairs what a lost message
 * or a crash left behind, and every repair is idempotent, so running it twice (or concurrently) is harmless.
 * 1. Outbox events never marked sent are sent again on `webhook-events`.
 * 2. `queued` conversions whose job message was lost (dispatched a while ago, unknown to the broker) are re-sent.
 * 3. Conversions waiting on a source that can no longer arrive (deleted, or its upload window closed) fail with that
 *    reason; those waiting on a file whose preprocessing ended but whose notification was lost are moved on.
 *    Conversions that no runner has worked on for `CONVERSION_WAIT_LIMIT_SECONDS` fail as timed out and are dropped
 *    by the broker; one whose lease is alive is never failed by time (lost leases are the broker's: expiry, attempts).
 * 4. The broker sweeps overdue leases (its alarm does this too), and expired idempotency keys are forgotten.
 * 5. Uploaded files whose preprocessing message was lost (still pending, or claimed by a consumer that died) are re-sent.
 * 6. Voices `validating` whose job the broker does not hold (the hand-over failed) are handed over again; those no
 *    runner has worked on for the same wait limit fail, saying so (both counted from the start of the validation, which
 *    a later change of the voice's name or settings does not move); voices whose every file is in but which were never
 *    moved to `validating` (the last upload's request stopped first) are; deleted voices' files are removed once no
 *    conversion runs with them.
 * 7. Deleted audio files whose stored bytes a failed removal left are removed (`audio-file-removal.ts`).
 * 8. The service's model files that a newer one replaced are removed once no lease can still fetch them
 *    (`replaced-model-files.ts`).
 */

import { removeObjectsOfDeletedAudioFiles } from "../audio-files/audio-file-removal.ts";
import { notifyPreprocessingListeners, outcomeOf } from "../audio-files/preprocessing-listeners.ts";
import { resendStalePreprocessing } from "../audio-files/send-audio-uploaded.ts";
import {
	conversionsUnchangedSince,
	conversionsWithLostSource,
	filesSettledUnderWaitingConversions,
	markDispatched,
	queuedDispatchedBefore,
} from "../conversions/conversion-store.ts";
import { failure } from "../conversions/failure-messages.ts";
import { jobBroker } from "../conversions/job-broker-client.ts";
import { dispatchConversions } from "../conversions/promotion.ts";
import { failConversion, NON_TERMINAL_STATUSES } from "../conversions/state-machine.ts";
import { conversionWaitLimitSeconds, formatSeconds, UPLOAD_GRACE_SECONDS } from "../conversions/wait-limit.ts";
import { purgeExpiredIdempotencyKeys } from "../http/idempotency.ts";
import { removeFilesOfDeletedVoices } from "../voices/voice-removal.ts";
import { uploadedVoicesNotValidating, validatingVoicesBefore } from "../voices/voice-store.ts";
import { enqueueValidation, failValidation, startValidation } from "../voices/voice-validation.ts";
import { unsentEventsBefore } from "../webhooks/event-outbox.ts";
import { removeReplacedModelFiles } from "./replaced-model-files.ts";

/** An event still unsent after this long is assumed lost (its consumer marks `sent_at`). */
export const EVENT_RESEND_AFTER_SECONDS = 60;
/** A queued job dispatched this long ago and unknown to the broker is assumed lost. */
export const JOB_REDISPATCH_AFTER_SECONDS = 120;
/** A file's preprocessing outcome that has not reached its waiting conversions after this long was not sent. */
export const OUTCOME_RESEND_AFTER_SECONDS = 60;
/** Rows handled per category and run; a backlog drains over a few minutes instead of one long invocation. */
const BATCH = 100;
/**
 * Conversions past the wait limit examined per run. Most of them are long jobs whose runner is alive, which stay
 * candidates; the window is wide so that they cannot hide the others.
 */
const WAIT_CANDIDATES = 500;

export interface SafetyNetReport {
	eventsResent: number;
	jobsRedispatched: number;
	lostSourceFailed: number;
	outcomesResent: number;
	waitLimitFailed: number;
	leasesExpired: number;
	idempotencyKeysPurged: number;
	preprocessingResent: number;
	validationsRedispatched: number;
	validationsStarted: number;
	validationWaitLimitFailed: number;
	voiceFilesRemoved: number;
	audioFileObjectsRemoved: number;
	replacedModelFilesRemoved: number;
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

/** Fails the conversions whose source was deleted, or was not uploaded before its window closed (and the grace). */
export async function failConversionsWithLostSource(env: Env, now: Date): Promise<number> {
	const rows = await conversionsWithLostSource(env, secondsBefore(now, UPLOAD_GRACE_SECONDS), BATCH);
	let failed = 0;
	for (const row of rows) {
		const reason = failure(row.sourceDeleted ? "source_deleted" : "never_uploaded");
		if ((await failConversion(env, row.id, reason, now)).outcome === "applied") failed++;
	}
	return failed;
}

/** Tells the listeners again of a preprocessing outcome that conversions still wait for (idempotent on their side). */
export async function resendLostOutcomes(env: Env, now: Date): Promise<number> {
	const files = await filesSettledUnderWaitingConversions(env, secondsBefore(now, OUTCOME_RESEND_AFTER_SECONDS), BATCH);
	for (const file of files) {
		const outcome = outcomeOf(file);
		if (outcome) await notifyPreprocessingListeners(env, outcome);
	}
	return files.length;
}

/**
 * Of these jobs (conversions or validations), those the broker has no live lease for and no sign of life since
 * `cutoff`, or does not hold at all: nothing will ever move them.
 */
async function idleSince(broker: ReturnType<typeof jobBroker>, ids: string[], cutoff: string): Promise<Set<string>> {
	const activity = new Map((await broker.activity(ids)).map((a) => [a.conversionId, a]));
	return new Set(
		ids.filter((id) => {
			const job = activity.get(id);
			return !job || (!job.attended && job.lastActiveAt <= Date.parse(cutoff));
		}),
	);
}

/**
 * Fails conversions that nothing has moved for the wait limit: D1 saw no transition since the cutoff, and the broker
 * has no live lease for them and no sign of life since then. Their jobs are dropped from the broker.
 */
export async function failConversionsPastWaitLimit(env: Env, now: Date): Promise<number> {
	const limitSeconds = conversionWaitLimitSeconds(env);
	if (limitSeconds === null) return 0;
	const cutoff = secondsBefore(now, limitSeconds);
	const candidates = await conversionsUnchangedSince(env, NON_TERMINAL_STATUSES, cutoff, WAIT_CANDIDATES);
	if (candidates.length === 0) return 0;
	const broker = jobBroker(env);
	const idle = await idleSince(
		broker,
		candidates.map((row) => row.id),
		cutoff,
	);
	const overdue = candidates.filter((row) => idle.has(row.id));
	let failed = 0;
	for (const row of overdue) {
		const neverUploaded = row.status === "pending_preprocessing" && row.uploadStatus === "awaiting_upload";
		const result = await failConversion(env, row.id, failure(neverUploaded ? "never_uploaded" : "timed_out"), now);
		if (result.outcome === "applied") failed++;
	}
	if (overdue.length > 0) await broker.discard(overdue.map((row) => row.id));
	return failed;
}

/**
 * Fails voices left `validating` for the wait limit with no runner on their job (none that takes validations is
 * running, or every one lost it): the owner learns why from the voice, as a conversion's client would. Their jobs
 * are dropped from the broker.
 */
export async function failValidationsPastWaitLimit(env: Env, now: Date): Promise<number> {
	const limitSeconds = conversionWaitLimitSeconds(env);
	if (limitSeconds === null) return 0;
	const cutoff = secondsBefore(now, limitSeconds);
	const ids = await validatingVoicesBefore(env, cutoff, BATCH);
	if (ids.length === 0) return 0;
	const broker = jobBroker(env);
	const overdue = [...(await idleSince(broker, ids, cutoff))];
	let failed = 0;
	for (const id of overdue) {
		if (await failValidation(env, id, `no worker took it within ${formatSeconds(limitSeconds)}`)) failed++;
	}
	if (overdue.length > 0) await broker.discard(overdue);
	return failed;
}

export async function redispatchLostValidations(env: Env, now: Date): Promise<number> {
	const ids = await validatingVoicesBefore(env, secondsBefore(now, JOB_REDISPATCH_AFTER_SECONDS), BATCH);
	if (ids.length === 0) return 0;
	const known = new Set(await jobBroker(env).knownJobs(ids));
	const lost = ids.filter((id) => !known.has(id));
	for (const id of lost) await enqueueValidation(env, id);
	return lost.length;
}

/**
 * Starts the validation of voices whose last file went in a while ago while the voice stayed `awaiting_upload`:
 * nothing else would (a new upload or new addresses are refused, every file being in).
 */
export async function startValidationsOfUploadedVoices(env: Env, now: Date): Promise<number> {
	const ids = await uploadedVoicesNotValidating(env, secondsBefore(now, JOB_REDISPATCH_AFTER_SECONDS), BATCH);
	for (const id of ids) await startValidation(env, id);
	return ids.length;
}

export async function runSafetyNet(env: Env, now = new Date()): Promise<SafetyNetReport> {
	const report: SafetyNetReport = {
		eventsResent: 0,
		jobsRedispatched: 0,
		lostSourceFailed: 0,
		outcomesResent: 0,
		waitLimitFailed: 0,
		leasesExpired: 0,
		idempotencyKeysPurged: 0,
		preprocessingResent: 0,
		validationsRedispatched: 0,
		validationsStarted: 0,
		validationWaitLimitFailed: 0,
		voiceFilesRemoved: 0,
		audioFileObjectsRemoved: 0,
		replacedModelFilesRemoved: 0,
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
	await step("lost sources", async () => {
		report.lostSourceFailed = await failConversionsWithLostSource(env, now);
	});
	await step("outcomes", async () => {
		report.outcomesResent = await resendLostOutcomes(env, now);
	});
	await step("wait limit", async () => {
		report.waitLimitFailed = await failConversionsPastWaitLimit(env, now);
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
	await step("validations", async () => {
		report.validationWaitLimitFailed = await failValidationsPastWaitLimit(env, now);
		report.validationsRedispatched = await redispatchLostValidations(env, now);
		report.validationsStarted = await startValidationsOfUploadedVoices(env, now);
	});
	await step("voice files", async () => {
		report.voiceFilesRemoved = await removeFilesOfDeletedVoices(env, BATCH);
	});
	await step("audio files", async () => {
		report.audioFileObjectsRemoved = await removeObjectsOfDeletedAudioFiles(env, now, BATCH);
	});
	await step("replaced model files", async () => {
		report.replacedModelFilesRemoved = await removeReplacedModelFiles(env, now, BATCH);
	});
	const acted =
		report.validationsRedispatched +
		report.validationsStarted +
		report.validationWaitLimitFailed +
		report.voiceFilesRemoved +
		report.replacedModelFilesRemoved +
		report.eventsResent +
		report.jobsRedispatched +
		report.lostSourceFailed +
		report.outcomesResent +
		report.waitLimitFailed +
		report.leasesExpired +
		report.preprocessingResent;
	if (acted > 0 || report.errors.length > 0) {
		const line = JSON.stringify({ level: report.errors.length ? "error" : "warn", msg: "safety net", ...report });
		if (report.errors.length) console.error(line);
		else console.warn(line);
	}
	return report;
}
