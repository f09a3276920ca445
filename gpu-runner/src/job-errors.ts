/**
 * Failures a job can end with, split the way the runner API splits them. A `PermanentJobError` fails the
 * conversion at once (retrying cannot help: the bytes are bad or the format is not supported), and so does an
 * engine's own error marked `permanent` (a model or index that cannot be read, invalid voice params); anything
 * else thrown while processing a job is reported as a transient `internal` failure so the broker tries again.
 */
import { FAILURE_REASONS } from "../../src/contracts/runner.ts";

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

/** The output WAV would be larger than the output address takes (`MAX_OUTPUT_BYTES`): no attempt could upload it. */
export function outputTooLarge(message: string): PermanentJobError {
	return new PermanentJobError("output_too_large", `output too large: ${message}`);
}

export function unsupportedFormat(message: string): PermanentJobError {
	return new PermanentJobError("unsupported_format", `unsupported format: ${message}`);
}

/**
 * Whether `error` should fail the job for good, and with which reason. Engines keep their own error types (the
 * lease loop never imports an engine, so a CPU-only runner never loads onnxruntime) and mark the ones a retry
 * would repeat with `permanent: true`; those fail as `internal`, the voice's fault rather than the source's.
 */
export function permanentFailure(error: unknown): { reason: FailureReason } | null {
	if (error instanceof PermanentJobError) return { reason: error.reason };
	const facts = error as Error & { permanent?: unknown; failureReason?: unknown };
	if (error instanceof Error && facts.permanent === true) {
		// An engine may name a reason of the API's own (the rvc engine's `voice_model_limits`), else `internal`.
		return { reason: isFailureReason(facts.failureReason) ? facts.failureReason : "internal" };
	}
	return null;
}

const isFailureReason = (reason: unknown): reason is FailureReason =>
	typeof reason === "string" && (FAILURE_REASONS as readonly string[]).includes(reason);
