/**
 * Why preprocessing refused a file: a stable code for programs and a sentence for people. Parsers throw a
 * `ProbeFailure`; `probeAudio` turns it into a value, so any other error is an I/O problem worth retrying.
 */
export const PROBE_FAILURE_CODES = [
	"empty_file",
	"truncated",
	"corrupted",
	"unsupported_format",
	"zero_duration",
	"too_large",
	"missing_object",
] as const;
/** Codes a file can fail preprocessing with: the probe's, plus `internal_error` when retries ran out. */
export type PreprocessingErrorCode = ProbeFailureCode | "internal_error";
export type ProbeFailureCode = (typeof PROBE_FAILURE_CODES)[number];

export class ProbeFailure extends Error {
	readonly code: ProbeFailureCode;
	constructor(code: ProbeFailureCode, message: string) {
		super(message);
		this.name = "ProbeFailure";
		this.code = code;
	}
}

export const truncated = (message: string) => new ProbeFailure("truncated", message);
export const corrupted = (message: string) => new ProbeFailure("corrupted", message);
export const unsupported = (message: string) => new ProbeFailure("unsupported_format", message);
export const zeroDuration = (message: string) => new ProbeFailure("zero_duration", message);
