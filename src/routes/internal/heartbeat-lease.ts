import { envelope } from "../../contracts/common.ts";
import { HeartbeatRequest, HeartbeatResponse } from "../../contracts/runner.ts";
import { jobBroker } from "../../conversions/job-broker-client.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { LeaseParams, leaseLost, runnerResponses } from "./lease-params.ts";

export const heartbeatLeaseRoute = defineRoute({
	method: "POST",
	path: "/internal/v1/leases/{lease_id}/heartbeat",
	auth: "runner",
	internal: true,
	summary: "Extend a lease",
	tags: ["Runner"],
	params: LeaseParams,
	body: HeartbeatRequest,
	responses: { 200: { description: "The new expiry", schema: envelope(HeartbeatResponse) }, ...runnerResponses },
	async handler({ env, params }) {
		const extended = await jobBroker(env).heartbeat(params.lease_id);
		if (!extended) throw leaseLost();
		return ok({ lease_expires_at: new Date(extended.expiresAt).toISOString() });
	},
});
