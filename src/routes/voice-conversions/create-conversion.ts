import { envelope } from "../../contracts/common.ts";
import { CreateConversionBody, VoiceConversion } from "../../contracts/voice-conversions.ts";
import type { ConversionRow } from "../../conversions/conversion-store.ts";
import { preprocessingFailure } from "../../conversions/failure-messages.ts";
import { presentConversion } from "../../conversions/present-conversion.ts";
import { promoteIfReady } from "../../conversions/promotion.ts";
import { failConversion } from "../../conversions/state-machine.ts";
import { ApiError, notFound } from "../../http/errors.ts";
import { IdempotencyHeaders } from "../../http/idempotency.ts";
import { created } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";

interface SourceFile {
	file_name: string;
	preprocessing_status: "pending" | "processing" | "ready" | "failed";
	preprocessing_error_code: string | null;
	preprocessing_error: string | null;
}

const audioFileFailed = (file: SourceFile) =>
	new ApiError(
		400,
		"audio_file_failed",
		`The audio file cannot be converted: ${preprocessingFailure(file.preprocessing_error_code, file.preprocessing_error).message}`,
	);

export const createConversionRoute = defineRoute({
	method: "POST",
	path: "/api/v1/voice-conversions",
	auth: "base",
	summary: "Create a voice conversion",
	tags: ["Voice conversions"],
	body: CreateConversionBody,
	headers: IdempotencyHeaders,
	idempotent: true,
	responses: {
		201: { description: "The conversion, in status pending_preprocessing", schema: envelope(VoiceConversion) },
		400: { description: "Invalid request, or an audio file whose preprocessing failed" },
		404: { description: "No such audio file (for this account) or voice model" },
		409: { description: "Idempotency-Key reused with another body, or still in progress" },
	},
	async handler({ env, request, auth, body }) {
		const file = await env.DB.prepare(
			`SELECT file_name, preprocessing_status, preprocessing_error_code, preprocessing_error
			 FROM audio_files WHERE id = ? AND account_id = ? AND deleted_at IS NULL`,
		)
			.bind(body.audio_file_id, auth.accountId)
			.first<SourceFile>();
		if (!file) throw notFound("Audio file");
		if (file.preprocessing_status === "failed") throw audioFileFailed(file);
		const voice = await env.DB.prepare("SELECT name FROM voices WHERE id = ? AND is_active = 1")
			.bind(body.voice_model_id)
			.first<{ name: string }>();
		if (!voice) throw notFound("Voice model");

		const now = new Date().toISOString();
		const row: ConversionRow = {
			id: crypto.randomUUID(),
			account_id: auth.accountId,
			audio_file_id: body.audio_file_id,
			audio_file_name: file.file_name,
			voice_model_id: body.voice_model_id,
			voice_model_name: voice.name,
			pitch_shift: body.pitch_shift,
			use_preview: body.use_preview ? 1 : 0,
			status: "pending_preprocessing",
			error_code: null,
			error_message: null,
			attempts: 0,
			output_key: null,
			output_size_bytes: null,
			output_duration_seconds: null,
			dispatched_at: null,
			created_at: now,
			queued_at: null,
			processing_started_at: null,
			completed_at: null,
			failed_at: null,
			updated_at: now,
		};
		// The file's status is read again after the insert, in the same batch: preprocessing that ended between
		// the check above and the insert notified no listener about this conversion, so it is handled here.
		const [, recheck] = await env.DB.batch([
			env.DB.prepare(
				`INSERT INTO voice_conversions (id, account_id, audio_file_id, voice_model_id, pitch_shift, use_preview,
				 status, attempts, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'pending_preprocessing', 0, ?, ?)`,
			).bind(row.id, row.account_id, row.audio_file_id, row.voice_model_id, row.pitch_shift, row.use_preview, now, now),
			env.DB.prepare(
				"SELECT file_name, preprocessing_status, preprocessing_error_code, preprocessing_error FROM audio_files WHERE id = ?",
			).bind(body.audio_file_id),
		]);
		const current = recheck?.results[0] as SourceFile | undefined;
		if (current?.preprocessing_status === "ready") {
			await promoteIfReady(env, row.id);
		} else if (current?.preprocessing_status === "failed") {
			await failConversion(
				env,
				row.id,
				preprocessingFailure(current.preprocessing_error_code, current.preprocessing_error),
			);
		}
		// The response is the conversion as created (spec: `pending_preprocessing`, null timestamps); a GET
		// right after shows where it went from there.
		return created(await presentConversion(env, publicOrigin(env, request.url), row));
	},
});
