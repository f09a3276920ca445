/** Worker entry: HTTP API, queue consumers, the cron safety net, and the Durable Object classes. */
import { runSafetyNet } from "./cron/safety-net.ts";
import { buildRouter } from "./http/router.ts";
import { consumeQueueBatch } from "./queues/dispatch.ts";
import { routes } from "./routes/index.ts";

export { JobBroker } from "../durable-objects/job-broker.ts";
export { WebhookSubscription } from "../durable-objects/webhook-subscription.ts";

const router = buildRouter(routes);

export default {
	fetch: (request, env, ctx) => router.fetch(request, env, ctx),
	queue: (batch, env, ctx) => consumeQueueBatch(batch, env, ctx),
	async scheduled(_controller, env, _ctx) {
		await runSafetyNet(env);
	},
} satisfies ExportedHandler<Env>;
