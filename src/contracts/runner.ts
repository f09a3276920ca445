/**
 * Runner API contract (`/internal/v1/*`): the only boundary between the Worker and GPU runners.
 *
 * Glossary
 * - job: one voice conversion waiting in the JobBroker.
 * - lease: a runner's exclusive, time-limited claim on a job. It is kept alive by heartbeats and ends in
 *   exactly one of complete, fail or release. A lease that is not heartbeated before `lease_expires_at`
 *   is lost: the job goes back to the broker with its attempt count raised.
 * - attempt: how many times the job has been leased, starting at 1.
 *
 * Runners authenticate with a token from `POST /oauth2/token` for scope `voice-conversion-api/runner`.
 * Every JSON response uses the service envelope `{ success, data }` / `{ success: false, message, code }`.
 */
import { z } from "zod";
import { PITCH_SHIFTS, REQUESTED_PITCH_SHIFTS } from "./voice-conversions.ts";

export const RUNNER_SCOPE = "voice-conversion-api/runner";

export const JOB_KINDS = ["convert", "validate_voice"] as const;
export type JobKind = (typeof JOB_KINDS)[number];

export const ENGINE_NAMES = ["dsp", "rvc"] as const;
export const EngineName = z.enum(ENGINE_NAMES);
export type EngineName = z.infer<typeof EngineName>;

/** POST /internal/v1/leases — lease up to `capacity` jobs, waiting up to `wait_seconds` for one. */
export const LeaseRequest = z.object({
	runner_id: z.string().min(1).max(128),
	capacity: z.number().int().min(1).max(32),
	wait_seconds: z.number().min(0).max(25).default(20),
	/** Voices whose models the runner has loaded: their jobs are preferred (model affinity). */
	loaded_voice_ids: z.array(z.uuid()).max(64).default([]),
	/** Engines this runner can run; jobs for other engines are never leased to it. */
	engines: z.array(EngineName).min(1).default(["dsp"]),
	/**
	 * Kinds of job this runner takes: `convert` (conversions, `leases`) and `validate_voice` (checking an account's
	 * uploaded voice, `validations`). Older runners omit it and get conversions only.
	 */
	job_kinds: z.array(z.enum(JOB_KINDS)).min(1).optional(),
	/**
	 * The runner's name for this long-poll, so that it can end it with `POST /internal/v1/leases/waits/{wait_id}/cancel`
	 * when it stops: the Worker does not always learn that a client went away. Without it the Worker names the wait.
	 */
	wait_id: z.uuid().optional(),
	/**
	 * `true`: the runner heartbeats each lease the moment it arrives. A lease granted to it without that heartbeat
	 * within 10 s never reached it (it died while it waited, and the Worker did not see the request go away), and
	 * goes back to the queue without an attempt charged. Without it, such a lease waits out its expiry.
	 */
	acknowledges: z.boolean().optional(),
});
export type LeaseRequest = z.infer<typeof LeaseRequest>;

/** The answer to cancelling a long-poll: whether it was still waiting, and how many leases granted to it went back. */
export const CancelWaitResponse = z.object({ waiting: z.boolean(), released: z.number().int().min(0) });

/**
 * Source audio the service converts. Preprocessing refuses a file outside these as `unsupported_format`, and a runner
 * refuses the same whatever the file's metadata said, so that no header value can make a decoder or an engine
 * allocate without bound.
 */
export const SOURCE_AUDIO_LIMITS = { minSampleRate: 4_000, maxSampleRate: 768_000, maxChannels: 32 } as const;

/**
 * The models every `rvc` voice shares, set once per deployment; a voice's artifacts by these names are not its own.
 * `contentvec_v1` (optional) gives RVC v1's 256-wide features (RVC's `vec-256-layer-9`): v1 voices get it as their
 * `contentvec` (`sharedModelsFor`), so a deployment can serve v1 and v2 voices side by side.
 */
export const BASE_MODEL_NAMES = ["contentvec", "contentvec_v1", "rmvpe"] as const;
export type BaseModelName = (typeof BASE_MODEL_NAMES)[number];

/** The width of the features an RVC v1 model reads, and a v2 model's. */
export const RVC_V1_FEATURE_DIM = 256;
export const RVC_V2_FEATURE_DIM = 768;

