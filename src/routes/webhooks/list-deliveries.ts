import { z } from "zod";
import { envelope, IdParams } from "../../contracts/common.ts";
import { DeliveryLogEntry, DeliveryLogQuery } from "../../contracts/webhooks.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { listDeliveries, presentDelivery } from "../../webhooks/delivery-log.ts";
import { findSubscription } from "../../webhooks/subscription-store.ts";
import { SUBSCRIPTIONS_PATH, TAGS } from "./shared.ts";

export const listDeliveriesRoute = defineRoute({
	method: "GET",
	path: `${SUBSCRIPTIONS_PATH}/{id}/deliveries`,
	auth: "base",
	summary: "The subscription's delivery log, one entry per attempt, newest first (limit: default 50, max 100)",
	tags: TAGS,
	params: IdParams,
	query: DeliveryLogQuery,
	responses: {
		200: { description: "Delivery attempts", schema: envelope(z.array(DeliveryLogEntry)) },
		400: { description: "`limit` is not an integer from 1 to 100" },
		404: { description: "No such subscription for this account" },
	},
	async handler({ env, auth, params, query }) {
		const subscription = await findSubscription(env, auth.accountId, params.id);
		if (!subscription) throw notFound("Webhook subscription");
		const rows = await listDeliveries(env, subscription.id, query.limit);
		return ok(await Promise.all(rows.map(presentDelivery)));
	},
});
