/**
 * Routes each queue batch to its consumer (`consumers.ts`). Consumers handle every message on its own: ack on success
 * or on a permanent failure (recorded), retry with a delay on a transient one; one bad message never fails the batch.
 */
import { type MessageHandler, QUEUE_CONSUMERS } from "./consumers.ts";

/** Delay before the n-th retry of a transiently failed message: 2, 4, 8, ... seconds, capped at 5 minutes. */
export const retryDelaySeconds = (attempts: number) => Math.min(300, 2 ** Math.max(1, attempts));

/**
 * The consumer for a queue: an exact name match, else the longest listed name the queue starts with (production
 * queue names may carry an environment suffix, e.g. `audio-uploaded-staging`), so `audio-uploaded-dlq-staging`
 * reaches the dead-letter consumer, not the `audio-uploaded` one.
 */
function consumerFor(queue: string): MessageHandler | undefined {
	const exact = QUEUE_CONSUMERS[queue];
	if (exact) return exact;
	const prefixed = Object.keys(QUEUE_CONSUMERS)
		.filter((name) => queue.startsWith(`${name}-`))
		.sort((a, b) => b.length - a.length);
	return prefixed[0] ? QUEUE_CONSUMERS[prefixed[0]] : undefined;
}

export async function consumeQueueBatch(batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> {
	const handler = consumerFor(batch.queue);
	for (const message of batch.messages) {
		if (!handler) {
			console.error(
				JSON.stringify({ level: "error", msg: "no consumer for queue", queue: batch.queue, id: message.id }),
			);
			message.retry({ delaySeconds: 60 });
			continue;
		}
		try {
			await handler(message, env, ctx);
		} catch (error) {
			console.error(
				JSON.stringify({
					level: "error",
					msg: "queue message failed; will retry",
					queue: batch.queue,
					id: message.id,
					attempts: message.attempts,
					error: error instanceof Error ? error.message : String(error),
				}),
			);
			message.retry({ delaySeconds: retryDelaySeconds(message.attempts) });
		}
	}
}
