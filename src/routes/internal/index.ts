/** The runner API (`/internal/v1/*`, runner scope only), built to `src/contracts/runner.ts`. */
import { completeLeaseRoute } from "./complete-lease.ts";
import { failLeaseRoute } from "./fail-lease.ts";
import { heartbeatLeaseRoute } from "./heartbeat-lease.ts";
import { cancelWaitRoute, leaseJobsRoute } from "./lease-jobs.ts";
import { outputUploadRoutes } from "./output-uploads.ts";
import { releaseLeaseRoute } from "./release-lease.ts";
import { reportVoiceValidationRoute } from "./report-voice-validation.ts";

export const runnerRoutes = [
	leaseJobsRoute,
	cancelWaitRoute,
	heartbeatLeaseRoute,
	completeLeaseRoute,
	failLeaseRoute,
	releaseLeaseRoute,
	reportVoiceValidationRoute,
	...outputUploadRoutes,
];
