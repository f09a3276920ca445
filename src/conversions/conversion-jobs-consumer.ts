/**
 * `conversion-jobs` consumer: hands each queued conversion to the JobBroker. At-least-once delivery is fine:
 * the broker is idempotent by conversion id, and a message for a conversion that is already terminal (late,
 * duplicate, reordered) is acknowledged without effect. Messages that exhausted their retries land on the
 * dead-letter queue, whose consumer fails the conversion so that it never waits forever.
 */
import { z } from "zod";
import { findDispatchableJobs } from "./conversion-store.ts";
import { failure } from "./failure-messages.ts";
import { jobBroker } from "./job-broker-client.ts";
import { failConversion } from "./state-machine.ts";

const ConversionJobBody = z.object({ conversion_id: z.uuid() });

export async function handleConversionJob(message: Message<unknown>, env: Env): Promise<void> {
	const body = ConversionJobBody.safeParse(message.body);
	if (!body.success) {
		console.error(JSON.stringify({ level: "error", msg: "malformed conversion-jobs message dropped", id: message.id }));
		message.ack();
		return;
	}
	// Only `queued` and `processing` conversions have a job; anything else (late, duplicate) is acknowledged.
	const [job] = await findDispatchableJobs(env, [body.data.conversion_id]);
	if (job) await jobBroker(env).enqueue(job);
	message.ack();
}

/** A job message that could not be handed over after all retries: fail its conversion with a clear message. */
export async function handleDeadConversionJob(message: Message<unknown>, env: Env): Promise<void> {
	const body = ConversionJobBody.safeParse(message.body);
	// The direct hand-over may have delivered the job even though the message kept failing.
	if (body.success && (await jobBroker(env).knownJobs([body.data.conversion_id])).length === 0) {
		const result = await failConversion(env, body.data.conversion_id, failure("internal"));
		console.error(
			JSON.stringify({
				level: "error",
				msg: "conversion job dead-lettered",
				conversion_id: body.data.conversion_id,
				outcome: result.outcome,
			}),
		);
	}
	message.ack();
}
