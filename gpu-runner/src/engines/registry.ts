/**
 * Which engines this runner runs, loaded lazily so a CPU-only runner never imports onnxruntime. Each engine
 * module lives in `engines/<name>/index.ts` and exports a factory `create<Name>Engine(options)`.
 */
import type { EngineName } from "../../../src/contracts/runner.ts";
import type { Logger } from "../logger.ts";
import type { Engine, EngineInfo } from "./engine.ts";

export interface EngineOptions {
	/** Folder for engine-owned caches (compiled models etc.). */
	cacheDir: string;
	logger: Logger;
	/** Jobs this runner converts at once (`RUNNER_CAPACITY`); rvc gives each a model thread on the CPU. */
	capacity?: number;
	/** rvc: at most this many model threads on the CPU (`RUNNER_RVC_MODEL_THREADS`). */
	modelThreads?: number;
	/** rvc: voices whose synthesizer each model thread keeps loaded (`RUNNER_RVC_CACHED_VOICES`; unset: the engine's default). */
	cachedVoices?: number;
	/** rvc: bytes its loaded feature indexes may hold (`RUNNER_RVC_INDEX_CACHE_MB`; unset: the engine's default). */
	maxCachedIndexBytes?: number;
	/** rvc: ContentVec's matrix products in int8 (`RUNNER_RVC_CONTENTVEC_INT8`). */
	contentvecInt8?: boolean;
	/** rvc: ContentVec and RMVPE keep memory arenas on the CPU (`RUNNER_RVC_FEATURE_ARENAS`; unset: the engine's default). */
	featureArenas?: boolean;
	/**
	 * rvc: limits of an account's uploaded ONNX synthesizer, run in a process of its own (`RUNNER_RVC_ONNX_*`; each unset
	 * one: the engine's default).
	 */
	uploadedSynthesizerLimits?: { secondsPerAudioSecond?: number; minRunSeconds?: number; memoryBytes?: number };
}

export type EngineFactory = (options: EngineOptions) => Engine | Promise<Engine>;

// A variable specifier: the rvc engine is built separately, and the type checker must not require it here.
const RVC_MODULE = "./rvc/index.ts";

export const ENGINE_LOADERS: Record<EngineName, () => Promise<EngineFactory>> = {
	dsp: async () => (await import("./dsp/index.ts")).createDspEngine,
	rvc: async () => {
		const module: { createRvcEngine?: unknown } = await import(RVC_MODULE);
		if (typeof module.createRvcEngine !== "function") throw new Error(`${RVC_MODULE} does not export createRvcEngine`);
		return module.createRvcEngine as EngineFactory;
	},
};

export interface LoadedEngine {
	engine: Engine;
	info: EngineInfo;
}

/** Create and self-test each engine; any failure stops the runner at start, not at its first job. */
export async function loadEngines(
	names: readonly EngineName[],
	options: EngineOptions,
	loaders: Partial<Record<EngineName, () => Promise<EngineFactory>>> = ENGINE_LOADERS,
): Promise<Map<EngineName, LoadedEngine>> {
	const loaded = new Map<EngineName, LoadedEngine>();
	for (const name of names) {
		const loader = loaders[name];
		if (!loader) throw new Error(`no loader for engine ${name}`);
		const engine = await (await loader())(options);
		const info = await engine.init();
		options.logger.info("engine ready", {
			engine: name,
			execution_provider: info.executionProvider,
			...(info.details !== undefined ? { details: info.details } : {}),
		});
		loaded.set(name, { engine, info });
	}
	return loaded;
}
