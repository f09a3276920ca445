/**
 * Runner configuration, from the environment only (12-factor; the container gets it from its orchestrator).
 * Validated up front so a bad deployment fails at start with every problem listed, not mid-job.
 */
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { ENGINE_NAMES } from "../../src/contracts/runner.ts";

const commaList = z
	.string()
	.transform((value) =>
		value
			.split(",")
			.map((item) => item.trim())
			.filter(Boolean),
	)
	.pipe(z.array(z.enum(ENGINE_NAMES)).min(1, "name at least one engine"));

const integer = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const RunnerEnv = z.object({
	RUNNER_API_BASE_URL: z
		.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" })
		.transform((url) => url.replace(/\/+$/, "")),
	RUNNER_CLIENT_ID: z.string().min(1),
	RUNNER_CLIENT_SECRET: z.string().min(1),
	RUNNER_ID: z.string().min(1).max(128).default(`${hostname()}-${process.pid}`),
	RUNNER_CAPACITY: integer(1, 32).default(1),
	RUNNER_ENGINES: commaList.default(["dsp"]),
	RUNNER_CACHE_DIR: z.string().min(1).default(".runner-cache"),
	RUNNER_ARTIFACT_CACHE_GB: z.coerce.number().min(1).max(1_000_000).default(20),
	RUNNER_WORK_DIR: z.string().min(1).default(join(tmpdir(), "vc-runner")),
	RUNNER_HEALTH_HOST: z.string().min(1).default("0.0.0.0"),
	RUNNER_HEALTH_PORT: integer(0, 65535).default(8080),
	RUNNER_SHUTDOWN_GRACE_SECONDS: z.coerce.number().min(0).max(3600).default(60),
	RUNNER_LEASE_WAIT_SECONDS: z.coerce.number().min(0).max(25).default(20),
	RUNNER_RVC_CONTENTVEC_INT8: z.enum(["0", "1", "false", "true"]).default("0"),
	RUNNER_RVC_FEATURE_ARENAS: z.enum(["0", "1", "false", "true"]).optional(),
	RUNNER_RVC_MODEL_THREADS: integer(1, 32).optional(),
	RUNNER_RVC_CACHED_VOICES: integer(1, 16).optional(),
	RUNNER_RVC_INDEX_CACHE_MB: integer(100, 1_000_000).optional(),
	RUNNER_RVC_ONNX_RUN_SECONDS_PER_AUDIO_SECOND: z.coerce.number().min(0.01).max(10_000).optional(),
	RUNNER_RVC_ONNX_RUN_MIN_SECONDS: z.coerce.number().min(0.1).max(86_400).optional(),
	RUNNER_RVC_ONNX_MEMORY_MB: integer(64, 10_000_000).optional(),
});

export interface RunnerConfig {
	apiBaseUrl: string;
	clientId: string;
	clientSecret: string;
	runnerId: string;
	capacity: number;
	engines: (typeof ENGINE_NAMES)[number][];
	cacheDir: string;
	/** The artifact cache's size budget (least recently used artifacts no job holds are removed past it). */
	artifactCacheBytes: number;
	workDir: string;
	healthHost: string;
	healthPort: number;
	shutdownGraceSeconds: number;
	leaseWaitSeconds: number;
	/** The rvc engine runs ContentVec's matrix products in int8 (less memory, a small feature error). */
	rvcContentvecInt8: boolean;
	/**
	 * On the CPU, ContentVec and RMVPE keep their activations between runs (faster, more memory); unset: the
	 * engine's default (on where several model threads share them).
	 */
	rvcFeatureArenas: boolean | undefined;
	/** The rvc engine's model threads on the CPU, each with a synthesizer of its own (default: see the engine). */
	rvcModelThreads: number | undefined;
	/** Voices whose synthesizer each rvc model thread keeps loaded (`RvcEngineOptions.cachedVoices`); unset: the engine's default. */
	rvcCachedVoices: number | undefined;
	/** Bytes the rvc engine's loaded feature indexes may hold (`RvcEngineOptions.maxCachedIndexBytes`); unset: the engine's default. */
	rvcIndexCacheBytes: number | undefined;
	/**
	 * Limits of an account's uploaded ONNX synthesizer, run in a process of its own (`RvcEngineOptions.
	 * uploadedSynthesizerLimits`); each unset one keeps the engine's default.
	 */
	rvcUploadedSynthesizerLimits: { secondsPerAudioSecond?: number; minRunSeconds?: number; memoryBytes?: number };
}

export class ConfigError extends Error {
	readonly problems: string[];

	constructor(problems: string[]) {
		super(`invalid runner configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
		this.name = "ConfigError";
		this.problems = problems;
	}
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): RunnerConfig {
	// Treat empty variables as unset, so `FOO=` in an env file means "use the default".
	const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ""));
	const parsed = RunnerEnv.safeParse(present);
	if (!parsed.success) {
		// Name the variable and the rule; never echo values (the secret is one of them).
		throw new ConfigError(parsed.error.issues.map((issue) => `${issue.path.join(".") || "env"}: ${issue.message}`));
	}
	const e = parsed.data;
	return {
		apiBaseUrl: e.RUNNER_API_BASE_URL,
		clientId: e.RUNNER_CLIENT_ID,
		clientSecret: e.RUNNER_CLIENT_SECRET,
		runnerId: e.RUNNER_ID,
		capacity: e.RUNNER_CAPACITY,
		engines: [...new Set(e.RUNNER_ENGINES)],
		cacheDir: e.RUNNER_CACHE_DIR,
		artifactCacheBytes: Math.round(e.RUNNER_ARTIFACT_CACHE_GB * 1e9),
		workDir: e.RUNNER_WORK_DIR,
		healthHost: e.RUNNER_HEALTH_HOST,
		healthPort: e.RUNNER_HEALTH_PORT,
		shutdownGraceSeconds: e.RUNNER_SHUTDOWN_GRACE_SECONDS,
		leaseWaitSeconds: e.RUNNER_LEASE_WAIT_SECONDS,
		rvcContentvecInt8: e.RUNNER_RVC_CONTENTVEC_INT8 === "1" || e.RUNNER_RVC_CONTENTVEC_INT8 === "true",
		rvcFeatureArenas:
			e.RUNNER_RVC_FEATURE_ARENAS === undefined
				? undefined
				: e.RUNNER_RVC_FEATURE_ARENAS === "1" || e.RUNNER_RVC_FEATURE_ARENAS === "true",
		rvcModelThreads: e.RUNNER_RVC_MODEL_THREADS,
		rvcCachedVoices: e.RUNNER_RVC_CACHED_VOICES,
		rvcIndexCacheBytes: e.RUNNER_RVC_INDEX_CACHE_MB === undefined ? undefined : e.RUNNER_RVC_INDEX_CACHE_MB * 1e6,
		rvcUploadedSynthesizerLimits: {
			...(e.RUNNER_RVC_ONNX_RUN_SECONDS_PER_AUDIO_SECOND !== undefined
				? { secondsPerAudioSecond: e.RUNNER_RVC_ONNX_RUN_SECONDS_PER_AUDIO_SECOND }
				: {}),
			...(e.RUNNER_RVC_ONNX_RUN_MIN_SECONDS !== undefined ? { minRunSeconds: e.RUNNER_RVC_ONNX_RUN_MIN_SECONDS } : {}),
			...(e.RUNNER_RVC_ONNX_MEMORY_MB !== undefined ? { memoryBytes: e.RUNNER_RVC_ONNX_MEMORY_MB * 1024 * 1024 } : {}),
		},
	};
}
