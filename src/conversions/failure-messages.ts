/**
 * Why a conversion failed, in words a client understands (spec section 7: corrupted source audio, unsupported
 * format, file over 100 MB, internal error). Runner and operator details are logged, never shown verbatim:
 * every `error_message` a client sees comes from this table.
 */
import { MAX_ATTEMPTS } from "../contracts/broker.ts";

export const FAILURE_MESSAGES = {
	corrupted_source:
		"The source audio file is corrupted and could not be decoded. Upload a valid WAV, MP3 or FLAC file and create a new conversion.",
	unsupported_format: "The source audio format is not supported. Accepted formats are WAV, MP3 and FLAC.",
	too_large: "The source audio file is too large. Files must be under 100 MB.",
	empty_file: "The source audio file is empty. Upload a file that contains audio and create a new conversion.",
	internal: "An internal error occurred while converting the audio. Please create the conversion again.",
	attempts_exhausted: `The conversion failed after ${MAX_ATTEMPTS} attempts because the conversion worker stopped responding. Please create the conversion again.`,
	timed_out: "The conversion did not finish in time and was stopped. Please create the conversion again.",
	never_uploaded: "The source audio file was never uploaded. Upload it and create a new conversion.",
} as const;
export type FailureCode = keyof typeof FAILURE_MESSAGES;

export interface Failure {
	code: string;
	message: string;
}

export const failure = (code: FailureCode): Failure => ({ code, message: FAILURE_MESSAGES[code] });

/** Preprocessing reports its own codes (issue 3); they map onto the same client-facing causes. */
const PREPROCESSING_CODES: Record<string, FailureCode> = {
	corrupted: "corrupted_source",
	corrupted_source: "corrupted_source",
	truncated: "corrupted_source",
	zero_duration: "corrupted_source",
	unsupported_format: "unsupported_format",
	too_large: "too_large",
	empty_file: "empty_file",
	internal: "internal",
};

/** The failure of a conversion whose source audio could not be preprocessed. */
export function preprocessingFailure(errorCode: string | null | undefined, reason: string | null | undefined): Failure {
	const known = errorCode ? PREPROCESSING_CODES[errorCode] : undefined;
	if (known) return failure(known);
	const detail = reason?.trim() ? ` ${reason.trim().replace(/\.?$/, ".")}` : "";
	return { code: errorCode || "preprocessing_failed", message: `The source audio could not be processed.${detail}` };
}
