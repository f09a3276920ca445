/** Where converted audio goes in R2, and how big it may be. */

/** A WAV of 100 MB of compressed source can be large (about 10 minutes of 48 kHz stereo per 100 MB of WAV). */
export const MAX_OUTPUT_BYTES = 2 * 1024 ** 3;
export const OUTPUT_CONTENT_TYPE = "audio/wav";

/**
 * One key per lease: a runner that lost its lease and uploads late can never overwrite the output of the
 * lease that completed the conversion.
 */
export const outputObjectKey = (accountId: string, conversionId: string, leaseId: string) =>
	`outputs/${accountId}/${conversionId}/${leaseId}.wav`;
