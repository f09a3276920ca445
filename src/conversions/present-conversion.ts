/** How a conversion looks to clients (API responses) and to webhook receivers (event payloads). */
import type { ConversionEventData, VoiceConversion } from "../contracts/voice-conversions.ts";
import { OUTPUT_URL_SECONDS } from "../contracts/voice-conversions.ts";
import { signStorageUrl } from "../storage/signed-url.ts";
import type { Conversion } from "./conversion-store.ts";

/** The fields API responses and event payloads present alike. */
function sharedFields(row: Conversion) {
	return {
		id: row.id,
		audio_file_id: row.audioFileId,
		audio_file_name: row.audioFileName,
		voice_model_id: row.voiceModelId,
		voice_model_name: row.voiceModelName,
		pitch_shift: row.pitchShift,
		// Conversions made before `pitch_shift_applied` existed applied their `pitch_shift`, which was never `auto`.
		pitch_shift_applied: row.pitchShiftApplied ?? (row.pitchShift === "auto" ? null : row.pitchShift),
		use_preview: row.usePreview,
		voice_settings: row.voiceSettings,
		queued_at: row.queuedAt,
		processing_started_at: row.processingStartedAt,
		completed_at: row.completedAt,
	};
}

/** The full object at every status; a completed conversion gets a freshly signed `output_url` on every read. */
export async function presentConversion(
	env: Env,
	origin: string,
	row: Conversion,
	now = new Date(),
): Promise<VoiceConversion> {
	const outputUrl =
		row.status === "completed" && row.outputKey
			? await signStorageUrl(env, origin, {
					method: "GET",
					key: row.outputKey,
					expiresAt: new Date(now.getTime() + OUTPUT_URL_SECONDS * 1000),
				})
			: null;
	return {
		...sharedFields(row),
		status: row.status,
		output_url: outputUrl,
		created_at: row.createdAt,
		error_message: row.status === "failed" ? row.errorMessage : null,
	};
}

/** `data.conversion` of a terminal event (spec section 6): never `output_url`; `error_message` only on failure. */
export function conversionEventData(row: Conversion): ConversionEventData {
	const data: ConversionEventData = { ...sharedFields(row), status: row.status as "completed" | "failed" };
	if (row.status === "failed") data.error_message = row.errorMessage ?? "";
	return data;
}
