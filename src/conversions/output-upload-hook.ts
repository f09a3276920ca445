/**
 * A runner's PUT of its output through the lease's signed `output.url` (`outputs/<account>/<conversion>/<lease>.wav`).
 * Only an active lease uploads: the address stays valid for hours, but a lease that has ended other than completed
 * can never complete its conversion, so its bytes would lie in R2 unreferenced for ever. Such an upload is refused
 * before a byte is stored, and one whose lease ended while its bytes streamed in is removed (the broker removes
 * what its ended leases uploaded before: `unused_outputs` in `durable-objects/job-broker.ts`).
 */
import { RUNNER_ERROR_CODES } from "../contracts/runner.ts";
import { ApiError } from "../http/errors.ts";
import { storeWithLength } from "../http/request-body.ts";
import type { StorageGrant } from "../storage/signed-url.ts";
import { jobBroker } from "./job-broker-client.ts";

export const OUTPUT_KEY_PREFIX = "outputs/";

const LEASE_OF_KEY = /^outputs\/[^/]+\/[^/]+\/([^/]+)\.wav$/;

const leaseEnded = () =>
	new ApiError(
		409,
		RUNNER_ERROR_CODES.LEASE_LOST,
		"This output address belongs to a lease that is no longer held; nothing was kept. Stop work on it.",
	);

export async function storeLeaseOutput(
	env: Env,
	grant: StorageGrant,
	request: Request,
	length: number,
): Promise<Response> {
	const leaseId = LEASE_OF_KEY.exec(grant.key)?.[1];
	const broker = jobBroker(env);
	if (!leaseId || (await broker.checkLease(leaseId)).status !== "active") throw leaseEnded();
	const stored = await storeWithLength(request, length, (body) =>
		env.BUCKET.put(grant.key, body, { httpMetadata: { contentType: grant.contentType } }),
	);
	if (!stored.ok || !stored.value) {
		await env.BUCKET.delete(grant.key);
		throw new ApiError(
			400,
			"upload_incomplete",
			"The upload body did not match its Content-Length; nothing was stored",
		);
	}
	const after = await broker.checkLease(leaseId);
	if (after.status === "ended" && after.outcome !== "completed") {
		// Ended while the bytes streamed in (the broker may already have removed the lease's output): not used.
		await env.BUCKET.delete(grant.key);
		throw leaseEnded();
	}
	return new Response(null, { status: 200 });
}
