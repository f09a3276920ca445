export { RvcEngineError, type RvcErrorCode } from "./errors.ts";
export {
	EXECUTION_PROVIDERS,
	type ExecutionProviderName,
	type ProviderAttempt,
	selectExecutionProvider,
} from "./execution-provider.ts";
export { parseRvcParams, type RvcParams } from "./params.ts";
export {
	createRvcEngine,
	RVC_ARTIFACTS,
	type RvcChunkStats,
	type RvcEngineOptions,
} from "./rvc-engine.ts";
