/** Pieces shared by the webhook subscription routes. */
import { ApiError } from "../../http/errors.ts";
import { RATE_LIMITS } from "../../http/rate-limits.ts";
import { allowLocalWebhookUrls, checkWebhookUrl } from "../../webhooks/url-policy.ts";

export const SUBSCRIPTIONS_PATH = "/api/v1/webhooks/subscriptions";
export const TAGS = ["Webhooks"];

/** 409 `subscription_limit_reached`: the account already has 5 active subscriptions. */
export const subscriptionLimitReached = () =>
	new ApiError(
		409,
		"subscription_limit_reached",
		"This account already has 5 active webhook subscriptions; deactivate or delete one first",
	);

/** A URL the service may POST to, or 400 `invalid_webhook_url` naming the rule it breaks. */
export function acceptableWebhookUrl(env: Env, raw: string): string {
	const check = checkWebhookUrl(raw, { allowLocal: allowLocalWebhookUrls(env) });
	if (check.ok) return check.url;
	throw new ApiError(400, "invalid_webhook_url", `Invalid url: ${check.reason}`, {
		errors: [{ field: "url", message: check.reason }],
	});
}

/**
 * What the test deliveries and redeliveries are counted by: the account and the receiver's host, so that deleting a
 * subscription and making another for the same receiver starts no new count.
 */
export const webhookSendsKey = (subscription: { accountId: string; url: string }) =>
	`${subscription.accountId} ${new URL(subscription.url).hostname}`;

/** The 429 of the routes that make the service call the receiver (a test delivery, a redelivery). */
export const WEBHOOK_SENDS_LIMITED = `More than the deployment's test deliveries and redeliveries to one receiver host in ${RATE_LIMITS.WEBHOOK_SEND_RATE_LIMIT.periodSeconds} s (\`rate_limited\`, with \`Retry-After\`)`;
