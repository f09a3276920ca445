/** The single JobBroker instance that every Worker invocation talks to. */
export const JOB_BROKER_NAME = "global";

export function jobBroker(env: Pick<Env, "JOB_BROKER">) {
	return env.JOB_BROKER.get(env.JOB_BROKER.idFromName(JOB_BROKER_NAME));
}
