/**
 * HTTP client of the runner API (`/internal/v1/*`, contract in src/contracts/runner.ts). Trust boundary:
 * every response is validated against the contract before the loop acts on it.
 */
import { z } from "zod";
import {
	type CompleteRequest,
	type FailRequest,
	HeartbeatResponse,
	Lease,
	type LeaseRequest,
	OutputUpload,
	UploadedPart,
	VoiceValidationLease,
	type VoiceValidationReport,
} from "../../../src/contracts/runner.ts";
import type { OutputUploads } from "../storage/output-upload.ts";
import { putFileRange } from "../storage/transfer.ts";
import { ApiError } from "./api-error.ts";
import type { TokenSource } from "./token-provider.ts";

/** A lease the Worker sent that does not match the contract: it must still be answered, by id. */
export interface MalformedLease {
	leaseId: string;
	problem: string;
}

export interface LeaseBatch {
	leases: Lease[];
	/** `validate_voice` jobs, for runners that asked for them (absent: none). */
	validations?: VoiceValidationLease[];
	malformed: MalformedLease[];
	/** Voices among `loaded_voice_ids` that were deleted: their files go from the cache (absent: none). */
	forgetVoiceIds?: string[];
}

/** What the lease loop needs from the Worker; tests and integration harnesses can supply their own. */
export interface RunnerApi {
	lease(request: LeaseRequest, signal: AbortSignal): Promise<LeaseBatch>;
	heartbeat(leaseId: string, progress: number | undefined): Promise<{ lease_expires_at: string }>;
	complete(leaseId: string, body: CompleteRequest): Promise<void>;
	fail(leaseId: string, body: FailRequest): Promise<void>;
	release(leaseId: string, reason: string): Promise<void>;
	/** Ends the long-poll named `waitId` (its request's `wait_id`), which the runner gave up on when stopping. */
	cancelWait(waitId: string): Promise<void>;
	/** The outcome of a `validate_voice` lease (ends it, like `complete`). */
	reportValidation(leaseId: string, report: VoiceValidationReport): Promise<void>;
}

const Envelope = z.object({ success: z.literal(true), data: z.unknown() });
const LeaseList = z.object({
	leases: z.array(z.unknown()),
	validations: z.array(z.unknown()).default([]),
	forget_voice_ids: z.array(z.uuid()).default([]).catch([]),
});
const REQUEST_TIMEOUT_MS = 30_000;

export interface RunnerApiClientOptions {
	apiBaseUrl: string;
	tokens: TokenSource;
	fetch?: typeof fetch;
}

export class RunnerApiClient implements RunnerApi, OutputUploads {
	#options: RunnerApiClientOptions;

	constructor(options: RunnerApiClientOptions) {
		this.#options = options;
	}

	async lease(request: LeaseRequest, signal: AbortSignal): Promise<LeaseBatch> {
		// The server may hold the request for wait_seconds; allow that plus a margin.
		const timeout = AbortSignal.timeout((request.wait_seconds + 15) * 1000);
		const data = await this.#call("lease", "/internal/v1/leases", request, AbortSignal.any([signal, timeout]));
		const list = LeaseList.safeParse(data);
		if (!list.success) throw new ApiError("lease", 200, "bad_response", "lease response has no leases array");
		const batch = {
			leases: [] as Lease[],
			validations: [] as VoiceValidationLease[],
			malformed: [] as MalformedLease[],
			forgetVoiceIds: list.data.forget_voice_ids,
		};
		const sort = <T>(raws: unknown[], schema: z.ZodType<T>, into: T[]) => {
			for (const raw of raws) {
				const parsed = schema.safeParse(raw);
				if (parsed.success) into.push(parsed.data);
				else {
					const id = (raw as { lease_id?: unknown } | null)?.lease_id;
					if (typeof id === "string") batch.malformed.push({ leaseId: id, problem: z.prettifyError(parsed.error) });
				}
			}
		};
		sort(list.data.leases, Lease, batch.leases);
		sort(list.data.validations, VoiceValidationLease, batch.validations);
		return batch;
	}

