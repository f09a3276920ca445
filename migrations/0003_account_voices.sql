CREATE TABLE `voice_file_parts` (
	`voice_id` text NOT NULL,
	`role` text NOT NULL,
	`part_number` integer NOT NULL,
	`etag` text NOT NULL,
	`size_bytes` integer NOT NULL,
	PRIMARY KEY(`voice_id`, `role`, `part_number`)
);
--> statement-breakpoint
CREATE TABLE `voice_files` (
	`voice_id` text NOT NULL,
	`role` text NOT NULL,
	`file_name` text NOT NULL,
	`declared_size_bytes` integer NOT NULL,
	`object_key` text NOT NULL,
	`upload_status` text NOT NULL,
	`multipart_upload_id` text,
	`part_size_bytes` integer,
	`kind` text,
	`size_bytes` integer,
	`sha256` text,
	`uploaded_at` text,
	`created_at` text NOT NULL,
	PRIMARY KEY(`voice_id`, `role`),
	FOREIGN KEY (`voice_id`) REFERENCES `voices`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
DROP INDEX `voices_name_unique`;--> statement-breakpoint
ALTER TABLE `voices` ADD `account_id` text REFERENCES accounts(id);--> statement-breakpoint
ALTER TABLE `voices` ADD `description` text;--> statement-breakpoint
ALTER TABLE `voices` ADD `status` text DEFAULT 'ready' NOT NULL;--> statement-breakpoint
ALTER TABLE `voices` ADD `error_message` text;--> statement-breakpoint
ALTER TABLE `voices` ADD `deleted_at` text;--> statement-breakpoint
ALTER TABLE `voices` ADD `files_removed_at` text;--> statement-breakpoint
CREATE UNIQUE INDEX `voices_service_name_idx` ON `voices` (`name`) WHERE "voices"."account_id" IS NULL;--> statement-breakpoint
CREATE UNIQUE INDEX `voices_account_name_idx` ON `voices` (`account_id`,`name`) WHERE "voices"."account_id" IS NOT NULL AND "voices"."deleted_at" IS NULL;--> statement-breakpoint
CREATE INDEX `voices_account_created_idx` ON `voices` (`account_id`,`created_at`);