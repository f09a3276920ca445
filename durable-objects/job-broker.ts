import { DurableObject } from "cloudflare:workers";

/** Hands conversion jobs to runners: long-poll leases, heartbeats, attempts, priority and model affinity. */
export class JobBroker extends DurableObject<Env> {}
