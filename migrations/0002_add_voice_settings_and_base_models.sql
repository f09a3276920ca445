CREATE TABLE `base_models` (
	`name` text PRIMARY KEY NOT NULL,
	`object_key` text NOT NULL,
	`sha256` text NOT NULL,
	`size_bytes` integer NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
ALTER TABLE `voice_conversions` ADD `pitch_shift_applied` text;--> statement-breakpoint
ALTER TABLE `voice_conversions` ADD `voice_settings` text;--> statement-breakpoint
ALTER TABLE `voices` ADD `pitch_range_low_hz` real;--> statement-breakpoint
ALTER TABLE `voices` ADD `pitch_range_high_hz` real;