import { envelope } from "../../contracts/common.ts";
import { type Lease, LeaseRequest, LeaseResponse } from "../../contracts/runner.ts";
import { findLeaseSources } from "../../conversions/conversion-store.ts";
import { failure } from "../../conversions/failure-messages.ts";
import { jobBroker } from "../../conversions/job-broker-client.ts";
import { failConversion, markLeased } from "../../conversions/state-machine.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { listBaseModels } from "../../voices/base-model-store.ts";
import { buildLease } from "./build-lease.ts";

export const leaseJobsRoute = defineRoute({
	method: "POST",
	path: "/internal/v1/leases",
	auth: "runner",
	internal: true,
	summary: "Lease up to `capacity` jobs, long-polling up to `wait_seconds` when none is ready",
	tags: ["Runner"],
	body: LeaseRequest,
	responses: { 200: { description: "The leases granted (possibly none)", schema: envelope(LeaseResponse) } },
	async handler({ env, request, body }) {
		const broker = jobBroker(env);
		const granted = await broker.lease({
			runnerId: body.runner_id,
			capacity: body.capacity,
			waitSeconds: body.wait_seconds,
			loadedVoiceIds: body.loaded_voice_ids,
			engines: body.engines,
		});
		if (granted.length === 0) return ok({ leases: [] });
		try {
			const leased = await markLeased(
				env,
				granted.map((g) => ({ conversionId: g.job.conversionId, attempt: g.attempt })),
			);
			const rows = await findLeaseSources(env, [...leased]);
			const byId = new Map(rows.map((row) => [row.id, row]));
			const origin = publicOrigin(env, request.url);
			const bases = rows.some((row) => row.voice.engine === "rvc") ? await listBaseModels(env) : [];
			const leases: Lease[] = [];
			const dropped: string[] = [];
			for (const grant of granted) {
				const row = byId.get(grant.job.conversionId);
				// Not leasable: the conversion ended meanwhile (late message, safety net, duplicate after completion).
				if (!row || !leased.has(grant.job.conversionId)) {
					dropped.push(grant.job.conversionId);
					continue;
				}
				const lease = await buildLease(env, origin, grant, row, bases);
				if (lease) {
					leases.push(lease);
					continue;
				}
				console.error(
					JSON.stringify({ level: "error", msg: "source audio lacks preprocessing data", conversion_id: row.id }),
				);
				await failConversion(env, row.id, failure("internal"));
				dropped.push(grant.job.conversionId);
			}
			if (dropped.length > 0) await broker.discard(dropped);
			return ok({ leases });
		} catch (error) {
			// Nothing reached the runner: give the jobs back at once rather than waiting for the leases to expire.
			await Promise.allSettled(granted.map((g) => broker.release(g.leaseId)));
			throw error;
		}
	},
});
