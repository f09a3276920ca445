/**
 * Output uploads in parts (R2 multipart) for outputs larger than the lease's `output.part_size_bytes`. A single
 * PUT of a long full-length WAV would exceed the zone's request-body limit (100 MB on Free and Pro plans); parts
 * keep every request under it. The object key is the lease's own output key, so a runner that lost its lease can
 * never write over the output of the lease that completed the conversion. Contract: `src/contracts/runner.ts`.
 */
import { z } from "zod";
import { envelope } from "../../contracts/common.ts";
import {
	CompletedOutputUpload,
	CompleteOutputUploadRequest,
	OutputUpload,
	UploadedPart,
} from "../../contracts/runner.ts";
import { jobBroker } from "../../conversions/job-broker-client.ts";
import {
	isNoSuchUpload,
	MAX_OUTPUT_BYTES,
	OUTPUT_CONTENT_TYPE,
	outputObjectKey,
	outputPartBytes,
} from "../../conversions/outputs.ts";
import { ApiError } from "../../http/errors.ts";
import { declaredLength, storeWithLength } from "../../http/request-body.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { LeaseParams, leaseLost, runnerResponses } from "./lease-params.ts";

const BASE = "/internal/v1/leases/{lease_id}/output-uploads";
const TAGS = ["Runner"];

const UploadParams = LeaseParams.extend({ upload_id: z.string().min(1).max(1024) });
const PartParams = UploadParams.extend({ part_number: z.coerce.number().int().min(1).max(10_000) });

/** The output key of an active lease; anything else is `lease_lost`. */
async function activeOutputKey(env: Env, leaseId: string): Promise<string> {
	const check = await jobBroker(env).checkLease(leaseId);
	if (check.status !== "active") throw leaseLost();
	return outputObjectKey(check.lease.job.accountId, check.lease.job.conversionId, leaseId);
}

const uploadNotFound = () =>
	new ApiError(
		404,
		"upload_not_found",
		"No such output upload for this lease: it was completed, aborted or never made",
	);

export const createOutputUploadRoute = defineRoute({
	method: "POST",
	path: BASE,
	auth: "runner",
	internal: true,
	summary: "Start uploading the lease's output in parts",
	tags: TAGS,
	params: LeaseParams,
	responses: {
		200: { description: "The upload id and the part size to use", schema: envelope(OutputUpload) },
		...runnerResponses,
	},
	async handler({ env, params }) {
		const key = await activeOutputKey(env, params.lease_id);
		const upload = await env.BUCKET.createMultipartUpload(key, { httpMetadata: { contentType: OUTPUT_CONTENT_TYPE } });
		// Recorded with the broker, which aborts it if the lease ends first (a runner killed mid-upload). Not recorded
		// (the lease ended, or the broker could not be reached): nobody would abort it, so it goes now.
		const tracked = await jobBroker(env)
			.trackOutputUpload(params.lease_id, upload.uploadId, key)
			.catch(async (error: unknown) => {
				await upload.abort().catch(() => {});
				throw error;
			});
		if (!tracked) {
			await upload.abort();
			throw leaseLost();
		}
		return ok({ upload_id: upload.uploadId, part_size_bytes: outputPartBytes(env) });
	},
});

export const uploadOutputPartRoute = defineRoute({
	method: "PUT",
	path: `${BASE}/{upload_id}/parts/{part_number}`,
	auth: "runner",
	internal: true,
	summary: "Upload one part of the output (raw bytes, Content-Length required)",
	tags: TAGS,
	params: PartParams,
	responses: {
		200: { description: "The part's etag, for the completion", schema: envelope(UploadedPart) },
		400: { description: "The body did not match its Content-Length" },
		404: { description: "`upload_not_found`" },
		411: { description: "Content-Length missing" },
		413: { description: "The part is larger than the part size" },
		...runnerResponses,
	},
	async handler({ env, params, request }) {
		const key = await activeOutputKey(env, params.lease_id);
		const length = declaredLength(request);
		const partSize = outputPartBytes(env);
		if (length > partSize) {
			throw new ApiError(413, "payload_too_large", `Output parts must be at most ${partSize} bytes`);
		}
		if (length === 0) throw new ApiError(400, "empty_part", "An output part must not be empty");
		const upload = env.BUCKET.resumeMultipartUpload(key, params.upload_id);
		const stored = await storeWithLength(request, length, (body) => upload.uploadPart(params.part_number, body));
		if (!stored.ok && isNoSuchUpload(stored.error)) throw uploadNotFound();
		if (!stored.ok) {
			throw new ApiError(400, "upload_incomplete", "The part's body did not match its Content-Length; send it again");
		}
		return ok({ part_number: stored.value.partNumber, etag: stored.value.etag });
	},
});

export const completeOutputUploadRoute = defineRoute({
	method: "POST",
	path: `${BASE}/{upload_id}/complete`,
	auth: "runner",
	internal: true,
	summary: "Assemble the uploaded parts into the output; then complete the lease",
	tags: TAGS,
	params: UploadParams,
	body: CompleteOutputUploadRequest,
	responses: {
		200: { description: "The output's size", schema: envelope(CompletedOutputUpload) },
		400: { description: "`invalid_parts`: a part is missing, has a wrong etag, or has the wrong size" },
		404: { description: "`upload_not_found`" },
		413: { description: "The output is larger than the service accepts" },
		...runnerResponses,
	},
	async handler({ env, params, body }) {
		const key = await activeOutputKey(env, params.lease_id);
		const upload = env.BUCKET.resumeMultipartUpload(key, params.upload_id);
		const parts = [...body.parts]
			.sort((a, b) => a.part_number - b.part_number)
			.map((p) => ({ partNumber: p.part_number, etag: p.etag }));
		let object: R2Object;
		try {
			object = await upload.complete(parts);
		} catch (error) {
			if (isNoSuchUpload(error)) throw uploadNotFound();
			throw new ApiError(400, "invalid_parts", `The parts do not make a complete output: ${(error as Error).message}`);
		}
		await jobBroker(env).untrackOutputUpload(params.lease_id, params.upload_id);
		if (object.size > MAX_OUTPUT_BYTES) {
			await env.BUCKET.delete(key);
			throw new ApiError(413, "payload_too_large", `Outputs must be at most ${MAX_OUTPUT_BYTES} bytes`);
		}
		return ok({ size_bytes: object.size });
	},
});

export const abortOutputUploadRoute = defineRoute({
	method: "DELETE",
	path: `${BASE}/{upload_id}`,
	auth: "runner",
	internal: true,
	summary: "Abandon an output upload and its parts",
	tags: TAGS,
	params: UploadParams,
	responses: {
		200: { description: "Abandoned (also when it was already gone)" },
		...runnerResponses,
	},
	async handler({ env, params }) {
		const check = await jobBroker(env).checkLease(params.lease_id);
		// A runner cleans up after a lost lease too, so only an unknown lease is refused.
		if (check.status === "unknown") throw leaseLost("no such lease");
		const { accountId, conversionId } = check.status === "active" ? check.lease.job : check;
		const upload = env.BUCKET.resumeMultipartUpload(
			outputObjectKey(accountId, conversionId, params.lease_id),
			params.upload_id,
		);
		await upload.abort().catch((error: unknown) => {
			if (!isNoSuchUpload(error)) throw error;
		});
		await jobBroker(env).untrackOutputUpload(params.lease_id, params.upload_id);
		return ok({ upload_id: params.upload_id, aborted: true });
	},
});

export const outputUploadRoutes = [
	createOutputUploadRoute,
	uploadOutputPartRoute,
	completeOutputUploadRoute,
	abortOutputUploadRoute,
];
