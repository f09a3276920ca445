import { z } from "zod";
import { envelope } from "../../contracts/common.ts";
import { ReleaseRequest } from "../../contracts/runner.ts";
import { jobBroker } from "../../conversions/job-broker-client.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { LeaseParams, leaseLost, runnerResponses } from "./lease-params.ts";

export const releaseLeaseRoute = defineRoute({
	method: "POST",
	path: "/internal/v1/leases/{lease_id}/release",
	auth: "runner",
	internal: true,
	summary: "Give a job back unfinished (runner shutting down); no attempt is charged",
	tags: ["Runner"],
	params: LeaseParams,
	body: ReleaseRequest,
	responses: {
		200: { description: "The job is back in the queue", schema: envelope(z.object({ released: z.literal(true) })) },
		...runnerResponses,
	},
	async handler({ env, params, body }) {
		if (!(await jobBroker(env).release(params.lease_id))) throw leaseLost();
		console.log(
			JSON.stringify({ level: "info", msg: "lease released", lease_id: params.lease_id, reason: body.reason }),
		);
		return ok({ released: true });
	},
});
