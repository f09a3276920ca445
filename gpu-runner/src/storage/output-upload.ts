/**
 * Getting the output WAV to the Worker. Up to the lease's `output.part_size_bytes` it is one PUT to the signed
 * output address; above that it goes up in parts (R2 multipart through the runner API), so that no request body
 * exceeds the zone's limit (100 MB on Free and Pro plans; a full-length WAV of a long MP3 is far larger).
 */
import type { Lease, OutputUpload, UploadedPart } from "../../../src/contracts/runner.ts";
import { ApiError } from "../api/api-error.ts";
import { TransferError, uploadWav } from "./transfer.ts";

/** The runner API's output upload endpoints (implemented by RunnerApiClient). */
export interface OutputUploads {
	startOutputUpload(leaseId: string, signal: AbortSignal): Promise<OutputUpload>;
	uploadOutputPart(
		leaseId: string,
		uploadId: string,
		part: { number: number; path: string; start: number; length: number },
		signal: AbortSignal,
	): Promise<UploadedPart>;
	completeOutputUpload(leaseId: string, uploadId: string, parts: UploadedPart[], signal: AbortSignal): Promise<void>;
	abortOutputUpload(leaseId: string, uploadId: string): Promise<void>;
}

export interface OutputTarget {
	lease: Pick<Lease, "lease_id" | "output">;
	/** Without it (or without a part size in the lease) every output is one PUT. */
	uploads?: OutputUploads;
	/** Tries per part before the upload is given up (default 3). */
	partAttempts?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function uploadOutput(
	target: OutputTarget,
	path: string,
	sizeBytes: number,
	signal: AbortSignal,
): Promise<void> {
	const partSize = target.lease.output.part_size_bytes;
	if (!target.uploads || !partSize || sizeBytes <= partSize) {
		return uploadWav(target.lease.output.url, path, sizeBytes, signal);
	}
	await uploadInParts(target.uploads, target.lease.lease_id, path, sizeBytes, signal, target.partAttempts ?? 3);
}

async function uploadInParts(
	uploads: OutputUploads,
	leaseId: string,
	path: string,
	sizeBytes: number,
	signal: AbortSignal,
	partAttempts: number,
): Promise<void> {
	const upload = await uploads.startOutputUpload(leaseId, signal);
	const partSize = upload.part_size_bytes;
	const parts: UploadedPart[] = [];
	try {
		for (let number = 1, start = 0; start < sizeBytes; number++, start += partSize) {
			const length = Math.min(partSize, sizeBytes - start);
			for (let attempt = 1; ; attempt++) {
				try {
					parts.push(
						await uploads.uploadOutputPart(leaseId, upload.upload_id, { number, path, start, length }, signal),
					);
					break;
				} catch (error) {
					// A part is repeatable: retry what may pass later, then give the whole job back as transient.
					const retryable = error instanceof TransferError || (error instanceof ApiError && error.retryable);
					if (signal.aborted || !retryable || attempt >= partAttempts) throw error;
					await sleep(500 * 2 ** (attempt - 1));
				}
			}
		}
		await uploads.completeOutputUpload(leaseId, upload.upload_id, parts, signal);
	} catch (error) {
		// Parts of an abandoned upload would otherwise sit in R2 until the bucket's multipart expiry.
		await uploads.abortOutputUpload(leaseId, upload.upload_id).catch(() => undefined);
		if (error instanceof ApiError && !error.leaseLost) {
			throw new TransferError(`output upload in parts failed: ${error.message}`, { cause: error });
		}
		throw error;
	}
}
