export type RvcErrorCode =
	/** A model file the voice needs is not among the job's artifacts. */
	| "missing_artifact"
	/** A supplied model does not have RVC's tensor names, types or shapes, or cannot be loaded. */
	| "invalid_model"
	/** A voice's feature `index` is not a faiss IVF…,Flat or Flat index, is damaged, or does not fit the voice. */
	| "invalid_index"
	/** The voice's `params` are missing or out of range. */
	| "invalid_params"
	/** The audio handed to the engine is not in the engine's input format. */
	| "invalid_input"
	/** No execution provider passed its self-test. */
	| "no_execution_provider"
	/** The engine was used before `init()` or after `dispose()`. */
	| "not_ready"
	/** The thread that runs the models stopped under the job (`session-host.ts`); the job can run again. */
	| "model_thread_stopped"
	/**
	 * An account's uploaded synthesizer passed its process's deadline or memory ceiling and was killed
	 * (`session-host-process.ts`): the voice's fault, failed for good as `voice_model_limits`.
	 */
	| "model_limit_exceeded";

/**
 * The engine's one error type. `permanent` says whether running the same job again (on this runner) would fail
 * the same way, so the lease loop can fail the job at once instead of retrying it.
 */
export class RvcEngineError extends Error {
	readonly code: RvcErrorCode;
	readonly permanent: boolean;
	/** The runner API's failure reason for a permanent failure, where it is not `internal` (`permanentFailure`). */
	readonly failureReason: string | undefined;

	constructor(code: RvcErrorCode, message: string, options: { permanent?: boolean; cause?: unknown } = {}) {
		super(message, { cause: options.cause });
		this.name = "RvcEngineError";
		this.code = code;
		this.permanent = options.permanent ?? (code !== "not_ready" && code !== "model_thread_stopped");
		this.failureReason = code === "model_limit_exceeded" ? "voice_model_limits" : undefined;
	}
}

/**
 * The synthesizer reads features of another width than the deployment's ContentVec gives (RVC v1 models read 256,
 * v2 models 768): the voice cannot run here whatever its files hold.
 */
export class FeatureWidthMismatch extends RvcEngineError {
	readonly featureDim: number;
	readonly phoneDim: number;

	constructor(featureDim: number, phoneDim: number, message: string) {
		super("invalid_model", message);
		this.name = "FeatureWidthMismatch";
		this.featureDim = featureDim;
		this.phoneDim = phoneDim;
	}
}

/** Why a `.pth` checkpoint cannot be read as an RVC voice (`rvc-checkpoint.ts`). */
export type CheckpointProblem =
	/** The zip ends early (no end record, or an entry runs past the end). */
	| "truncated_archive"
	/** Not a torch zip with a pickled RVC inference dict (`weight`, `config`, ...). */
	| "not_a_checkpoint"
	/** The pickle imports or calls something outside the allow-list, or uses an opcode outside the reader's set. */
	| "forbidden_pickle"
	| "unknown_version"
	| "invalid_config"
	/** The config's sizes (or `sr`, `version`) disagree with the tensors. */
	| "config_mismatch"
	| "missing_tensor"
	| "misshapen_tensor"
	| "unsupported_dtype"
	/** More parameters than `MAX_PARAMETERS` (RVC's hold about 28 million). */
	| "too_large"
	/** Trained on another feature extractor's output than ContentVec's (Applio's `embedder_model`). */
	| "unsupported_embedder"
	/** A decoder other than RVC's HiFi-GAN (Applio's `vocoder`, or its tensors' names). */
	| "unsupported_vocoder";

export class RvcCheckpointError extends RvcEngineError {
	readonly problem: CheckpointProblem;

	constructor(problem: CheckpointProblem, message: string, options: { cause?: unknown } = {}) {
		super("invalid_model", message, { permanent: true, ...options });
		this.name = "RvcCheckpointError";
		this.problem = problem;
	}
}
