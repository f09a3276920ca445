/**
 * Failures a job can end with, split the way the runner API splits them. A `PermanentJobError` fails the
 * conversion at once (retrying cannot help: the bytes are bad or the format is not supported); anything else
 * thrown while processing a job is reported as a transient `internal` failure so the broker tries again.
 */
import type { FAILURE_REASONS } from "../../src/contracts/runner.ts";

export type FailureReason = (typeof FAILURE_REASONS)[number];

export class PermanentJobError extends Error {
	readonly reason: FailureReason;

	constructor(reason: FailureReason, message: string, options?: { cause?: unknown }) {
		super(message, options);
		this.name = "PermanentJobError";
		this.reason = reason;
	}
}

export function corruptedSource(message: string, cause?: unknown): PermanentJobError {
	return new PermanentJobError("corrupted_source", `corrupted source audio: ${message}`, { cause });
}

export function unsupportedFormat(message: string): PermanentJobError {
	return new PermanentJobError("unsupported_format", `unsupported format: ${message}`);
}
