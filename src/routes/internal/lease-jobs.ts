import { z } from "zod";
import { envelope } from "../../contracts/common.ts";
import {
	CancelWaitResponse,
	type Lease,
	LeaseRequest,
	LeaseResponse,
	type VoiceValidationLease,
} from "../../contracts/runner.ts";
import { findLeaseSources } from "../../conversions/conversion-store.ts";
import { failure } from "../../conversions/failure-messages.ts";
import { jobBroker } from "../../conversions/job-broker-client.ts";
import { failConversion, markLeased } from "../../conversions/state-machine.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { listBaseModels } from "../../voices/base-model-store.ts";
import { deletedVoiceIds } from "../../voices/voice-store.ts";
import { buildLease } from "./build-lease.ts";
import { buildValidationLease } from "./build-validation-lease.ts";

export const leaseJobsRoute = defineRoute({
	method: "POST",
	path: "/internal/v1/leases",
	auth: "runner",
	internal: true,
	summary:
		"Lease up to `capacity` jobs (conversions in `leases`, voice validations in `validations`), long-polling up to `wait_seconds` when none is ready",
	tags: ["Runner"],
	body: LeaseRequest,
	responses: { 200: { description: "The leases granted (possibly none)", schema: envelope(LeaseResponse) } },
	async handler({ env, ctx, request, body }) {
		const broker = jobBroker(env);
		// A runner that dies mid-poll must not leave a waiter behind in the broker: it would take the next job to
		// nobody, and only the lease expiry (45 s, one attempt charged) would give it back. `request.signal` aborts
		// when the client disconnects before the response (the `enable_request_signal` compatibility flag); the
		// broker then ends the wait and gives back what it granted to it. Once answered, a lease is the runner's. A
		// runner that stops also says so itself (`cancelWaitRoute`), as a disconnect does not always reach the Worker.
		const waitId = body.wait_id ?? crypto.randomUUID();
		let answered = false;
		const cancelWait = () => {
			if (!answered) ctx.waitUntil(broker.cancelWait(waitId).then(() => undefined, logCancelFailure));
		};
		request.signal.addEventListener("abort", cancelWait, { once: true });
		try {
			return await leaseJobs(env, broker, request, body, waitId);
		} finally {
			answered = true;
			request.signal.removeEventListener("abort", cancelWait);
		}
	},
});

export const cancelWaitRoute = defineRoute({
	method: "POST",
	path: "/internal/v1/leases/waits/{wait_id}/cancel",
	auth: "runner",
	internal: true,
	summary:
		"End a long-poll the runner has given up (it is stopping): nothing more is granted to it, and leases granted to it in the last seconds go back uncharged",
	tags: ["Runner"],
	params: z.object({ wait_id: z.uuid() }),
	responses: { 200: { description: "The wait is over", schema: envelope(CancelWaitResponse) } },
	async handler({ env, params }) {
		return ok(await jobBroker(env).cancelWait(params.wait_id));
	},
});

async function leaseJobs(
	env: Env,
	broker: ReturnType<typeof jobBroker>,
	request: Request,
	body: LeaseRequest,
	waitId: string,
): Promise<Response> {
	const forget_voice_ids = await deletedVoiceIds(env, body.loaded_voice_ids);
	const granted = await broker.lease({
		runnerId: body.runner_id,
		capacity: body.capacity,
		waitSeconds: body.wait_seconds,
		loadedVoiceIds: body.loaded_voice_ids,
		engines: body.engines,
		kinds: body.job_kinds ?? ["convert"],
		waitId,
		acknowledges: body.acknowledges ?? false,
	});
	if (granted.length === 0) return ok({ leases: [], validations: [], forget_voice_ids });
	try {
		const origin = publicOrigin(env, request.url);
		const validationGrants = granted.filter((g) => g.job.kind === "validate_voice");
		const conversionGrants = granted.filter((g) => g.job.kind !== "validate_voice");
		const validations: VoiceValidationLease[] = [];
		const droppedValidations: string[] = [];
		const validationBases = validationGrants.length > 0 ? await listBaseModels(env) : [];
		for (const grant of validationGrants) {
			const lease = await buildValidationLease(env, origin, grant, validationBases);
			if (lease) validations.push(lease);
			else droppedValidations.push(grant.job.conversionId);
		}
		if (droppedValidations.length > 0) await broker.discard(droppedValidations);
		if (conversionGrants.length === 0) return ok({ leases: [], validations, forget_voice_ids });
		const leased = await markLeased(
			env,
			conversionGrants.map((g) => ({ conversionId: g.job.conversionId, attempt: g.attempt })),
		);
		const rows = await findLeaseSources(env, [...leased]);
		const byId = new Map(rows.map((row) => [row.id, row]));
		const bases = rows.some((row) => row.voice.engine === "rvc") ? await listBaseModels(env) : [];
		const leases: Lease[] = [];
		const dropped: string[] = [];
		for (const grant of conversionGrants) {
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
		return ok({ leases, validations, forget_voice_ids });
	} catch (error) {
		// Nothing reached the runner: give the jobs back at once rather than waiting for the leases to expire.
		await Promise.allSettled(granted.map((g) => broker.release(g.leaseId)));
		throw error;
	}
}

function logCancelFailure(error: unknown): void {
	console.error(
		JSON.stringify({
			level: "error",
			msg: "could not cancel the long-poll of a runner that went away",
			error: error instanceof Error ? error.message : String(error),
		}),
	);
}
