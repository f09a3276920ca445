import { envelope, IdParams } from "../../contracts/common.ts";
import { DeletedSubscription } from "../../contracts/webhooks.ts";
import { nowIso } from "../../db/client.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { softDeleteSubscription } from "../../webhooks/subscription-store.ts";
import { SUBSCRIPTIONS_PATH, TAGS } from "./shared.ts";

export const deleteSubscriptionRoute = defineRoute({
	method: "DELETE",
	path: `${SUBSCRIPTIONS_PATH}/{id}`,
	auth: "base",
	summary: "Delete a webhook subscription (soft delete; its delivery log is marked deleted too)",
	tags: TAGS,
	params: IdParams,
	responses: {
		200: { description: "Deleted", schema: envelope(DeletedSubscription) },
		404: { description: "No such subscription for this account" },
	},
	async handler({ env, auth, params }) {
		// Pending retries stop on their own: the subscription's object checks the row before every attempt.
		if (!(await softDeleteSubscription(env, auth.accountId, params.id, nowIso()))) {
			throw notFound("Webhook subscription");
		}
		return ok({ id: params.id, deleted: true });
	},
});
