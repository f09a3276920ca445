/**
 * What handles each queue (wrangler.toml declares the same names). A production queue name may carry an environment
 * suffix (`audio-uploaded-staging`); `consumerFor` then picks the longest name here that it starts with.
 */
import { handleAudioUploaded, handleDeadAudioUploaded } from "../audio-files/preprocessing-consumer.ts";
import { handleConversionJob, handleDeadConversionJob } from "../conversions/conversion-jobs-consumer.ts";
import { handleWebhookEvent } from "../webhooks/fan-out-consumer.ts";

export type MessageHandler = (message: Message<unknown>, env: Env, ctx: ExecutionContext) => Promise<void>;

export const QUEUE_CONSUMERS: Readonly<Record<string, MessageHandler>> = {
	"audio-uploaded": handleAudioUploaded,
	"audio-uploaded-dlq": handleDeadAudioUploaded,
	"conversion-jobs": handleConversionJob,
	"conversion-jobs-dlq": handleDeadConversionJob,
	"webhook-events": handleWebhookEvent,
	// A dead-lettered event is fanned out once more; subscriptions that already accepted its id ignore it.
	"webhook-events-dlq": handleWebhookEvent,
};
