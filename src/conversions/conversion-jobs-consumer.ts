/**
 * `conversion-jobs` consumer: hands each queued conversion to the JobBroker. At-least-once delivery is fine:
 * the broker is idempotent by conversion id, and a message for a conversion that is already terminal (late,
 * duplicate, reordered) is acknowledged without effect. Messages that exhausted their retries land on the
 * dead-letter queue, whose consumer fails the conversion so that it never waits forever.
 */
import { z } from "zod";
import { registerConsumer } from "../queues/dispatch.ts";
import { failure } from "./failure-messages.ts";
import { jobBroker } from "./job-broker-client.ts";
import { failConversion } from "./state-machine.ts";

const ConversionJobBody = z.object({ conversion_id: z.uuid() });

interface DispatchRow {
	id: string;
	account_id: string;
	status: string;
	voice_model_id: string;
	use_preview: number;
	engine: string;
}

export async function handleConversionJob(message: Message<unknown>, env: Env): Promise<void> {
	const body = ConversionJobBody.safeParse(message.body);
	if (!body.success) {
		console.error(JSON.stringify({ level: "error", msg: "malformed conversion-jobs message dropped", id: message.id }));
		message.ack();
		return;
	}
	const row = await env.DB.prepare(
		`SELECT c.id, c.account_id, c.status, c.voice_model_id, c.use_preview, v.engine
		 FROM voice_conversions c JOIN voices v ON v.id = c.voice_model_id WHERE c.id = ?`,
	)
		.bind(body.data.conversion_id)
		.first<DispatchRow>();
	if (!row || (row.status !== "queued" && row.status !== "processing")) {
		message.ack();
		return;
	}
	await jobBroker(env).enqueue({
		conversionId: row.id,
		accountId: row.account_id,
		voiceId: row.voice_model_id,
		engine: row.engine,
		usePreview: row.use_preview === 1,
	});
	message.ack();
}

/** A job message that could not be handed over after all retries: fail its conversion with a clear message. */
export async function handleDeadConversionJob(message: Message<unknown>, env: Env): Promise<void> {
	const body = ConversionJobBody.safeParse(message.body);
	if (body.success) {
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

registerConsumer("conversion-jobs", handleConversionJob);
registerConsumer("conversion-jobs-dlq", handleDeadConversionJob);
