/**
 * A runner's PUT of its output through the lease's signed `output.url` (`outputs/<account>/<conversion>/<lease>.wav`).
 * Only an active lease uploads: the address stays valid for hours, but a lease that has ended other than completed
 * can never complete its conversion, so its bytes would lie in R2 unreferenced for ever. Such an upload is refused
 * before a byte is stored; what one stores for a lease that ended while its bytes streamed in is removed by the
 * broker (`unused_outputs` in `durable-objects/job-broker.ts`), or by the PUT itself when it took long.
 */
import { RUNNER_ERROR_CODES } from "../contracts/runner.ts";
import { ApiError } from "../http/errors.ts";
import type { StorageGrant } from "../storage/signed-url.ts";
import { jobBroker } from "./job-broker-client.ts";
import { UNUSED_OUTPUT_GRACE_MS } from "./outputs.ts";

export const OUTPUT_KEY_PREFIX = "outputs/";

const LEASE_OF_KEY = /^outputs\/[^/]+\/[^/]+\/([^/]+)\.wav$/;

const leaseEnded = () =>
	new ApiError(
		409,
		RUNNER_ERROR_CODES.LEASE_LOST,
		"This output address belongs to a lease that is no longer held; nothing was kept. Stop work on it.",
	);

export async function refuseEndedLease(env: Env, grant: StorageGrant): Promise<void> {
	const leaseId = LEASE_OF_KEY.exec(grant.key)?.[1];
	if (!leaseId || (await jobBroker(env).checkLease(leaseId)).status !== "active") throw leaseEnded();
}

/**
 * Ended while the bytes streamed in: not used. The broker removes the output of a lease that ended other than
 * completed `UNUSED_OUTPUT_GRACE_MS` after it ended, and the lease was active when this PUT began (`refuseEndedLease`):
 * a PUT over well within that grace stored its bytes before the removal comes, which takes them, and asking the
 * broker again would only repeat it. One that took longer may have stored them after the removal: it asks, and
 * removes them itself.
 */
export async function dropIfLeaseEnded(
	env: Env,
	grant: StorageGrant,
	object: R2Object,
	startedAt: number,
): Promise<void> {
	if (Date.now() - startedAt < UNUSED_OUTPUT_GRACE_MS / 2) return;
	const leaseId = LEASE_OF_KEY.exec(grant.key)?.[1] ?? "";
	const after = await jobBroker(env).checkLease(leaseId);
	if (after.status === "ended" && after.outcome !== "completed") {
		await env.BUCKET.delete(object.key);
		throw leaseEnded();
	}
}
