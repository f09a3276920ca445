/**
 * D1 schema: the source of truth for everything a client can see. Timestamps are ISO 8601 UTC strings
 * (they sort as text and are what the API returns); JSON columns hold small arrays and objects.
 * Migrations in `migrations/` are generated from this file by `npm run db:generate`.
 */
import { sql } from "drizzle-orm";
import { index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { BASE_MODEL_NAMES } from "../contracts/runner.ts";
import { PITCH_SHIFTS, REQUESTED_PITCH_SHIFTS, type VoiceSettings } from "../contracts/voice-conversions.ts";

export const accounts = sqliteTable("accounts", {
	id: text("id").primaryKey(),
	name: text("name").notNull(),
	createdAt: text("created_at").notNull(),
});

/** OAuth client credentials. Only a SHA-256 hash of the (high-entropy, generated) secret is stored. */
export const apiClients = sqliteTable(
	"api_clients",
	{
		id: text("id").primaryKey(),
		accountId: text("account_id")
			.notNull()
			.references(() => accounts.id),
		name: text("name").notNull(),
		secretHash: text("secret_hash").notNull(),
		/** Space-separated scopes the client may ask for. */
		scopes: text("scopes").notNull(),
		createdAt: text("created_at").notNull(),
		revokedAt: text("revoked_at"),
	},
	(t) => [index("api_clients_account_idx").on(t.accountId)],
);

export const UPLOAD_STATUSES = ["awaiting_upload", "uploaded"] as const;

export type VoiceArtifact = { name: string; key: string; sha256: string; size_bytes: number };

export const VOICE_STATUSES = ["awaiting_upload", "validating", "ready", "failed"] as const;
export type VoiceStatus = (typeof VOICE_STATUSES)[number];

/**
 * Service voices (`account_id` null) are added by operators and are `ready` from the start; an account's voices come
 * through the API, wait for their files, are validated by a runner, and only then become `ready`. Names are unique
 * among the service's voices and among one account's voices that are not deleted.
 */
export const voices = sqliteTable(
	"voices",
	{
		id: text("id").primaryKey(),
		/** The owning account; null for the service's own voices. */
		accountId: text("account_id").references(() => accounts.id),
		name: text("name").notNull(),
		tags: text("tags", { mode: "json" }).$type<string[]>().notNull(),
		description: text("description"),
		engine: text("engine", { enum: ["dsp", "rvc"] }).notNull(),
		engineParams: text("engine_params", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
		imageKey: text("image_key"),
		sampleKey: text("sample_key"),
		artifacts: text("artifacts", { mode: "json" }).$type<VoiceArtifact[]>().notNull(),
		/** The voice's typical pitch range in Hz (from its sample, or given by the operator), for `pitch_shift` `auto`. */
		pitchRangeLowHz: real("pitch_range_low_hz"),
		pitchRangeHighHz: real("pitch_range_high_hz"),
		isActive: integer("is_active", { mode: "boolean" }).notNull().default(true),
		status: text("status", { enum: VOICE_STATUSES }).notNull().default("ready"),
		/** Why validation failed, in words a customer can act on. */
		errorMessage: text("error_message"),
		/**
		 * When the voice became `validating`: the safety net counts its re-send and its wait limit from here, not from
		 * `updatedAt`, which every PATCH of its name or settings moves on.
		 */
		validationStartedAt: text("validation_started_at"),
		createdAt: text("created_at").notNull(),
		updatedAt: text("updated_at").notNull(),
		/** Soft delete: conversions already accepted finish; the files go once none is left (`filesRemovedAt`). */
		deletedAt: text("deleted_at"),
		filesRemovedAt: text("files_removed_at"),
	},
	(t) => [
		uniqueIndex("voices_service_name_idx").on(t.name).where(sql`${t.accountId} IS NULL`),
		uniqueIndex("voices_account_name_idx")
			.on(t.accountId, t.name)
			.where(sql`${t.accountId} IS NOT NULL AND ${t.deletedAt} IS NULL`),
		index("voices_account_created_idx").on(t.accountId, t.createdAt),
	],
);

export const VOICE_FILE_ROLES = ["model", "index", "image", "sample"] as const;
export type VoiceFileRole = (typeof VOICE_FILE_ROLES)[number];

/**
 * The files an account declared for its voice, one per role. A file up to the single-upload limit goes up with one
 * signed PUT; a larger one through an R2 multipart upload (`multipartUploadId`, parts in `voice_file_parts`).
 * `sha256` is recorded by the validating runner, which reads every byte anyway.
 */
export const voiceFiles = sqliteTable(
	"voice_files",
	{
		voiceId: text("voice_id")
			.notNull()
			.references(() => voices.id),
		role: text("role", { enum: VOICE_FILE_ROLES }).notNull(),
		fileName: text("file_name").notNull(),
		declaredSizeBytes: integer("declared_size_bytes").notNull(),
		objectKey: text("object_key").notNull(),
		uploadStatus: text("upload_status", { enum: UPLOAD_STATUSES }).notNull(),
		multipartUploadId: text("multipart_upload_id"),
		partSizeBytes: integer("part_size_bytes"),
		/**
		 * Signed into the file's upload addresses (its single PUT or every part's) and raised by each regeneration:
		 * only the newest addresses upload.
		 */
		uploadGeneration: integer("upload_generation").notNull().default(0),
		/** What the bytes are (`rvc_checkpoint`, `onnx`, `faiss_index`, `png`, `wav`, ...), recognised at upload. */
		kind: text("kind"),
		sizeBytes: integer("size_bytes"),
		sha256: text("sha256"),
		uploadedAt: text("uploaded_at"),
		createdAt: text("created_at").notNull(),
	},
	(t) => [primaryKey({ columns: [t.voiceId, t.role] })],
);

/** The parts of a multipart voice file received so far, with the etags R2 gave them (needed to complete it). */
export const voiceFileParts = sqliteTable(
	"voice_file_parts",
	{
		voiceId: text("voice_id").notNull(),
		role: text("role", { enum: VOICE_FILE_ROLES }).notNull(),
		partNumber: integer("part_number").notNull(),
		etag: text("etag").notNull(),
		sizeBytes: integer("size_bytes").notNull(),
	},
	(t) => [primaryKey({ columns: [t.voiceId, t.role, t.partNumber] })],
);

export type { BaseModelName } from "../contracts/runner.ts";
export { BASE_MODEL_NAMES };

/**
 * The models every `rvc` voice shares (ContentVec, RMVPE), set once per deployment by the admin tool. Leases of
 * `rvc` voices carry them as artifacts unless the voice has its own file of the same name.
 */
export const baseModels = sqliteTable("base_models", {
	name: text("name", { enum: BASE_MODEL_NAMES }).primaryKey(),
	/** R2 key, `base-models/<name>/<sha256>`: a new file never overwrites one a runner may still be fetching. */
	objectKey: text("object_key").notNull(),
	sha256: text("sha256").notNull(),
	sizeBytes: integer("size_bytes").notNull(),
	/**
	 * A ContentVec's feature width (768, or 256 for v1 voices), as the admin tool read it; null for RMVPE and for
	 * models set before it was recorded.
	 */
	featureDim: integer("feature_dim"),
	updatedAt: text("updated_at").notNull(),
});

export const PREPROCESSING_STATUSES = ["pending", "processing", "ready", "failed"] as const;

export const audioFiles = sqliteTable(
	"audio_files",
	{
		id: text("id").primaryKey(),
		accountId: text("account_id")
			.notNull()
			.references(() => accounts.id),
		fileName: text("file_name").notNull(),
		mimeType: text("mime_type").notNull(),
		objectKey: text("object_key").notNull(),
		uploadStatus: text("upload_status", { enum: UPLOAD_STATUSES }).notNull(),
		uploadUrlExpiresAt: text("upload_url_expires_at").notNull(),
		/** Signed into the upload address and raised by each regeneration: only the newest address uploads. */
		uploadGeneration: integer("upload_generation").notNull().default(0),
		uploadedAt: text("uploaded_at"),
		sizeBytes: integer("size_bytes"),
		preprocessingStatus: text("preprocessing_status", { enum: PREPROCESSING_STATUSES }).notNull(),
		/** Stable code (`empty_file`, `corrupted`, `unsupported_format`, `too_large`, ...) and a readable reason. */
		preprocessingErrorCode: text("preprocessing_error_code"),
		preprocessingError: text("preprocessing_error"),
		format: text("format", { enum: ["wav", "flac", "mp3"] }),
		sampleRate: integer("sample_rate"),
		channels: integer("channels"),
		durationSeconds: real("duration_seconds"),
		createdAt: text("created_at").notNull(),
		updatedAt: text("updated_at").notNull(),
		/** Soft delete: the row stays (conversions name it); its stored bytes go at once, else by the safety net. */
		deletedAt: text("deleted_at"),
		/** When the deleted file's objects were removed; null while they may still be stored. */
		objectsRemovedAt: text("objects_removed_at"),
	},
	(t) => [
		index("audio_files_account_created_idx").on(t.accountId, t.createdAt),
		index("audio_files_objects_pending_removal_idx")
			.on(t.deletedAt)
			.where(sql`${t.deletedAt} IS NOT NULL AND ${t.objectsRemovedAt} IS NULL`),
	],
);

export const CONVERSION_STATUSES = ["pending_preprocessing", "queued", "processing", "completed", "failed"] as const;
export type ConversionStatus = (typeof CONVERSION_STATUSES)[number];

export const voiceConversions = sqliteTable(
	"voice_conversions",
	{
		id: text("id").primaryKey(),
		accountId: text("account_id")
			.notNull()
			.references(() => accounts.id),
		audioFileId: text("audio_file_id")
			.notNull()
			.references(() => audioFiles.id),
		voiceModelId: text("voice_model_id")
			.notNull()
			.references(() => voices.id),
		pitchShift: text("pitch_shift", { enum: REQUESTED_PITCH_SHIFTS }).notNull(),
		/** The pitch table value applied: set at creation, or at completion for `auto` (the runner's choice). */
		pitchShiftApplied: text("pitch_shift_applied", { enum: PITCH_SHIFTS }),
		usePreview: integer("use_preview", { mode: "boolean" }).notNull(),
		voiceSettings: text("voice_settings", { mode: "json" }).$type<VoiceSettings>(),
		/**
		 * The voice's own params as they were when the conversion was accepted (its defaults, which `voice_settings`
		 * was checked against), less the facts of its model: every lease hands the runner these, so a change of the
		 * voice afterwards does not change the conversion. Null for conversions accepted before it was recorded (their
		 * leases carry the voice's params as they are).
		 */
		voiceParams: text("voice_params", { mode: "json" }).$type<Record<string, unknown>>(),
		status: text("status", { enum: CONVERSION_STATUSES }).notNull(),
		errorCode: text("error_code"),
		errorMessage: text("error_message"),
		/** Leases granted so far (kept in step with the JobBroker). */
		attempts: integer("attempts").notNull().default(0),
		outputKey: text("output_key"),
		outputSizeBytes: integer("output_size_bytes"),
		outputDurationSeconds: real("output_duration_seconds"),
		/** When the job was last sent on `conversion-jobs` (the safety net re-sends lost ones). */
		dispatchedAt: text("dispatched_at"),
		createdAt: text("created_at").notNull(),
		queuedAt: text("queued_at"),
		processingStartedAt: text("processing_started_at"),
		completedAt: text("completed_at"),
		failedAt: text("failed_at"),
		updatedAt: text("updated_at").notNull(),
	},
	(t) => [
		index("voice_conversions_account_created_idx").on(t.accountId, t.createdAt),
		index("voice_conversions_audio_status_idx").on(t.audioFileId, t.status),
		index("voice_conversions_status_idx").on(t.status, t.updatedAt),
	],
);

export const webhookSubscriptions = sqliteTable(
	"webhook_subscriptions",
	{
		id: text("id").primaryKey(),
		accountId: text("account_id")
			.notNull()
			.references(() => accounts.id),
		url: text("url").notNull(),
		description: text("description"),
		events: text("events", { mode: "json" }).$type<string[]>().notNull(),
		isActive: integer("is_active", { mode: "boolean" }).notNull(),
		/** AES-GCM ciphertext of the signing secret, with its IV and the version of the key that sealed it. */
		secretCiphertext: text("secret_ciphertext").notNull(),
		secretIv: text("secret_iv").notNull(),
		secretKeyVersion: text("secret_key_version").notNull(),
		lastSuccessAt: text("last_success_at"),
		lastFailureAt: text("last_failure_at"),
		consecutiveFailures: integer("consecutive_failures").notNull().default(0),
		createdAt: text("created_at").notNull(),
		updatedAt: text("updated_at").notNull(),
		deletedAt: text("deleted_at"),
	},
	(t) => [index("webhook_subscriptions_account_idx").on(t.accountId)],
);

export const DELIVERY_STATUSES = ["pending", "delivered", "failed", "abandoned"] as const;

/** One row per delivery attempt. */
export const webhookDeliveries = sqliteTable(
	"webhook_deliveries",
	{
		id: text("id").primaryKey(),
		subscriptionId: text("subscription_id")
			.notNull()
			.references(() => webhookSubscriptions.id),
		accountId: text("account_id").notNull(),
		eventId: text("event_id").notNull(),
		eventType: text("event_type").notNull(),
		attempt: integer("attempt").notNull(),
		status: text("status", { enum: DELIVERY_STATUSES }).notNull(),
		responseCode: integer("response_code"),
		error: text("error"),
		durationMs: integer("duration_ms"),
		createdAt: text("created_at").notNull(),
		completedAt: text("completed_at"),
		nextRetryAt: text("next_retry_at"),
		deletedAt: text("deleted_at"),
	},
	(t) => [index("webhook_deliveries_subscription_created_idx").on(t.subscriptionId, t.createdAt)],
);

/** Transactional outbox: written in the same D1 batch as the transition that caused the event. */
export const events = sqliteTable(
	"events",
	{
		id: text("id").primaryKey(),
		accountId: text("account_id").notNull(),
		type: text("type").notNull(),
		subjectId: text("subject_id").notNull(),
		payload: text("payload", { mode: "json" }).$type<Record<string, unknown>>().notNull(),
		createdAt: text("created_at").notNull(),
		sentAt: text("sent_at"),
	},
	(t) => [
		index("events_unsent_idx").on(t.sentAt, t.createdAt),
		uniqueIndex("events_type_subject_idx").on(t.type, t.subjectId),
	],
);

/** Replays of `Idempotency-Key` requests for 24 hours. */
export const idempotencyKeys = sqliteTable(
	"idempotency_keys",
	{
		accountId: text("account_id").notNull(),
		key: text("key").notNull(),
		/** `METHOD path`: a key is scoped to one operation. */
		operation: text("operation").notNull(),
		requestHash: text("request_hash").notNull(),
		responseStatus: integer("response_status"),
		responseBody: text("response_body"),
		createdAt: text("created_at").notNull(),
		expiresAt: text("expires_at").notNull(),
	},
	(t) => [
		primaryKey({ columns: [t.accountId, t.operation, t.key] }),
		index("idempotency_keys_expires_idx").on(t.expiresAt),
	],
);
