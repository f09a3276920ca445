/**
 * Event-driven promotion: a conversion is queued and sent on `conversion-jobs` the moment its audio is ready
 * (at creation, or when preprocessing reports), never by a periodic scan.
 */

import type { PreprocessingOutcome } from "../audio-files/preprocessing-listeners.ts";
import { registerPreprocessingListener } from "../audio-files/preprocessing-listeners.ts";
import { preprocessingFailure } from "./failure-messages.ts";
import { failConversion, promoteConversion, promoteWaitingOnFile } from "./state-machine.ts";

export interface ConversionJobMessage {
	conversion_id: string;
}

/** Sends jobs to the `conversion-jobs` queue (ids only; the consumer reads the rest from D1). */
export async function dispatchConversions(env: Pick<Env, "CONVERSION_JOBS_QUEUE">, ids: string[]): Promise<void> {
	// sendBatch takes at most 100 messages.
	for (let i = 0; i < ids.length; i += 100) {
		const chunk = ids.slice(i, i + 100);
		await env.CONVERSION_JOBS_QUEUE.sendBatch(
			chunk.map((id) => ({ body: { conversion_id: id } satisfies ConversionJobMessage, contentType: "json" })),
		);
	}
}

/**
 * Preprocessing of a file ended: queue the conversions waiting on it, or fail them with the reason.
 * Idempotent: a duplicate notification finds nothing left in `pending_preprocessing`.
 */
export async function promoteWaitingConversions(env: Env, event: PreprocessingOutcome): Promise<void> {
	if (event.outcome === "ready") {
		const promoted = await promoteWaitingOnFile(env, event.audioFileId);
		// If this send is lost the conversions stay `queued` and the cron safety net re-sends them.
		await dispatchConversions(env, promoted);
		return;
	}
	const waiting = await env.DB.prepare(
		"SELECT id FROM voice_conversions WHERE audio_file_id = ? AND status = 'pending_preprocessing'",
	)
		.bind(event.audioFileId)
		.all<{ id: string }>();
	const reason = preprocessingFailure(event.errorCode, event.errorMessage);
	for (const { id } of waiting.results) await failConversion(env, id, reason);
}

/** At creation: a conversion whose file is already preprocessed starts at once. */
export async function promoteIfReady(env: Env, conversionId: string): Promise<boolean> {
	if (!(await promoteConversion(env, conversionId))) return false;
	await dispatchConversions(env, [conversionId]);
	return true;
}

registerPreprocessingListener(promoteWaitingConversions);
