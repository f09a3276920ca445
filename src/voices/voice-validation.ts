/**
 * An account voice's life after its files are in: `awaiting_upload` → `validating` (a `validate_voice` job goes to
 * the JobBroker, which leases it to a runner like a conversion) → `ready` or `failed`. Each end writes its
 * `voice.ready` / `voice.failed` event to the outbox in the same D1 batch as the status (guarded, so it happens
 * once), then sends it on `webhook-events` like conversion events.
 */
import { VALIDATION_MESSAGE_CHARS, type VoiceValidationReport } from "../contracts/runner.ts";
import type { VoiceSettings } from "../contracts/voice-conversions.ts";
import { jobBroker } from "../conversions/job-broker-client.ts";
import { publishEvent } from "../conversions/state-machine.ts";
import { nowIso } from "../db/client.ts";
import type { VoiceArtifact } from "../db/schema.ts";
import { voiceSettingProblems } from "./voice-capabilities.ts";
import {
	findVoiceById,
	findVoiceFiles,
	VOICE_WRITE_ROUNDS,
	type VoiceFileRow,
	type VoiceRow,
	voiceSettingsOf,
} from "./voice-store.ts";

export type VoiceEventType = "voice.ready" | "voice.failed";

/** The event payload: what a customer needs to act on the outcome, nothing stored beyond it. */
export const voiceEventData = (voice: VoiceRow) => ({
	id: voice.id,
	name: voice.name,
	status: voice.status,
	error_message: voice.errorMessage,
	created_at: voice.createdAt,
	updated_at: voice.updatedAt,
});

/**
 * Moves the voice to `validating` (once), noting when, and hands its job to the broker (idempotent by voice id).
 */
export async function startValidation(env: Env, voiceId: string): Promise<void> {
	const now = nowIso();
	await env.DB.prepare(
		`UPDATE voices SET status = 'validating', validation_started_at = ?1, updated_at = ?1
		 WHERE id = ?2 AND status = 'awaiting_upload' AND deleted_at IS NULL`,
	)
		.bind(now, voiceId)
		.run();
	await enqueueValidation(env, voiceId);
}

export async function enqueueValidation(env: Env, voiceId: string): Promise<void> {
	const voice = await findVoiceById(env, voiceId);
	if (voice?.status !== "validating" || voice.deletedAt || !voice.accountId) return;
	await jobBroker(env).enqueue({
		kind: "validate_voice",
		conversionId: voice.id,
		accountId: voice.accountId,
		voiceId: voice.id,
		engine: "rvc",
		usePreview: false,
	});
}

/** The files a conversion of a ready voice reads: its model (the synthesizer) and, where it has one, its index. */
const FILES_A_CONVERSION_NEEDS = ["model", "index"] as const;

/**
 * What is wrong with a `ready` report against the files the voice holds, in words for the runner's log; null when
 * nothing is. A ready voice's artifacts are made of what the report names (checksum and size of each file), so a
 * report that leaves out the model (or the index the voice has), names a file the voice does not hold, names one
 * twice, or gives a size other than the stored file's would make a voice that is ready without what a conversion
 * needs, or with checksums no download can pass.
 */
export function readyReportProblem(
	files: readonly Pick<VoiceFileRow, "role" | "uploadStatus" | "sizeBytes">[],
	report: Extract<VoiceValidationReport, { outcome: "ready" }>,
): string | null {
	const held = new Map(files.filter((file) => file.uploadStatus === "uploaded").map((file) => [file.role, file]));
	const seen = new Set<string>();
	for (const file of report.files) {
		if (seen.has(file.role)) return `files names the ${file.role} twice`;
		seen.add(file.role);
		const stored = held.get(file.role);
		if (!stored) return `files names a ${file.role}, and the voice holds no ${file.role} file`;
		if (stored.sizeBytes !== null && stored.sizeBytes !== file.size_bytes) {
			return `files gives the ${file.role} ${file.size_bytes} bytes, and the stored file has ${stored.sizeBytes}`;
		}
	}
	for (const role of FILES_A_CONVERSION_NEEDS) {
		if (held.has(role) && !seen.has(role)) return `files leaves out the voice's ${role}, which conversions read`;
	}
	return null;
}

/**
 * Ends validation. `ready` turns the uploaded files into the voice's artifacts (the model as `synthesizer`, the
 * index as `index`), keeps the sample rate the runner read from the model, and the pitch range it measured.
 * Returns false when the voice was no longer `validating` (deleted, or ended before): nothing changes then.
 *
 * The voice's default settings may have changed since the runner's lease carried them (a PATCH while validating),
 * so a `ready` verdict is held against the settings the voice has now, read with the write that ends it: settings
 * the model cannot honour fail the voice, as the runner fails one created with them.
 */
export async function finishValidation(
	env: Env,
	voiceId: string,
	report: VoiceValidationReport,
	now = new Date(),
): Promise<boolean> {
	for (let round = 0; round < VOICE_WRITE_ROUNDS; round++) {
		const voice = await findVoiceById(env, voiceId);
		if (voice?.status !== "validating" || voice.deletedAt || !voice.accountId) return false;
		if (await endValidationOf(env, voice, report, now)) return true;
	}
	throw new Error(`voice ${voiceId} kept changing while its validation ended; the report may be sent again`);
}

