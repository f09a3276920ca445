import { z } from "zod";
import { RUNNER_ERROR_CODES } from "../../contracts/runner.ts";
import { ApiError } from "../../http/errors.ts";
import { canonicalJson } from "../../http/idempotency.ts";
import { sha256Hex } from "../../lib/encoding.ts";

export const LeaseParams = z.object({ lease_id: z.string().min(1).max(100) });

export const leaseLost = (detail = "it expired or was taken over") =>
	new ApiError(409, RUNNER_ERROR_CODES.LEASE_LOST, `This lease is no longer held: ${detail}. Stop work on it.`);

export const runnerResponses = {
	409: { description: "`lease_lost`: the lease expired or ended; stop work on it" },
};

/** What makes two reports for a lease the same one: the body as parsed, whatever its key order. */
export const reportDigest = (body: unknown) => sha256Hex(canonicalJson(body));

/**
 * Records `body` as the lease's report in the broker, or throws `lease_lost`: for a lease that ended without a
 * report, and for a report other than the one already made (a repeat of that one passes: its answer was lost).
 */
export async function claimReport(
	broker: { recordReport(leaseId: string, digest: string): Promise<string> | string },
	leaseId: string,
	body: unknown,
): Promise<void> {
	const claim = await broker.recordReport(leaseId, await reportDigest(body));
	if (claim === "different") throw leaseLost("another report was already made for it, and a lease takes one");
	if (claim === "lost") throw leaseLost();
}
