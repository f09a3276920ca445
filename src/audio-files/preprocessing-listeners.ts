/**
 * What happens when preprocessing of an audio file ends. Preprocessing calls every registered listener once
 * per outcome (and again, harmlessly, on duplicate queue messages); listeners must be idempotent.
 */
export interface PreprocessingOutcome {
	audioFileId: string;
	accountId: string;
	outcome: "ready" | "failed";
	errorCode?: string;
	errorMessage?: string;
}

export type PreprocessingListener = (env: Env, event: PreprocessingOutcome) => Promise<void>;

const listeners: PreprocessingListener[] = [];

export function registerPreprocessingListener(listener: PreprocessingListener): void {
	if (!listeners.includes(listener)) listeners.push(listener);
}

/** Runs every listener; a throw propagates so the preprocessing message is retried. */
export async function notifyPreprocessingListeners(env: Env, event: PreprocessingOutcome): Promise<void> {
	for (const listener of listeners) await listener(env, event);
}
