import { z } from "zod";
import { envelope } from "../../contracts/common.ts";
import { VoiceValidationReport } from "../../contracts/runner.ts";
import { jobBroker } from "../../conversions/job-broker-client.ts";
import { ApiError } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { findVoiceById, findVoiceFiles } from "../../voices/voice-store.ts";
import { finishValidation, readyReportProblem } from "../../voices/voice-validation.ts";
import { claimReport, LeaseParams, leaseLost, runnerResponses } from "./lease-params.ts";

const ValidationOutcome = z.object({ voice_id: z.uuid(), status: z.string() });

/** How a voice's validation ended, as a repeated report is answered. */
async function endedStatus(env: Env, voiceId: string): Promise<string> {
	return (await findVoiceById(env, voiceId))?.status ?? "failed";
}

export const reportVoiceValidationRoute = defineRoute({
	method: "POST",
	path: "/internal/v1/leases/{lease_id}/voice-validation",
	auth: "runner",
	internal: true,
	summary: "Report the outcome of a `validate_voice` lease: the voice becomes `ready` or `failed`",
	tags: ["Runner"],
	params: LeaseParams,
	body: VoiceValidationReport,
	responses: {
		200: { description: "The voice's status after the report", schema: envelope(ValidationOutcome) },
		400: {
			description:
				"`invalid_request`: a malformed report, or a `ready` one whose `files` leave out the model (or the voice's index), name a file the voice does not hold, or give another size than the stored file's",
		},
		...runnerResponses,
	},
	async handler({ env, params, body }) {
		const broker = jobBroker(env);
		const check = await broker.checkLease(params.lease_id);
		if (check.status === "active") {
			if (check.lease.job.kind !== "validate_voice") {
				throw new ApiError(400, "invalid_request", "This lease is a conversion; complete it with /complete");
			}
			if (body.outcome === "ready") {
				// Refused, not applied: the lease goes on, and the job's retries (or the wait limit) decide the voice.
				const problem = readyReportProblem(await findVoiceFiles(env, [check.lease.job.voiceId]), body);
				if (problem) throw new ApiError(400, "invalid_request", `This ready report cannot make the voice: ${problem}`);
			}
		}
		// The first report is recorded; a repeat of it (the runner retried after losing our answer, perhaps while the
		// first is still being applied) gets the same answer, and a different one is refused.
		await claimReport(broker, params.lease_id, body);
		if (check.status === "ended" && check.outcome === "completed") {
			return ok({ voice_id: check.conversionId, status: await endedStatus(env, check.conversionId) });
		}
		if (check.status !== "active") throw leaseLost();
		const voiceId = check.lease.job.voiceId;
		if (await finishValidation(env, voiceId, body)) {
			await broker.complete(params.lease_id);
			// Not always the report's outcome: a model good in itself fails with defaults changed since the lease.
			return ok({ voice_id: voiceId, status: await endedStatus(env, voiceId) });
		}
		// Not applied: the voice no longer validates. Its twin (this same report, sent twice at once) ended it while
		// this lease still holds, since nothing else ends a validation under a live lease but deletion.
		const voice = await findVoiceById(env, voiceId);
		const lease = await broker.checkLease(params.lease_id);
		const heldByThisLease = lease.status === "active" || (lease.status === "ended" && lease.outcome === "completed");
		if (voice && !voice.deletedAt && (voice.status === "ready" || voice.status === "failed") && heldByThisLease) {
			await broker.complete(params.lease_id);
			return ok({ voice_id: voiceId, status: voice.status });
		}
		// Deleted (or ended) meanwhile: the job is over either way.
		await broker.discard([voiceId]);
		throw leaseLost("the voice no longer waits for validation");
	},
});
