export { BASE_SCOPE, RUNNER_SCOPE } from "../contracts/client-credentials.ts";
export const TOKEN_LIFETIME_SECONDS = 3600;
