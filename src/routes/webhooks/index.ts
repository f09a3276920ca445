/** The webhook subscription endpoints (spec section 4), in the order the spec lists them. */
import type { RouteDefinition } from "../../http/route.ts";
import { createSubscriptionRoute } from "./create-subscription.ts";
import { deleteSubscriptionRoute } from "./delete-subscription.ts";
import { getSubscriptionRoute } from "./get-subscription.ts";
import { listDeliveriesRoute } from "./list-deliveries.ts";
import { listSubscriptionsRoute } from "./list-subscriptions.ts";
import { redeliverDeliveryRoute } from "./redeliver-delivery.ts";
import { regenerateSecretRoute } from "./regenerate-secret.ts";
import { testSubscriptionRoute } from "./test-subscription.ts";
import { updateSubscriptionRoute } from "./update-subscription.ts";

export const webhookRoutes: RouteDefinition[] = [
	createSubscriptionRoute,
	listSubscriptionsRoute,
	getSubscriptionRoute,
	updateSubscriptionRoute,
	deleteSubscriptionRoute,
	regenerateSecretRoute,
	testSubscriptionRoute,
	listDeliveriesRoute,
	redeliverDeliveryRoute,
];
