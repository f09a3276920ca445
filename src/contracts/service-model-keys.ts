/**
 * Where the admin tool stores the service's own model files in R2. Each key names the file's checksum, so a new file
 * never overwrites one that a runner holding an older lease may still be fetching (its signed address names the key,
 * its lease the old sha256); the cron safety net removes replaced ones once no lease can still fetch them
 * (`src/cron/replaced-model-files.ts`). An account's voice files live elsewhere (`account-voices/`), with their own
 * lifecycle.
 */
import type { BaseModelName } from "./runner.ts";

export const BASE_MODEL_KEY_PREFIX = "base-models/";
export const SERVICE_ARTIFACT_KEY_PREFIX = "models/";

export const baseModelKey = (name: BaseModelName, sha256: string) => `${BASE_MODEL_KEY_PREFIX}${name}/${sha256}`;

/**
 * A service voice's artifact (`synthesizer`, `index`, ...). Files stored before the checksum was in the key stay under
 * `models/<voice id>/<name>` until a new file replaces them.
 */
export const serviceArtifactKey = (voiceId: string, name: string, sha256: string) =>
	`${SERVICE_ARTIFACT_KEY_PREFIX}${voiceId}/${name}/${sha256}`;
