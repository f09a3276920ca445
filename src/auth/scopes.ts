export const BASE_SCOPE = "voice-conversion-api/base";
export { RUNNER_SCOPE } from "../contracts/runner.ts";
export const TOKEN_LIFETIME_SECONDS = 3600;
