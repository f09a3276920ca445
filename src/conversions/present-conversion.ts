/** How a conversion looks to clients (API responses) and to webhook receivers (event payloads). */
import type { ConversionEventData, PitchShift, VoiceConversion } from "../contracts/voice-conversions.ts";
import { OUTPUT_URL_SECONDS } from "../contracts/voice-conversions.ts";
import { signStorageUrl } from "../storage/signed-url.ts";
import type { ConversionRow } from "./conversion-store.ts";

/** The fields API responses and event payloads present alike. */
function sharedFields(row: ConversionRow) {
	return {
		id: row.id,
		audio_file_id: row.audio_file_id,
		audio_file_name: row.audio_file_name,
		voice_model_id: row.voice_model_id,
		voice_model_name: row.voice_model_name,
		pitch_shift: row.pitch_shift as PitchShift,
		use_preview: Boolean(row.use_preview),
		queued_at: row.queued_at,
		processing_started_at: row.processing_started_at,
		completed_at: row.completed_at,
	};
}

/** The full object at every status; a completed conversion gets a freshly signed `output_url` on every read. */
export async function presentConversion(
	env: Env,
	origin: string,
	row: ConversionRow,
	now = new Date(),
): Promise<VoiceConversion> {
	const outputUrl =
		row.status === "completed" && row.output_key
			? await signStorageUrl(env, origin, {
					method: "GET",
					key: row.output_key,
					expiresAt: new Date(now.getTime() + OUTPUT_URL_SECONDS * 1000),
				})
			: null;
	return {
		...sharedFields(row),
		status: row.status,
		output_url: outputUrl,
		created_at: row.created_at,
		error_message: row.status === "failed" ? row.error_message : null,
	};
}

/** `data.conversion` of a terminal event (spec section 6): never `output_url`; `error_message` only on failure. */
export function conversionEventData(row: ConversionRow): ConversionEventData {
	const data: ConversionEventData = { ...sharedFields(row), status: row.status as "completed" | "failed" };
	if (row.status === "failed") data.error_message = row.error_message ?? "";
	return data;
}