/**
 * Writes the outcome onto `voice` as read: false when the voice changed since (another `updated_at`), and nothing was
 * written.
 */
async function endValidationOf(
	env: Env,
	voice: VoiceRow,
	reported: VoiceValidationReport,
	now: Date,
): Promise<boolean> {
	const voiceId = voice.id;
	const at = now.toISOString();
	let report = reported;
	if (report.outcome === "ready") {
		const next: VoiceRow = { ...voice, updatedAt: at };
		const files = await findVoiceFiles(env, [voiceId]);
		const reported = new Map(report.files.map((file) => [file.role, file]));
		const artifactOf = (role: "model" | "index", name: string): VoiceArtifact[] => {
			const file = files.find((f) => f.role === role);
			const facts = reported.get(role);
			return file && facts ? [{ name, key: file.objectKey, sha256: facts.sha256, size_bytes: facts.size_bytes }] : [];
		};
		const settings: VoiceSettings = voiceSettingsOf(voice);
		Object.assign(next, {
			status: "ready",
			errorMessage: null,
			// The model's facts beside the settings, as the admin tool records them for the service's voices: feature_dim
			// picks the ContentVec a conversion gets (v1 models read 256-wide features).
			engineParams: {
				...settings,
				sample_rate: report.model.sample_rate,
				f0: report.model.f0,
				...(report.model.feature_dim === null ? {} : { feature_dim: report.model.feature_dim }),
			},
			artifacts: [...artifactOf("model", "synthesizer"), ...artifactOf("index", "index")],
			imageKey: files.find((f) => f.role === "image")?.objectKey ?? null,
			sampleKey: files.find((f) => f.role === "sample")?.objectKey ?? null,
			pitchRangeLowHz: report.pitch_range_hz?.low ?? null,
			pitchRangeHighHz: report.pitch_range_hz?.high ?? null,
		} satisfies Partial<VoiceRow>);
		const unfit = await voiceSettingProblems(env, next, settings);
		if (unfit.length === 0) {
			const statements = [
				env.DB.prepare(
					`UPDATE voices SET status = 'ready', error_message = NULL, engine_params = ?, artifacts = ?, image_key = ?,
					 sample_key = ?, pitch_range_low_hz = ?, pitch_range_high_hz = ?, updated_at = ?
					 WHERE id = ? AND status = 'validating' AND deleted_at IS NULL AND updated_at = ? RETURNING id`,
				).bind(
					JSON.stringify(next.engineParams),
					JSON.stringify(next.artifacts),
					next.imageKey,
					next.sampleKey,
					next.pitchRangeLowHz,
					next.pitchRangeHighHz,
					at,
					voiceId,
					voice.updatedAt,
				),
				...report.files.map((file) =>
					env.DB.prepare("UPDATE voice_files SET sha256 = ? WHERE voice_id = ? AND role = ?").bind(
						file.sha256,
						voiceId,
						file.role,
					),
				),
			];
			return endValidation(env, next, "voice.ready", statements);
		}
		report = {
			outcome: "failed",
			problem: "settings",
			message: `The voice's default settings do not fit its model: ${unfit.map((p) => `${p.field}: ${p.message}`).join("; ")}. Delete this voice and create it again with settings its model can honour.`,
		};
	}
	// Cut by code points, so that no character is split in two.
	const chars = Array.from(report.message);
	const message =
		chars.length > VALIDATION_MESSAGE_CHARS
			? `${chars.slice(0, VALIDATION_MESSAGE_CHARS - 1).join("")}…`
			: report.message;
	const next: VoiceRow = { ...voice, status: "failed", errorMessage: message, updatedAt: at };
	const update = env.DB.prepare(
		`UPDATE voices SET status = 'failed', error_message = ?, updated_at = ?
		 WHERE id = ? AND status = 'validating' AND deleted_at IS NULL AND updated_at = ? RETURNING id`,
	).bind(message, at, voiceId, voice.updatedAt);
	return endValidation(env, next, "voice.failed", [update]);
}

/** The validation job could not run to an answer (every attempt lost or failed): the voice fails, saying so. */
export function failValidation(env: Env, voiceId: string, detail: string): Promise<boolean> {
	return finishValidation(env, voiceId, {
		outcome: "failed",
		problem: "validation_unavailable",
		message: `The voice could not be validated: ${detail}. Delete this voice and create it again to retry.`,
	});
}

async function endValidation(
	env: Env,
	next: VoiceRow,
	type: VoiceEventType,
	statements: D1PreparedStatement[],
): Promise<boolean> {
	const eventId = crypto.randomUUID();
	const event = env.DB.prepare(
		`INSERT INTO events (id, account_id, type, subject_id, payload, created_at)
		 SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM voices WHERE id = ? AND status = ? AND updated_at = ?)
		 ON CONFLICT (type, subject_id) DO NOTHING RETURNING id`,
	).bind(
		eventId,
		next.accountId,
		type,
		next.id,
		JSON.stringify({ voice: voiceEventData(next) }),
		next.updatedAt,
		next.id,
		next.status,
		next.updatedAt,
	);
	const [first, ...rest] = statements;
	if (!first) return false;
	const results = await env.DB.batch<{ id: string }>([first, ...rest, event]);
	if (!results[0]?.results.length) return false;
	if (results.at(-1)?.results.length) await publishEvent(env, eventId);
	return true;
}
