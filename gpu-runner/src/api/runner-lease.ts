/**
 * A lease as this runner reads it: the contract's `Lease` (src/contracts/runner.ts) plus the optional
 * `voice_settings`, the conversion's overrides of its voice's settings (`index_rate`, `protect`, `rms_mix_rate`,
 * `formant_shift`, `f0_method`). The object is taken as it comes; the engine that runs the job checks every key
 * and range and fails the job permanently on anything it cannot honour, since only it knows what it can do.
 */
import { z } from "zod";
import { Lease } from "../../../src/contracts/runner.ts";

export const RunnerLease = Lease.extend({
	voice_settings: z.record(z.string(), z.unknown()).nullish(),
});
export type RunnerLease = z.infer<typeof RunnerLease>;
