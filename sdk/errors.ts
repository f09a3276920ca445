/** The one error type the SDK throws: what failed, how the service (or the network) answered, and whether to retry. */
import type { ApiErrorCode } from "../src/contracts/errors.ts";

export interface FieldError {
	field: string;
	message: string;
}

export interface VoiceConversionErrorInit {
	/** HTTP status, or null when no response came back (network error, timeout) or the SDK refused locally. */
	status: number | null;
	/**
	 * The service's stable error code (an `ApiErrorCode`: `invalid_request`, `not_found`, `invalid_client`, ...; the
	 * list with statuses is `src/contracts/errors.ts`), the SDK's own (`SDK_ERROR_CODES`), or `http_<status>` for an
	 * answer without a code (a proxy's error page). A string, so that a code added later still reads.
	 */
	code: ApiErrorCode | SdkErrorCode | (string & {});
	message: string;
	fieldErrors?: FieldError[];
	/** Seconds from a `Retry-After` header, when the service sent one. */
	retryAfterSeconds?: number;
	cause?: unknown;
}

/** Codes the SDK uses for failures that are not an HTTP answer from the service. */
export const SDK_ERROR_CODES = {
	network: "network_error",
	timeout: "timeout",
	aborted: "aborted",
	invalidRequest: "invalid_request",
	fileTooLarge: "file_too_large",
	uploadExpired: "upload_url_expired",
	waitTimeout: "wait_timeout",
	notCompleted: "conversion_not_completed",
	unexpectedResponse: "unexpected_response",
} as const;
export type SdkErrorCode = (typeof SDK_ERROR_CODES)[keyof typeof SDK_ERROR_CODES];

export class VoiceConversionError extends Error {
	override readonly name = "VoiceConversionError";
	readonly status: number | null;
	readonly code: VoiceConversionErrorInit["code"];
	readonly fieldErrors: FieldError[];
	readonly retryAfterSeconds: number | undefined;

	constructor(init: VoiceConversionErrorInit) {
		super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
		this.status = init.status;
		this.code = init.code;
		this.fieldErrors = init.fieldErrors ?? [];
		this.retryAfterSeconds = init.retryAfterSeconds;
	}

	/**
	 * True for failures worth repeating unchanged: no answer at all, 408, 429, 5xx other than 501, and a 409 saying
	 * the first request with the same idempotency key is still being processed.
	 */
	get retryable(): boolean {
		if (this.status === null) return this.code === SDK_ERROR_CODES.network || this.code === SDK_ERROR_CODES.timeout;
		if (this.status === 409) return this.code === "idempotency_request_in_progress";
		return this.status === 408 || this.status === 429 || (this.status >= 500 && this.status !== 501);
	}

	/** One line for people: the message, then each field's problem. */
	describe(): string {
		const fields = this.fieldErrors.map((e) => `${e.field}: ${e.message}`);
		return fields.length > 0 ? `${this.message} (${fields.join("; ")})` : this.message;
	}
}

/** Builds the error for a non-2xx answer from whatever body came with it (JSON envelope, OAuth error, or text). */
export async function errorFromResponse(response: Response, what: string): Promise<VoiceConversionError> {
	const text = await response.text().catch(() => "");
	let body: Record<string, unknown> = {};
	try {
		const parsed = JSON.parse(text) as unknown;
		if (parsed && typeof parsed === "object") body = parsed as Record<string, unknown>;
	} catch {
		// Not JSON (a proxy's error page, an empty 403 from storage): the status speaks for itself.
	}
	const message =
		typeof body.message === "string"
			? body.message
			: typeof body.error_description === "string"
				? body.error_description
				: `${what} failed with HTTP ${response.status}${text && text.length < 200 ? `: ${text}` : ""}`;
	const code =
		typeof body.code === "string" ? body.code : typeof body.error === "string" ? body.error : `http_${response.status}`;
	return new VoiceConversionError({
		status: response.status,
		code,
		message,
		fieldErrors: Array.isArray(body.errors) ? (body.errors as FieldError[]) : [],
		retryAfterSeconds: retryAfterSeconds(response.headers),
	});
}

/**
 * Seconds a `Retry-After` asks for (RFC 9110 §10.2.3): a number of seconds, or an HTTP-date. A date is counted from
 * the response's own `Date` when it has one, so a client whose clock is minutes off still waits what was meant.
 */
export function retryAfterSeconds(headers: Headers, now = Date.now()): number | undefined {
	const value = headers.get("Retry-After")?.trim();
	if (!value) return undefined;
	const seconds = Number(value);
	if (Number.isFinite(seconds)) return seconds >= 0 ? seconds : undefined;
	const until = Date.parse(value);
	if (Number.isNaN(until)) return undefined;
	const sent = Date.parse(headers.get("Date") ?? "");
	return Math.max(0, Math.ceil((until - (Number.isNaN(sent) ? now : sent)) / 1000));
}
