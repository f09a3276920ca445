/**
 * Request budgets (the spec leaves rate limits to the service: "limits may apply depending on plan and traffic"),
 * kept by Cloudflare's Rate Limiting binding: each `[[ratelimits]]` entry of wrangler.toml holds its limit and window,
 * and counts per key, in each Cloudflare location, approximately. Past one, the request is answered 429
 * `rate_limited` with `Retry-After` set to the window's length, by which time the count has started again.
 *
 * The budgets are there for runaway clients (a loop with no sleep, a token fetched per request) and for the routes
 * that make the service send requests elsewhere; an ordinary client never meets them. A deployment without the
 * bindings, or whose limiter cannot answer, is not limited: a limiter's failure must not take the API down with it.
 */
import { ApiError } from "./errors.ts";

/** The window of each binding, as wrangler.toml sets it (10 or 60 seconds, the only ones Cloudflare takes). */
export const RATE_LIMITS = {
	/** Every authenticated API request, per account. */
	API_RATE_LIMIT: { periodSeconds: 10, counts: "API requests by this account" },
	/** Token requests, per `client_id` and client address (a client needs one an hour). */
	TOKEN_RATE_LIMIT: { periodSeconds: 60, counts: "token requests for this client_id from this address" },
	/** Test deliveries and redeliveries, per account and receiver host: each makes the service call the receiver. */
	WEBHOOK_SEND_RATE_LIMIT: { periodSeconds: 60, counts: "test deliveries and redeliveries to this receiver" },
} as const;

export type RateLimitName = keyof typeof RATE_LIMITS;

/** Whether `key` is still within `name`'s budget; true where the binding is missing or fails. */
export async function withinLimit(env: Env, name: RateLimitName, key: string): Promise<boolean> {
	const limiter: RateLimit | undefined = env[name];
	if (!limiter) return true;
	try {
		return (await limiter.limit({ key })).success;
	} catch (error) {
		console.error(JSON.stringify({ event: "rate_limit_unavailable", limiter: name, error: String(error) }));
		return true;
	}
}

/** The 429 a request past its budget gets, in the service's envelope. */
export function rateLimited(name: RateLimitName): ApiError {
	const { periodSeconds, counts } = RATE_LIMITS[name];
	return new ApiError(
		429,
		"rate_limited",
		`Too many ${counts}: retry after ${periodSeconds} seconds (the Retry-After header)`,
		{ headers: { "Retry-After": String(periodSeconds) } },
	);
}

/** Counts one request of `key` against `name`, and throws `rateLimited(name)` past its budget. */
export async function enforceRateLimit(env: Env, name: RateLimitName, key: string): Promise<void> {
	if (!(await withinLimit(env, name, key))) throw rateLimited(name);
}
