/**
 * Every error `code` the service sends, with its HTTP status and whether its message may be shown to the client.
 * `ApiError` accepts only a code listed here with one of its statuses, the OpenAPI document's error schema lists
 * these codes, and the SDK documents them. A code that can come with two statuses lists both (`invalid_request` is
 * 401 when it is the Bearer header that is malformed, RFC 6750 section 3.1).
 */
export const API_ERRORS = {
	// 400: the request itself is wrong.
	invalid_request: { status: [400, 401], expose: true },
	/** A `voice_settings` entry or `pitch_shift: "auto"` that the chosen voice cannot honour. */
	unsupported_voice_setting: { status: [400], expose: true },
	invalid_webhook_url: { status: [400], expose: true },
	empty_part: { status: [400], expose: true },
	upload_incomplete: { status: [400], expose: true },
	invalid_parts: { status: [400], expose: true },
	/** A voice file (or one of its parts) whose length is not the `size_bytes` the voice declared for it. */
	voice_file_size_mismatch: { status: [400], expose: true },
	unsupported_grant_type: { status: [400], expose: true },
	// 401: who is calling (OAuth 2.0 and Bearer token errors keep their RFC names).
	unauthorized: { status: [401], expose: true },
	invalid_token: { status: [401], expose: true },
	invalid_client: { status: [401], expose: true },
	invalid_scope: { status: [401], expose: true },
	// 403: a storage address whose signature does not hold, or that a newer upload address replaced.
	signature_invalid: { status: [403], expose: true },
	upload_url_superseded: { status: [403], expose: true },
	// 404, 405, 410: what is (not) there.
	not_found: { status: [404], expose: true },
	upload_not_found: { status: [404], expose: true },
	method_not_allowed: { status: [405], expose: true },
	audio_file_deleted: { status: [410], expose: true },
	voice_deleted: { status: [410], expose: true },
	// 409: the resource's state does not allow it.
	already_uploaded: { status: [409], expose: true },
	upload_refused: { status: [409], expose: true },
	audio_file_in_use: { status: [409], expose: true },
	idempotency_conflict: { status: [409], expose: true },
	idempotency_key_reused: { status: [409], expose: true },
	idempotency_request_in_progress: { status: [409], expose: true },
	subscription_limit_reached: { status: [409], expose: true },
	subscription_inactive: { status: [409], expose: true },
	lease_lost: { status: [409], expose: true },
	output_missing: { status: [409], expose: true },
	/** A voice used in a conversion before its validation made it `ready` (or after it failed). */
	voice_not_ready: { status: [409], expose: true },
	voice_limit_reached: { status: [409], expose: true },
	voice_name_taken: { status: [409], expose: true },
	voice_changing: { status: [409], expose: true },
	voice_file_upload_expired: { status: [409], expose: true },
	// 411, 413, 415: the body.
	length_required: { status: [411], expose: true },
	payload_too_large: { status: [413], expose: true },
	unsupported_media_type: { status: [415], expose: true },
	/** Uploaded voice file bytes that are not what their role accepts (recognised by the bytes, not the name). */
	voice_file_unrecognised: { status: [415], expose: true },
	// 416: a storage read's Range outside the object.
	range_not_satisfiable: { status: [416], expose: true },
	// 429: past a request budget (`src/http/rate-limits.ts`); `Retry-After` says when to come back.
	rate_limited: { status: [429], expose: true },
	// 500: never the underlying error's message, only a reference to the log line.
	internal_error: { status: [500], expose: false },
} as const satisfies Record<string, { status: readonly number[]; expose: boolean }>;

export type ApiErrorCode = keyof typeof API_ERRORS;
export type ApiErrorStatus<C extends ApiErrorCode = ApiErrorCode> = (typeof API_ERRORS)[C]["status"][number];
/** The codes that come with `status`, e.g. `CodeWithStatus<409>`. */
export type CodeWithStatus<S extends number> = {
	[C in ApiErrorCode]: S extends ApiErrorStatus<C> ? C : never;
}[ApiErrorCode];

export const API_ERROR_CODES = Object.keys(API_ERRORS) as [ApiErrorCode, ...ApiErrorCode[]];
