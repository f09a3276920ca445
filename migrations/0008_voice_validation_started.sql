ALTER TABLE `voices` ADD `validation_started_at` text;--> statement-breakpoint
UPDATE `voices` SET `validation_started_at` = `updated_at` WHERE `status` = 'validating';