import { z } from "zod";
import { envelope } from "../../contracts/common.ts";
import { CompleteRequest } from "../../contracts/runner.ts";
import { findConversion } from "../../conversions/conversion-store.ts";
import { jobBroker } from "../../conversions/job-broker-client.ts";
import { outputObjectKey } from "../../conversions/outputs.ts";
import { completeConversion } from "../../conversions/state-machine.ts";
import { ApiError } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { claimReport, LeaseParams, leaseLost, runnerResponses } from "./lease-params.ts";

const LeaseOutcome = z.object({ conversion_id: z.uuid(), status: z.string() });

export const completeLeaseRoute = defineRoute({
	method: "POST",
	path: "/internal/v1/leases/{lease_id}/complete",
	auth: "runner",
	internal: true,
	summary: "Complete a lease after the output WAV was PUT to its signed address",
	tags: ["Runner"],
	params: LeaseParams,
	body: CompleteRequest,
	responses: {
		200: { description: "The conversion is completed", schema: envelope(LeaseOutcome) },
		...runnerResponses,
	},
	async handler({ env, params, body }) {
		const broker = jobBroker(env);
		const check = await broker.checkLease(params.lease_id);
		const key =
			check.status === "active"
				? outputObjectKey(check.lease.job.accountId, check.lease.job.conversionId, params.lease_id)
				: null;
		const output = key === null ? null : await env.BUCKET.head(key);
		if (key !== null && !output) {
			throw new ApiError(
				409,
				"output_missing",
				"No output was uploaded for this lease: PUT the WAV to the lease's output.url, then complete",
			);
		}
		// The first complete is recorded; a repeat of it (the runner retried after losing our answer, perhaps while
		// the first is still being applied) gets the same answer, and a different one is refused.
		await claimReport(broker, params.lease_id, body);
		if (check.status === "ended" && check.outcome === "completed") {
			return ok({ conversion_id: check.conversionId, status: "completed" });
		}
		if (check.status !== "active" || key === null || !output) throw leaseLost();
		const { conversionId } = check.lease.job;
		const result = await completeConversion(env, conversionId, {
			key,
			sizeBytes: output.size,
			durationSeconds: body.output.duration_seconds,
			// A runner that does not report it applied the lease's `semitones`: 0 for `auto`.
			pitchShiftApplied: body.pitch_shift_applied ?? "same_octave",
		});
		if (result.outcome === "not_found") throw leaseLost("its conversion no longer exists");
		if (result.outcome === "unchanged" && result.conversion.outputKey !== key) {
			// Ended another way meanwhile (for instance failed by the safety net): this output is not used.
			await broker.discard([conversionId]);
			throw leaseLost(`the conversion is already ${result.conversion.status}`);
		}
		await broker.complete(params.lease_id);
		const conversion = result.outcome === "applied" ? result.conversion : await findConversion(env, conversionId);
		return ok({ conversion_id: conversionId, status: conversion?.status ?? "completed" });
	},
});
