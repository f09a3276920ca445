/** Failures of runner API calls, with what the lease loop needs to decide: retry, give up, or drop the job. */
import { RUNNER_ERROR_CODES } from "../../../src/contracts/runner.ts";

export class ApiError extends Error {
	readonly operation: string;
	/** HTTP status; 0 when no response arrived. */
	readonly status: number;
	readonly code: string;

	constructor(operation: string, status: number, code: string, message: string, options?: { cause?: unknown }) {
		super(`${operation}: ${message}${status ? ` (HTTP ${status}, ${code})` : ""}`, options);
		this.name = "ApiError";
		this.operation = operation;
		this.status = status;
		this.code = code;
	}

	/** Network errors, 408, 429 and 5xx may succeed later; other 4xx will not. */
	get retryable(): boolean {
		return this.status === 0 || this.status === 408 || this.status === 429 || this.status >= 500;
	}

	get leaseLost(): boolean {
		return this.status === 409 && this.code === RUNNER_ERROR_CODES.LEASE_LOST;
	}

	static fromResponse(operation: string, status: number, body: unknown): ApiError {
		const envelope = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
		const code =
			typeof envelope.code === "string"
				? envelope.code
				: typeof envelope.error === "string"
					? envelope.error
					: "http_error";
		const message = typeof envelope.message === "string" ? envelope.message : `HTTP ${status}`;
		return new ApiError(operation, status, code, message.slice(0, 500));
	}
}
