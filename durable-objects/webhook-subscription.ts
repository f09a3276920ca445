import { DurableObject } from "cloudflare:workers";

/** One per webhook subscription: signs and delivers events, retries on its alarm, counts failures. */
export class WebhookSubscription extends DurableObject<Env> {}
