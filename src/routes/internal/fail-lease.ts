import { z } from "zod";
import { envelope } from "../../contracts/common.ts";
import { FailRequest, isFailureReason } from "../../contracts/runner.ts";
import { jobBroker } from "../../conversions/job-broker-client.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { LeaseParams, leaseLost, reportDigest, runnerResponses } from "./lease-params.ts";

const FailOutcome = z.object({
	/** `requeued`: the job will be tried again; `failed`: the conversion failed with a client-facing message. */
	decision: z.enum(["requeued", "failed"]),
});

export const failLeaseRoute = defineRoute({
	method: "POST",
	path: "/internal/v1/leases/{lease_id}/fail",
	auth: "runner",
	internal: true,
	summary: "Report that a leased job failed (transient: retried; permanent: the conversion fails)",
	tags: ["Runner"],
	params: LeaseParams,
	body: FailRequest,
	responses: { 200: { description: "What happens to the job", schema: envelope(FailOutcome) }, ...runnerResponses },
	async handler({ env, params, body }) {
		const { reason, ...report } = body;
		// The same report again (its runner lost the answer) gets the same answer; another one after it is refused.
		const result = await jobBroker(env).fail(
			params.lease_id,
			// A reason added to runners after this Worker: an internal failure, under the runner's name in the log.
			isFailureReason(reason) ? { ...report, reason } : { ...report, reason: "internal", reportedReason: reason },
			await reportDigest(body),
		);
		if (!result) throw leaseLost();
		return ok(result);
	},
});
