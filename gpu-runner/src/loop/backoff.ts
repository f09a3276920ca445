/**
 * Exponential backoff with "full jitter" (a random wait between 0 and the capped exponential): many runners
 * that lost the API at the same moment do not come back in lockstep.
 */
export interface BackoffPolicy {
	baseMs: number;
	maxMs: number;
	random?: () => number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 500, maxMs: 30_000 };

export function backoffDelay(attempt: number, policy: BackoffPolicy = DEFAULT_BACKOFF): number {
	const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
	return Math.round((policy.random ?? Math.random)() * ceiling);
}

/** Sleep that ends early (without throwing) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
	return new Promise((resolve) => {
		if (signal?.aborted) return resolve();
		const timer = setTimeout(done, ms);
		function done() {
			clearTimeout(timer);
			signal?.removeEventListener("abort", done);
			resolve();
		}
		signal?.addEventListener("abort", done, { once: true });
	});
}
