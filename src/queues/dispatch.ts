/**
 * Routes each queue batch to its consumer. Consumers handle every message on its own: ack on success or on a
 * permanent failure (recorded), retry with a delay on a transient one; one bad message never fails the batch.
 */
export type MessageHandler = (message: Message<unknown>, env: Env, ctx: ExecutionContext) => Promise<void>;

const consumers = new Map<string, MessageHandler>();

export function registerConsumer(queue: string, handler: MessageHandler): void {
	consumers.set(queue, handler);
}

/** Delay before the n-th retry of a transiently failed message: 2, 4, 8, ... seconds, capped at 5 minutes. */
export const retryDelaySeconds = (attempts: number) => Math.min(300, 2 ** Math.max(1, attempts));

export async function consumeQueueBatch(batch: MessageBatch<unknown>, env: Env, ctx: ExecutionContext): Promise<void> {
	// Queue names may carry an environment suffix in production (e.g. `audio-uploaded-staging`). The exact name
	// wins, then the longest prefix, so `conversion-jobs-dlq` is not taken for `conversion-jobs` + suffix.
	const handler =
		consumers.get(batch.queue) ??
		[...consumers.entries()]
			.filter(([name]) => batch.queue.startsWith(`${name}-`))
			.sort(([a], [b]) => b.length - a.length)[0]?.[1];
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