	async heartbeat(leaseId: string, progress: number | undefined): Promise<{ lease_expires_at: string }> {
		const data = await this.#call("heartbeat", `/internal/v1/leases/${encodeURIComponent(leaseId)}/heartbeat`, {
			progress,
		});
		const parsed = HeartbeatResponse.safeParse(data);
		if (!parsed.success)
			throw new ApiError("heartbeat", 200, "bad_response", "heartbeat response has no lease_expires_at");
		return parsed.data;
	}

	async complete(leaseId: string, body: CompleteRequest): Promise<void> {
		await this.#call("complete", `/internal/v1/leases/${encodeURIComponent(leaseId)}/complete`, body);
	}

	async fail(leaseId: string, body: FailRequest): Promise<void> {
		await this.#call("fail", `/internal/v1/leases/${encodeURIComponent(leaseId)}/fail`, body);
	}

	async release(leaseId: string, reason: string): Promise<void> {
		await this.#call("release", `/internal/v1/leases/${encodeURIComponent(leaseId)}/release`, { reason });
	}

	async cancelWait(waitId: string): Promise<void> {
		await this.#call("cancel wait", `/internal/v1/leases/waits/${encodeURIComponent(waitId)}/cancel`, {});
	}

	async reportValidation(leaseId: string, report: VoiceValidationReport): Promise<void> {
		await this.#call(
			"report validation",
			`/internal/v1/leases/${encodeURIComponent(leaseId)}/voice-validation`,
			report,
		);
	}

	async startOutputUpload(leaseId: string, signal: AbortSignal): Promise<OutputUpload> {
		const data = await this.#call("start output upload", outputUploadsPath(leaseId), {}, withTimeout(signal));
		const parsed = OutputUpload.safeParse(data);
		if (!parsed.success) throw new ApiError("start output upload", 200, "bad_response", "no upload_id in response");
		return parsed.data;
	}

	async uploadOutputPart(
		leaseId: string,
		uploadId: string,
		part: { number: number; path: string; start: number; length: number },
		signal: AbortSignal,
	): Promise<UploadedPart> {
		const url = `${this.#options.apiBaseUrl}${outputUploadsPath(leaseId)}/${encodeURIComponent(uploadId)}/parts/${part.number}`;
		for (let attempt = 1; ; attempt++) {
			const token = await this.#options.tokens.get();
			const answer = await putFileRange(
				url,
				part.path,
				part,
				{ authorization: `Bearer ${token}`, "content-type": "application/octet-stream", accept: "application/json" },
				signal,
			);
			let json: unknown;
			try {
				json = JSON.parse(answer.body);
			} catch {
				json = undefined;
			}
			if (answer.status === 401 && attempt === 1) {
				this.#options.tokens.invalidate();
				continue;
			}
			if (answer.status < 200 || answer.status >= 300)
				throw ApiError.fromResponse("upload output part", answer.status, json);
			const parsed = Envelope.extend({ data: UploadedPart }).safeParse(json);
			if (!parsed.success)
				throw new ApiError("upload output part", answer.status, "bad_response", "no etag in response");
			return parsed.data.data;
		}
	}

	async completeOutputUpload(
		leaseId: string,
		uploadId: string,
		parts: UploadedPart[],
		signal: AbortSignal,
	): Promise<void> {
		await this.#call(
			"complete output upload",
			`${outputUploadsPath(leaseId)}/${encodeURIComponent(uploadId)}/complete`,
			{ parts },
			withTimeout(signal),
		);
	}

	async abortOutputUpload(leaseId: string, uploadId: string): Promise<void> {
		await this.#call(
			"abort output upload",
			`${outputUploadsPath(leaseId)}/${encodeURIComponent(uploadId)}`,
			undefined,
			undefined,
			"DELETE",
		);
	}

	async #call(
		operation: string,
		path: string,
		body: unknown,
		signal?: AbortSignal,
		method: "POST" | "DELETE" = "POST",
	): Promise<unknown> {
		for (let attempt = 1; ; attempt++) {
			const token = await this.#options.tokens.get();
			let response: Response;
			try {
				response = await (this.#options.fetch ?? fetch)(`${this.#options.apiBaseUrl}${path}`, {
					method,
					headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json" },
					body: body === undefined ? undefined : JSON.stringify(body),
					signal: signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS),
				});
			} catch (error) {
				if (signal?.aborted && signal.reason?.name !== "TimeoutError") throw error;
				throw new ApiError(operation, 0, "network_error", "request failed", { cause: error });
			}
			const json: unknown = await response.json().catch(() => undefined);
			if (response.status === 401 && attempt === 1) {
				// Revoked or rotated key: fetch a fresh token once before giving up.
				this.#options.tokens.invalidate();
				continue;
			}
			if (!response.ok) throw ApiError.fromResponse(operation, response.status, json);
			const envelope = Envelope.safeParse(json);
			if (!envelope.success)
				throw new ApiError(operation, response.status, "bad_response", "response is not a success envelope");
			return envelope.data.data;
		}
	}
}

const withTimeout = (signal: AbortSignal) => AbortSignal.any([signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]);

const outputUploadsPath = (leaseId: string) => `/internal/v1/leases/${encodeURIComponent(leaseId)}/output-uploads`;
