/**
 * The seam between preprocessing and conversions: who acts when a file's preprocessing ends (the conversion state
 * machine promotes or fails the conversions waiting on it), listed here. Listeners are called once per outcome, and
 * again when a duplicate or late queue message finds the outcome already recorded, so each must be idempotent. A
 * listener that throws makes the message be retried (and the listeners called again).
 */
import { promoteWaitingConversions } from "../conversions/promotion.ts";
import type { AudioFileRow } from "./present-audio-file.ts";

export interface PreprocessingOutcome {
	audioFileId: string;
	accountId: string;
	outcome: "ready" | "failed";
	errorCode?: string;
	errorMessage?: string;
}

/** The outcome recorded on a file, or null while its preprocessing has not ended. */
export function outcomeOf(
	row: Pick<AudioFileRow, "id" | "accountId" | "preprocessingStatus" | "preprocessingErrorCode" | "preprocessingError">,
): PreprocessingOutcome | null {
	if (row.preprocessingStatus === "ready") {
		return { audioFileId: row.id, accountId: row.accountId, outcome: "ready" };
	}
	if (row.preprocessingStatus === "failed") {
		return {
			audioFileId: row.id,
			accountId: row.accountId,
			outcome: "failed",
			...(row.preprocessingErrorCode ? { errorCode: row.preprocessingErrorCode } : {}),
			...(row.preprocessingError ? { errorMessage: row.preprocessingError } : {}),
		};
	}
	return null;
}

export type PreprocessingListener = (env: Env, outcome: PreprocessingOutcome) => Promise<void>;

/** In call order. Tests append an observer and remove it when done. */
export const PREPROCESSING_LISTENERS: PreprocessingListener[] = [promoteWaitingConversions];

export async function notifyPreprocessingListeners(env: Env, outcome: PreprocessingOutcome): Promise<void> {
	for (const listener of [...PREPROCESSING_LISTENERS]) await listener(env, outcome);
}
