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
	| "model_thread_stopped";

/**
 * The engine's one error type. `permanent` says whether running the same job again (on this runner) would fail
 * the same way, so the lease loop can fail the job at once instead of retrying it.
 */
export class RvcEngineError extends Error {
	readonly code: RvcErrorCode;
	readonly permanent: boolean;

	constructor(code: RvcErrorCode, message: string, options: { permanent?: boolean; cause?: unknown } = {}) {
		super(message, { cause: options.cause });
		this.name = "RvcEngineError";
		this.code = code;
		this.permanent = options.permanent ?? (code !== "not_ready" && code !== "model_thread_stopped");
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
