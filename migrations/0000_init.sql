CREATE TABLE `accounts` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `api_clients` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`secret_hash` text NOT NULL,
	`scopes` text NOT NULL,
	`created_at` text NOT NULL,
	`revoked_at` text,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `api_clients_account_idx` ON `api_clients` (`account_id`);--> statement-breakpoint
CREATE TABLE `audio_files` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`file_name` text NOT NULL,
	`mime_type` text NOT NULL,
	`object_key` text NOT NULL,
	`upload_status` text NOT NULL,
	`upload_url_expires_at` text NOT NULL,
	`uploaded_at` text,
	`size_bytes` integer,
	`preprocessing_status` text NOT NULL,
	`preprocessing_error_code` text,
	`preprocessing_error` text,
	`format` text,
	`sample_rate` integer,
	`channels` integer,
	`duration_seconds` real,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`deleted_at` text,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `audio_files_account_created_idx` ON `audio_files` (`account_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `events` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`type` text NOT NULL,
	`subject_id` text NOT NULL,
	`payload` text NOT NULL,
	`created_at` text NOT NULL,
	`sent_at` text
);
--> statement-breakpoint
CREATE INDEX `events_unsent_idx` ON `events` (`sent_at`,`created_at`);--> statement-breakpoint
CREATE UNIQUE INDEX `events_type_subject_idx` ON `events` (`type`,`subject_id`);--> statement-breakpoint
CREATE TABLE `idempotency_keys` (
	`account_id` text NOT NULL,
	`key` text NOT NULL,
	`operation` text NOT NULL,
	`request_hash` text NOT NULL,
	`response_status` integer,
	`response_body` text,
	`created_at` text NOT NULL,
	`expires_at` text NOT NULL,
	PRIMARY KEY(`account_id`, `operation`, `key`)
);
--> statement-breakpoint
CREATE INDEX `idempotency_keys_expires_idx` ON `idempotency_keys` (`expires_at`);--> statement-breakpoint
CREATE TABLE `voice_conversions` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`audio_file_id` text NOT NULL,
	`voice_model_id` text NOT NULL,
	`pitch_shift` text NOT NULL,
	`use_preview` integer NOT NULL,
	`status` text NOT NULL,
	`error_code` text,
	`error_message` text,
	`attempts` integer DEFAULT 0 NOT NULL,
	`output_key` text,
	`output_size_bytes` integer,
	`output_duration_seconds` real,
	`dispatched_at` text,
	`created_at` text NOT NULL,
	`queued_at` text,
	`processing_started_at` text,
	`completed_at` text,
	`failed_at` text,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`audio_file_id`) REFERENCES `audio_files`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`voice_model_id`) REFERENCES `voices`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `voice_conversions_account_created_idx` ON `voice_conversions` (`account_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `voice_conversions_audio_status_idx` ON `voice_conversions` (`audio_file_id`,`status`);--> statement-breakpoint
CREATE INDEX `voice_conversions_status_idx` ON `voice_conversions` (`status`,`updated_at`);--> statement-breakpoint
CREATE TABLE `voices` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`tags` text NOT NULL,
	`engine` text NOT NULL,
	`engine_params` text NOT NULL,
	`image_key` text,
	`sample_key` text,
	`artifacts` text NOT NULL,
	`is_active` integer DEFAULT true NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `voices_name_unique` ON `voices` (`name`);--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`id` text PRIMARY KEY NOT NULL,
	`subscription_id` text NOT NULL,
	`account_id` text NOT NULL,
	`event_id` text NOT NULL,
	`event_type` text NOT NULL,
	`attempt` integer NOT NULL,
	`status` text NOT NULL,
	`response_code` integer,
	`error` text,
	`duration_ms` integer,
	`created_at` text NOT NULL,
	`completed_at` text,
	`next_retry_at` text,
	`deleted_at` text,
	FOREIGN KEY (`subscription_id`) REFERENCES `webhook_subscriptions`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `webhook_deliveries_subscription_created_idx` ON `webhook_deliveries` (`subscription_id`,`created_at`);--> statement-breakpoint
CREATE TABLE `webhook_subscriptions` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`url` text NOT NULL,
	`description` text,
	`events` text NOT NULL,
	`is_active` integer NOT NULL,
	`secret_ciphertext` text NOT NULL,
	`secret_iv` text NOT NULL,
	`secret_key_version` text NOT NULL,
	`last_success_at` text,
	`last_failure_at` text,
	`consecutive_failures` integer DEFAULT 0 NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`deleted_at` text,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `webhook_subscriptions_account_idx` ON `webhook_subscriptions` (`account_id`);