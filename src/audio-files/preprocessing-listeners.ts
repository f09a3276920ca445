/**
 * The seam between preprocessing and conversions: whoever must act when a file's preprocessing ends (the conversion
 * state machine promotes or fails the conversions waiting on it) registers here. Listeners are called once per
 * outcome, and again when a duplicate or late queue message finds the outcome already recorded, so each must be
 * idempotent. A listener that throws makes the message be retried (and the listeners called again).
 */
export interface PreprocessingOutcome {
	audioFileId: string;
	accountId: string;
	outcome: "ready" | "failed";
	errorCode?: string;
	errorMessage?: string;
}

export type PreprocessingListener = (env: Env, outcome: PreprocessingOutcome) => Promise<void>;

const listeners: PreprocessingListener[] = [];

/** Registers a listener; returns a function that removes it (for tests). */
export function registerPreprocessingListener(listener: PreprocessingListener): () => void {
	if (!listeners.includes(listener)) listeners.push(listener);
	return () => {
		const index = listeners.indexOf(listener);
		if (index >= 0) listeners.splice(index, 1);
	};
}

export async function notifyPreprocessingListeners(env: Env, outcome: PreprocessingOutcome): Promise<void> {
	for (const listener of [...listeners]) await listener(env, outcome);
}