/**
 * The base models an `rvc` voice reads, by the name the engine knows them as (`contentvec`, `rmvpe`), leaving out
 * those the voice carries itself. A voice whose model reads v1's 256-wide features (`feature_dim`, recorded when its
 * model was read) gets `contentvec_v1` as its `contentvec` where the deployment has one.
 */
export function sharedModelsFor<T extends { name: string }>(
	bases: readonly T[],
	voice: { featureDim: unknown; own: ReadonlySet<string> },
): { name: string; base: T }[] {
	const byName = new Map(bases.map((base) => [base.name, base]));
	const shared: { name: string; base: T }[] = [];
	for (const name of ["contentvec", "rmvpe"]) {
		if (voice.own.has(name)) continue;
		const v1 =
			name === "contentvec" && voice.featureDim === RVC_V1_FEATURE_DIM ? byName.get("contentvec_v1") : undefined;
		const base = v1 ?? byName.get(name);
		if (base !== undefined) shared.push({ name, base });
	}
	return shared;
}

export const ModelArtifact = z.object({
	/** Role of the file for the engine, e.g. `synthesizer`, `contentvec`, `rmvpe`, `index`. */
	name: z.string(),
	url: z.url(),
	sha256: z.string().regex(/^[0-9a-f]{64}$/),
	size_bytes: z.number().int().nonnegative(),
});
export type ModelArtifact = z.infer<typeof ModelArtifact>;

export const VoiceDescriptor = z.object({
	id: z.uuid(),
	name: z.string(),
	engine: EngineName,
	/** Engine-specific parameters (for `dsp`: formant_shift, brightness, ...; for `rvc`: sample_rate, f0 settings). */
	params: z.record(z.string(), z.unknown()),
	/**
	 * For `rvc` voices: the voice's own files and the deployment's base models (`contentvec`, `rmvpe`) it does not
	 * carry itself.
	 */
	artifacts: z.array(ModelArtifact),
	/** The voice's typical pitch range (its sample's), for `pitch_shift` `auto`; null when unknown. */
	pitch_range_hz: z.object({ low: z.number().positive(), high: z.number().positive() }).nullish(),
	/**
	 * True for an account's own voice (uploaded through the API), false for one of the service's (the operator's). An
	 * `rvc` runner runs an account's uploaded ONNX synthesizer in a process it can stop at its limits. Older Workers
	 * omit it: taken as an account's.
	 */
	account_voice: z.boolean().optional(),
});
export type VoiceDescriptor = z.infer<typeof VoiceDescriptor>;

export const Lease = z.object({
	lease_id: z.string(),
	conversion_id: z.uuid(),
	attempt: z.number().int().min(1),
	lease_expires_at: z.iso.datetime(),
	/** Heartbeat at least this often (seconds); the lease lasts about three intervals. */
	heartbeat_interval_seconds: z.number().positive(),
	voice: VoiceDescriptor,
	source: z.object({
		/** Signed GET of the source bytes (supports Range). */
		url: z.url(),
		mime_type: z.string(),
		/** Format found by preprocessing from the bytes: `wav`, `flac` or `mp3`. */
		format: z.enum(["wav", "flac", "mp3"]),
		sample_rate: z.number().int().positive(),
		channels: z.number().int().positive(),
		duration_seconds: z.number().nonnegative(),
		size_bytes: z.number().int().nonnegative(),
	}),
	output: z.object({
		/** Signed PUT for the output WAV; send `Content-Type: audio/wav`. */
		url: z.url(),
		content_type: z.literal("audio/wav"),
		/**
		 * Outputs larger than this go up in parts of exactly this size (the last may be smaller) through the output
		 * upload endpoints below, so that no request body exceeds the zone's limit. Older Workers omit it.
		 */
		part_size_bytes: z.number().int().positive().optional(),
	}),
	semitones: z.number().int().min(-12).max(12),
	/**
	 * The conversion's `pitch_shift`. With `auto` the runner measures the source's median pitch, picks the value of
	 * the pitch table that brings it closest to `voice.pitch_range_hz`, applies it instead of `semitones` (0 then,
	 * which is what a runner without `auto` applies) and reports it as `pitch_shift_applied`. Older Workers omit it.
	 */
	pitch_shift: z.enum(REQUESTED_PITCH_SHIFTS).optional(),
	/**
	 * The conversion's overrides of its voice's settings (`VoiceSettings`, checked by the Worker against the voice).
	 * Read as a plain record: a runner that does not know a setting fails that job naming it, instead of refusing
	 * the whole lease; the engine checks every key and range again, as only it knows what it can honour.
	 */
	voice_settings: z.record(z.string(), z.unknown()).nullish(),
	use_preview: z.boolean(),
	/** When `use_preview`, convert only the first this-many seconds. */
	preview_seconds: z.number().positive(),
});
export type Lease = z.infer<typeof Lease>;

