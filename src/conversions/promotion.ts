/**
 * Event-driven promotion: a conversion is queued and sent on `conversion-jobs` the moment its audio is ready
 * (at creation, or when preprocessing reports), never by a periodic scan.
 */

import type { PreprocessingOutcome } from "../audio-files/preprocessing-listeners.ts";
import { conversionsWaitingOnFile, findDispatchableJobs } from "./conversion-store.ts";
import { preprocessingFailure } from "./failure-messages.ts";
import { jobBroker } from "./job-broker-client.ts";
import { failConversion, promoteConversion, promoteWaitingOnFile } from "./state-machine.ts";

export interface ConversionJobMessage {
	conversion_id: string;
}

/**
 * Dispatches queued conversions. The `conversion-jobs` message is the durable path (at-least-once, retried,
 * dead-lettered); it is sent first. Then the jobs are also handed to the broker directly, because a queue
 * consumer batches for up to `max_batch_timeout` and dispatch should take milliseconds. The broker is
 * idempotent by conversion id, so the message arriving later is a no-op.
 * Never throws: the conversions are already `queued`, so a caller's retry would find nothing to promote;
 * if both paths fail, the cron safety net re-sends queued jobs the broker does not hold.
 */
export async function dispatchConversions(
	env: Pick<Env, "CONVERSION_JOBS_QUEUE" | "DB" | "JOB_BROKER">,
	ids: string[],
): Promise<void> {
	if (ids.length === 0) return;
	const warn = (msg: string, error: unknown) =>
		console.warn(
			JSON.stringify({
				level: "warn",
				msg,
				conversion_ids: ids.slice(0, 10),
				error: error instanceof Error ? error.message : String(error),
			}),
		);
	try {
		// sendBatch takes at most 100 messages.
		for (let i = 0; i < ids.length; i += 100) {
			const chunk = ids.slice(i, i + 100);
			await env.CONVERSION_JOBS_QUEUE.sendBatch(
				chunk.map((id) => ({ body: { conversion_id: id } satisfies ConversionJobMessage, contentType: "json" })),
			);
		}
	} catch (error) {
		warn("conversion-jobs send failed; relying on the direct hand-over and the safety net", error);
	}
	try {
		const jobs = await findDispatchableJobs(env, ids);
		const broker = jobBroker(env);
		for (const job of jobs) await broker.enqueue(job);
	} catch (error) {
		warn("direct hand-over to the broker failed; the queue message will deliver the jobs", error);
	}
}

/**
 * Preprocessing of a file ended: queue the conversions waiting on it, or fail them with the reason.
 * Idempotent: a duplicate notification finds nothing left in `pending_preprocessing`.
 */
export async function promoteWaitingConversions(env: Env, event: PreprocessingOutcome): Promise<void> {
	if (event.outcome === "ready") {
		const promoted = await promoteWaitingOnFile(env, event.audioFileId);
		await dispatchConversions(env, promoted);
		return;
	}
	const waiting = await conversionsWaitingOnFile(env, event.audioFileId);
	const reason = preprocessingFailure(event.errorCode, event.errorMessage);
	for (const id of waiting) await failConversion(env, id, reason);
}

/** At creation: a conversion whose file is already preprocessed starts at once. */
export async function promoteIfReady(env: Env, conversionId: string): Promise<boolean> {
	if (!(await promoteConversion(env, conversionId))) return false;
	await dispatchConversions(env, [conversionId]);
	return true;
}
