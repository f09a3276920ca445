/**
 * The one error model. Expected failures are thrown as `ApiError`s (status, stable code, client-safe message)
 * and rendered in one place into the spec's envelope; anything else becomes a logged, generic 500.
 */
import type { z } from "zod";
import { API_ERRORS, type ApiErrorCode, type ApiErrorStatus, type CodeWithStatus } from "../contracts/errors.ts";

export interface FieldProblem {
	field: string;
	message: string;
}

/** The status must be one the code is listed with in `src/contracts/errors.ts` (checked by the compiler). */
export class ApiError<C extends ApiErrorCode = ApiErrorCode> extends Error {
	readonly status: number;
	readonly code: C;
	readonly errors: FieldProblem[] | undefined;
	readonly headers: Record<string, string>;

	constructor(
		status: ApiErrorStatus<C>,
		code: C,
		message: string,
		options: { errors?: FieldProblem[]; headers?: Record<string, string> } = {},
	) {
		super(message);
		this.name = "ApiError";
		this.status = status;
		this.code = code;
		this.errors = options.errors;
		this.headers = options.headers ?? {};
	}
}

export const badRequest = (message: string, errors?: FieldProblem[]) =>
	new ApiError(400, "invalid_request", message, { errors });
export const notFound = (what = "Resource") => new ApiError(404, "not_found", `${what} not found`);
export const conflict = (code: CodeWithStatus<409>, message: string) => new ApiError(409, code, message);
export const forbidden = (code: CodeWithStatus<403>, message: string) => new ApiError(403, code, message);

/** RFC 6750 §3: 401 with `WWW-Authenticate: Bearer`; no error attributes when no credentials were sent. */
export function unauthorized(message: string, tokenError?: "invalid_token" | "invalid_request"): ApiError {
	const challenge = tokenError
		? `Bearer realm="voice-conversion-api", error="${tokenError}", error_description="${message.replaceAll('"', "'")}"`
		: `Bearer realm="voice-conversion-api"`;
	return new ApiError(401, tokenError ?? "unauthorized", message, { headers: { "WWW-Authenticate": challenge } });
}

/** Turns zod issues into field problems whose `field` is the dotted path the client sent. */
export function fieldProblems(error: z.ZodError, prefix?: string): FieldProblem[] {
	return error.issues.map((issue) => {
		const path = issue.path.map(String).join(".");
		const field = [prefix, path].filter(Boolean).join(".") || (prefix ?? "body");
		return { field, message: issue.message };
	});
}

export function validationError(error: z.ZodError, prefix?: string): ApiError {
	const errors = fieldProblems(error, prefix);
	const first = errors[0];
	const message = first ? `Invalid ${first.field}: ${first.message}` : "Invalid request";
	return badRequest(message, errors);
}

export function errorResponse(error: ApiError): Response {
	// A code whose message is not for clients is answered like any unexpected error.
	if (!API_ERRORS[error.code].expose) return internalError(error);
	const body: Record<string, unknown> = { success: false, message: error.message, code: error.code };
	if (error.errors?.length) body.errors = error.errors;
	return Response.json(body, {
		status: error.status,
		headers: { "Cache-Control": "no-store", ...error.headers },
	});
}

/** Last line of defence: unknown errors are logged with a reference and never leak details. */
export function renderError(error: unknown, request?: Request): Response {
	if (error instanceof ApiError) return errorResponse(error);
	return internalError(error, request);
}

function internalError(error: unknown, request?: Request): Response {
	const reference = crypto.randomUUID();
	console.error(
		JSON.stringify({
			level: "error",
			msg: "unhandled error",
			reference,
			method: request?.method,
			path: request ? new URL(request.url).pathname : undefined,
			error: error instanceof Error ? { name: error.name, message: error.message, stack: error.stack } : String(error),
		}),
	);
	const code: CodeWithStatus<500> = "internal_error";
	return Response.json(
		{ success: false, message: `Internal server error (reference ${reference}). Please try again later.`, code },
		{ status: 500, headers: { "Cache-Control": "no-store" } },
	);
}