/**
 * A `validate_voice` job: an account uploaded a voice; read every file with the RVC readers, check they fit together,
 * build the synthesizer, convert one second as a self-test, measure the sample's pitch range, and report with
 * `POST /internal/v1/leases/{lease_id}/voice-validation`. Heartbeat, fail (transient) and release work as for
 * conversions.
 */
export const VoiceValidationLease = z.object({
	lease_id: z.string(),
	voice_id: z.uuid(),
	attempt: z.number().int().min(1),
	lease_expires_at: z.iso.datetime(),
	heartbeat_interval_seconds: z.number().positive(),
	voice_name: z.string(),
	/** The voice's default settings (`VoiceSettings`), checked against the model (e.g. `index_rate` needs an index). */
	voice_settings: z.record(z.string(), z.unknown()),
	/** The uploaded files by role (`model`, `index`, `image`, `sample`) with the kind their first bytes showed. */
	files: z.array(
		z.object({
			role: z.enum(["model", "index", "image", "sample"]),
			url: z.url(),
			size_bytes: z.number().int().nonnegative(),
			kind: z.string(),
		}),
	),
	/** The deployment's ContentVec and RMVPE, for the self-test. */
	base_models: z.array(ModelArtifact),
});
export type VoiceValidationLease = z.infer<typeof VoiceValidationLease>;

export const LeaseResponse = z.object({
	leases: z.array(Lease),
	/** Only for runners that asked for `validate_voice` jobs. */
	validations: z.array(VoiceValidationLease).default([]),
	/**
	 * Voices among the request's `loaded_voice_ids` that were deleted (an account deleted its own voice): the runner
	 * removes their own files from its cache and forgets them. The deployment's base models stay.
	 */
	forget_voice_ids: z.array(z.uuid()).default([]),
});
export type LeaseResponse = z.infer<typeof LeaseResponse>;

/** The longest validation failure message a voice shows as its `error_message`. */
export const VALIDATION_MESSAGE_CHARS = 1000;

/** POST /internal/v1/leases/{lease_id}/voice-validation — the outcome of a `validate_voice` lease. */
export const VoiceValidationReport = z.discriminatedUnion("outcome", [
	z.object({
		outcome: z.literal("ready"),
		/** Every file's sha256 and size as read (the model's becomes the synthesizer artifact's checksum). */
		files: z.array(
			z.object({
				role: z.enum(["model", "index", "image", "sample"]),
				sha256: z.string().regex(/^[0-9a-f]{64}$/),
				size_bytes: z.number().int().nonnegative(),
			}),
		),
		model: z.object({
			sample_rate: z.number().int().positive(),
			f0: z.boolean(),
			feature_dim: z.number().int().positive().nullable(),
			version: z.string().nullable(),
		}),
		/** The sample's typical pitch range (10th to 90th percentile of voiced frames); null without a sample. */
		pitch_range_hz: z.object({ low: z.number().positive(), high: z.number().positive() }).nullable(),
	}),
	z.object({
		outcome: z.literal("failed"),
		/** Stable name of the problem (`index_width_mismatch`, `truncated`, ...). */
		problem: z.string().min(1).max(100),
		/**
		 * Shown to the customer as the voice's `error_message`: names the file and what is wrong with it. One longer
		 * than `VALIDATION_MESSAGE_CHARS` (an engine's error quoted whole) is shown cut to that length, not refused.
		 */
		message: z.string().min(1).max(100_000),
	}),
]);
export type VoiceValidationReport = z.infer<typeof VoiceValidationReport>;

/** POST /internal/v1/leases/{lease_id}/heartbeat — 200 with the new expiry; 409 `lease_lost` if it is gone. */
export const HeartbeatRequest = z.object({
	/** Optional progress, 0..1, for operators. */
	progress: z.number().min(0).max(1).optional(),
});
export const HeartbeatResponse = z.object({ lease_expires_at: z.iso.datetime() });

