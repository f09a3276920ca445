/**
 * How long a conversion may wait with no runner working on it (spec section 8: long processing is a matter for
 * support, not an enforced limit). A conversion whose runner keeps its lease alive is never failed by time; one that
 * waits (for its file's preprocessing, or for a free runner) fails after this long without a sign of life.
 */
import { UPLOAD_URL_SECONDS } from "../audio-files/limits.ts";

/**
 * An upload address is checked when the upload starts, so a large upload can still be streaming in when its window
 * closes: conversions waiting on a file never uploaded are failed only this long after its window closed.
 */
export const UPLOAD_GRACE_SECONDS = UPLOAD_URL_SECONDS;

/** A day: far beyond any wait a healthy service causes, short enough that a client is not left polling for ever. */
export const DEFAULT_CONVERSION_WAIT_LIMIT_SECONDS = 24 * 3600;

/**
 * `CONVERSION_WAIT_LIMIT_SECONDS` in seconds, or null when set to "0" (no limit). A value that is not a whole number
 * of seconds falls back to the default rather than failing conversions early.
 */
export function conversionWaitLimitSeconds(env: Pick<Env, "CONVERSION_WAIT_LIMIT_SECONDS">): number | null {
	const text = String(env.CONVERSION_WAIT_LIMIT_SECONDS ?? "").trim();
	if (!/^\d+$/.test(text)) return DEFAULT_CONVERSION_WAIT_LIMIT_SECONDS;
	const seconds = Number(text);
	return seconds === 0 ? null : seconds;
}

/** The limits a client can meet while a conversion waits, in words (the OpenAPI description states them). */
export function describeConversionTimeLimits(limitSeconds: number | null): string {
	const wait =
		limitSeconds === null
			? "A conversion that waits (for its file's preprocessing, or for a free worker) is never failed by time either."
			: `A conversion that nothing works on (it waits for its file's preprocessing, or for a free worker) fails with a time-out error_message after ${formatSeconds(limitSeconds)} without progress.`;
	return [
		"Time limits: a conversion that is being processed (its worker reports progress) is never stopped by time, however long it takes.",
		wait,
		`A conversion waiting for a file that can no longer arrive fails with that reason: the file was deleted, its upload of 100 MB or more was refused (at once), or its upload address expired without being regenerated (${formatSeconds(UPLOAD_GRACE_SECONDS)} after it expired, since an upload that started in time may still be arriving).`,
	].join(" ");
}

export function formatSeconds(seconds: number): string {
	if (seconds % 3600 === 0) return `${seconds / 3600} hour${seconds === 3600 ? "" : "s"}`;
	if (seconds % 60 === 0) return `${seconds / 60} minute${seconds === 60 ? "" : "s"}`;
	return `${seconds} seconds`;
}
