/** Where converted audio goes in R2, and how big it may be. */

/** A WAV of 100 MB of compressed source can be large (about 10 minutes of 48 kHz stereo per 100 MB of WAV). */
export { MAX_OUTPUT_BYTES } from "../contracts/runner.ts";
export const OUTPUT_CONTENT_TYPE = "audio/wav";

/**
 * One key per lease: a runner that lost its lease and uploads late can never overwrite the output of the
 * lease that completed the conversion.
 */
export const outputObjectKey = (accountId: string, conversionId: string, leaseId: string) =>
	`outputs/${accountId}/${conversionId}/${leaseId}.wav`;

/**
 * How long after a conversion lease ended without completing the broker removes its output. A complete that passed its
 * lease check just before the lease ended may still be writing the conversion's output to D1; by then it has, and the
 * removal leaves what D1 names alone.
 */
export const UNUSED_OUTPUT_GRACE_MS = 60_000;

/** R2's smallest part (every part but the last must be at least this big). */
export const MIN_OUTPUT_PART_BYTES = 5 * 1024 ** 2;
/** Under the smallest zone request-body limit (100 MB), whichever way MB is read. */
export const MAX_OUTPUT_PART_BYTES = 95_000_000;
export const DEFAULT_OUTPUT_PART_BYTES = 64 * 1024 ** 2;

/** The part size runners use for outputs larger than it: `OUTPUT_PART_BYTES`, kept within R2's and the zone's limits. */
export function outputPartBytes(env: Pick<Env, "OUTPUT_PART_BYTES">): number {
	const configured = Number(env.OUTPUT_PART_BYTES);
	if (!Number.isInteger(configured) || configured <= 0) return DEFAULT_OUTPUT_PART_BYTES;
	return Math.min(MAX_OUTPUT_PART_BYTES, Math.max(MIN_OUTPUT_PART_BYTES, configured));
}

/** R2 names an unknown or finished multipart upload id in its error message (`NoSuchUpload`). */
export const isNoSuchUpload = (error: unknown) => /NoSuchUpload|upload.*(not exist|not found)/i.test(String(error));