/** POST /internal/v1/leases/{lease_id}/complete — after the output was PUT to `output.url`. */
export const CompleteRequest = z.object({
	output: z.object({
		size_bytes: z.number().int().positive(),
		duration_seconds: z.number().positive(),
		sample_rate: z.number().int().positive(),
		channels: z.number().int().positive(),
	}),
	metrics: z
		.object({
			processing_seconds: z.number().nonnegative(),
			real_time_factor: z.number().nonnegative(),
			execution_provider: z.string(),
		})
		.partial()
		.optional(),
	/** The pitch table value the runner applied; required in substance for `pitch_shift` `auto` (else `same_octave`). */
	pitch_shift_applied: z.enum(PITCH_SHIFTS).optional(),
});
export type CompleteRequest = z.infer<typeof CompleteRequest>;

/**
 * Why a job failed. `permanent` failures fail the conversion at once; `transient` ones put the job back
 * (until the maximum attempts). The reason picks the client-facing `error_message`.
 */
export const FAILURE_REASONS = [
	"corrupted_source",
	"unsupported_format",
	"too_large",
	"output_too_large",
	/**
	 * An account's uploaded voice model was stopped during the conversion for passing the runner's limits on a run's
	 * time or its memory: the voice's fault, which another attempt would repeat.
	 */
	"voice_model_limits",
	"internal",
] as const;

/**
 * The largest output WAV a conversion may have (the output PUT refuses more): 2 GiB, so that readers taking the
 * RIFF sizes as signed 32-bit numbers read it too. A runner refuses a job whose output would be larger before
 * converting (`output_too_large`): 16-bit PCM at the output's rate and channels, about 3 h 22 min of 44.1 kHz stereo.
 */
export const MAX_OUTPUT_BYTES = 2 * 1024 ** 3;
export const isFailureReason = (reason: string): reason is (typeof FAILURE_REASONS)[number] =>
	(FAILURE_REASONS as readonly string[]).includes(reason);

export const FailRequest = z.object({
	kind: z.enum(["transient", "permanent"]),
	/**
	 * One of `FAILURE_REASONS`, or another reason's name (a runner newer than this Worker may know reasons added
	 * since): such a failure is taken as `internal`, with the runner's reason and message logged, so the job still
	 * ends as reported instead of waiting out its lease. A name is lower-case letters, digits and `_`.
	 */
	reason: z.union([
		z.enum(FAILURE_REASONS),
		z
			.string()
			.max(100)
			.regex(/^[a-z][a-z0-9_]*$/, "must be a reason's name: lower-case letters, digits and _"),
	]),
	/** Operator-facing detail; logged, not shown verbatim to clients. */
	message: z.string().max(2000),
});
export type FailRequest = z.infer<typeof FailRequest>;

/** POST /internal/v1/leases/{lease_id}/release — give the job back unfinished (shutdown); no attempt is charged. */
export const ReleaseRequest = z.object({ reason: z.string().max(500).default("runner shutting down") });

/**
 * Output uploads in parts (R2 multipart), for outputs over `output.part_size_bytes`:
 * 1. POST /internal/v1/leases/{lease_id}/output-uploads → `{ upload_id, part_size_bytes }`
 * 2. PUT  /internal/v1/leases/{lease_id}/output-uploads/{upload_id}/parts/{part_number} (1-based), raw bytes with
 *    `Content-Length`; every part but the last exactly `part_size_bytes` → `{ part_number, etag }`
 * 3. POST /internal/v1/leases/{lease_id}/output-uploads/{upload_id}/complete with every part → `{ size_bytes }`
 * then complete the lease as usual. DELETE /internal/v1/leases/{lease_id}/output-uploads/{upload_id} abandons one.
 */
export const OutputUpload = z.object({ upload_id: z.string().min(1), part_size_bytes: z.number().int().positive() });
export type OutputUpload = z.infer<typeof OutputUpload>;

export const UploadedPart = z.object({
	part_number: z.number().int().min(1).max(10_000),
	etag: z.string().min(1).max(200),
});
export type UploadedPart = z.infer<typeof UploadedPart>;

export const CompleteOutputUploadRequest = z.object({ parts: z.array(UploadedPart).min(1).max(10_000) });
export const CompletedOutputUpload = z.object({ size_bytes: z.number().int().nonnegative() });

/** Error `code`s the runner acts on. */
export const RUNNER_ERROR_CODES = {
	/** 409: the lease expired or was taken over; stop work on it, do not complete. */
	LEASE_LOST: "lease_lost",
} as const;
