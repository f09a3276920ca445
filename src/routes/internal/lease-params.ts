import { z } from "zod";
import { RUNNER_ERROR_CODES } from "../../contracts/runner.ts";
import { ApiError } from "../../http/errors.ts";

export const LeaseParams = z.object({ lease_id: z.string().min(1).max(100) });

export const leaseLost = (detail = "it expired or was taken over") =>
	new ApiError(409, RUNNER_ERROR_CODES.LEASE_LOST, `This lease is no longer held: ${detail}. Stop work on it.`);

export const runnerResponses = {
	409: { description: "`lease_lost`: the lease expired or ended; stop work on it" },
};
