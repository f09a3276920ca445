/**
 * Why a conversion failed, in words a client understands (spec section 7: corrupted source audio, unsupported
 * format, file over 100 MB, internal error; and, added, an output too large for one WAV, and an account's voice model
 * stopped at the runner's limits). Runner and operator
 * details are logged, never shown verbatim: every `error_message` a client sees comes from this table.
 */
import type { PreprocessingErrorCode } from "../audio-files/probe/probe-failure.ts";
import { MAX_ATTEMPTS } from "../contracts/broker.ts";
import { MAX_OUTPUT_BYTES } from "../contracts/runner.ts";

export const FAILURE_MESSAGES = {
	corrupted_source:
		"The source audio file is corrupted and could not be decoded. Upload a valid WAV, MP3 or FLAC file and create a new conversion.",
	unsupported_format: "The source audio format is not supported. Accepted formats are WAV, MP3 and FLAC.",
	too_large:
		"The source audio file is over 100 MB. Files must be under 100 MB; upload a smaller file and create a new conversion.",
	output_too_large: `The converted audio would be over ${MAX_OUTPUT_BYTES} bytes (2 GiB) as a WAV, the most one output can hold: about 3 hours 22 minutes of 44.1 kHz stereo. Split the recording into shorter files and create a conversion for each.`,
	empty_file: "The source audio file is empty. Upload a file that contains audio and create a new conversion.",
	source_missing:
		"The uploaded source audio could not be found in storage. Register and upload the file again, then create a new conversion.",
	source_deleted:
		"The source audio file was deleted before it could be converted. Upload it again and create a new conversion.",
	voice_model_limits:
		"The voice's model was stopped during the conversion because it ran longer or used more memory than a voice model may. Converting with this voice again will fail the same way: create the conversion with another voice, or have the voice's owner create the voice again from the model as RVC exports it.",
	internal: "An internal error occurred while converting the audio. Please create the conversion again.",
	attempts_exhausted: `The conversion failed after ${MAX_ATTEMPTS} attempts because the conversion worker stopped responding. Please create the conversion again.`,
	timed_out:
		"The conversion waited too long without being processed and was stopped. Please create the conversion again.",
	never_uploaded:
		"The source audio file was not uploaded before its upload address expired. Upload it and create a new conversion.",
} as const;
export type FailureCode = keyof typeof FAILURE_MESSAGES;

export interface Failure {
	code: string;
	message: string;
}

export const failure = (code: FailureCode): Failure => ({ code, message: FAILURE_MESSAGES[code] });

/**
 * The client-facing cause of each code preprocessing records on a file. Exhaustive by type, so a new preprocessing
 * code cannot reach a client without its own message.
 */
export const PREPROCESSING_FAILURES: Record<PreprocessingErrorCode, FailureCode> = {
	empty_file: "empty_file",
	truncated: "corrupted_source",
	corrupted: "corrupted_source",
	unsupported_format: "unsupported_format",
	zero_duration: "corrupted_source",
	too_large: "too_large",
	missing_object: "source_missing",
	internal_error: "internal",
};

const isPreprocessingErrorCode = (code: string): code is PreprocessingErrorCode =>
	Object.hasOwn(PREPROCESSING_FAILURES, code);

/** The failure of a conversion whose source audio could not be preprocessed. */
export function preprocessingFailure(errorCode: string | null | undefined, reason: string | null | undefined): Failure {
	if (errorCode && isPreprocessingErrorCode(errorCode)) return failure(PREPROCESSING_FAILURES[errorCode]);
	// A row written before its code was known to this table: keep the recorded reason rather than invent one.
	const detail = reason?.trim() ? ` ${reason.trim().replace(/\.?$/, ".")}` : "";
	return { code: errorCode || "preprocessing_failed", message: `The source audio could not be processed.${detail}` };
}
