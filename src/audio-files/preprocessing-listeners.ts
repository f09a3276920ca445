/**
 * The seam between preprocessing and conversions: who acts when a file's preprocessing ends (the conversion state
 * machine promotes or fails the conversions waiting on it), listed here. Listeners are called once per outcome, and
 * again when a duplicate or late queue message finds the outcome already recorded, so each must be idempotent. A
 * listener that throws makes the message be retried (and the listeners called again).
 */
import { promoteWaitingConversions } from "../conversions/promotion.ts";

export interface PreprocessingOutcome {
	audioFileId: string;
	accountId: string;
	outcome: "ready" | "failed";
	errorCode?: string;
	errorMessage?: string;
}

export type PreprocessingListener = (env: Env, outcome: PreprocessingOutcome) => Promise<void>;

/** In call order. Tests append an observer and remove it when done. */
export const PREPROCESSING_LISTENERS: PreprocessingListener[] = [promoteWaitingConversions];

export async function notifyPreprocessingListeners(env: Env, outcome: PreprocessingOutcome): Promise<void> {
	for (const listener of [...PREPROCESSING_LISTENERS]) await listener(env, outcome);
}
