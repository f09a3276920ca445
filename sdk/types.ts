/**
 * Resource and request types, inferred from the same zod contracts the Worker validates with, so the SDK cannot
 * drift from the API.
 */
import type { z } from "zod";
import type { AudioFile, RegisterAudioFileBody } from "../src/contracts/audio-files.ts";
import type {
	CONVERSION_STATUS_VALUES,
	CreateConversionBody,
	PitchShift,
	RequestedPitchShift,
	VoiceConversion,
	VoiceSettings,
} from "../src/contracts/voice-conversions.ts";
import type * as voices from "../src/contracts/voices.ts";
import type { AccountVoice, VoiceModel } from "../src/contracts/voices.ts";
import type * as webhooks from "../src/contracts/webhooks.ts";
import type { SubscribableEvent, WebhookSubscription } from "../src/contracts/webhooks.ts";

export type {
	AccountVoice,
	AudioFile,
	PitchShift,
	RequestedPitchShift,
	SubscribableEvent,
	VoiceConversion,
	VoiceModel,
	VoiceSettings,
	WebhookSubscription,
};

export type VoiceStatus = (typeof voices.VOICE_STATUS_VALUES)[number];
export type VoiceFileRole = voices.VoiceFileRoleName;
export type CreatedVoice = z.infer<typeof voices.CreatedVoice>;
export type UpdateVoiceInput = z.input<typeof voices.UpdateVoiceBody>;

export type ConversionStatus = (typeof CONVERSION_STATUS_VALUES)[number];
export type RegisterAudioFileInput = z.input<typeof RegisterAudioFileBody>;
export type CreateConversionInput = z.input<typeof CreateConversionBody>;
export type CreateSubscriptionInput = z.input<typeof webhooks.CreateSubscriptionBody>;
export type UpdateSubscriptionInput = z.input<typeof webhooks.UpdateSubscriptionBody>;
export type CreatedSubscription = z.infer<typeof webhooks.CreatedWebhookSubscription>;
export type DeliveryLogEntry = z.infer<typeof webhooks.DeliveryLogEntry>;
export type RegeneratedSecret = z.infer<typeof webhooks.RegeneratedSecret>;
export type TestDeliveryResult = z.infer<typeof webhooks.TestDeliveryResult>;
export type RedeliveryAccepted = z.infer<typeof webhooks.RedeliveryAccepted>;

/**
 * What a GET of a conversion is guaranteed to carry. The spec allows a conversion that is still processing to come
 * back with only `id`, `use_preview`, `status` and `output_url`; every other field may be missing.
 */
export type ConversionSnapshot = Pick<VoiceConversion, "id" | "use_preview" | "status" | "output_url"> &
	Partial<VoiceConversion>;

/** One page of a cursor-paginated list, newest first. */
export interface Page<T> {
	data: T[];
	/** Pass as `cursor` for the next (older) page; null on the last page. */
	nextCursor: string | null;
}

export interface ListOptions {
	limit?: number;
	cursor?: string;
	signal?: AbortSignal;
}
