/**
 * The runner process: load engines, serve health and metrics, run the lease loop until a signal.
 * SIGTERM/SIGINT once: graceful stop (finish or release within the grace period). Twice: exit now
 * (the leases then expire and the Worker re-queues the jobs).
 */
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { RunnerApiClient } from "./api/runner-api-client.ts";
import { TokenProvider } from "./api/token-provider.ts";
import { ArtifactCache } from "./artifacts/artifact-cache.ts";
import { ConfigError, type RunnerConfig } from "./config.ts";
import { loadEngines } from "./engines/registry.ts";
import { jsonLogger, type Logger } from "./logger.ts";
import { createJobProcessor } from "./loop/job-processor.ts";
import { LeaseLoop } from "./loop/lease-loop.ts";
import { cachedArtifactPaths, RecentVoices, warmRecentVoices } from "./loop/recent-voices.ts";
import { VoiceAffinity } from "./loop/voice-affinity.ts";
import { startHealthServer } from "./observability/health-server.ts";
import { RunnerMetrics } from "./observability/metrics.ts";
import { createVoiceValidator } from "./validation/voice-validator.ts";
import { processWorkDir, removeStaleWork } from "./work-dir.ts";

/**
 * The folders the runner writes must be writable before it leases anything: otherwise every job it takes fails
 * (and is charged an attempt) while health says ready. A problem is a configuration error (exit 2), by variable.
 */
async function checkWritableFolders(config: RunnerConfig): Promise<void> {
	const problems: string[] = [];
	for (const [variable, folder] of [
		["RUNNER_WORK_DIR", config.workDir],
		["RUNNER_CACHE_DIR", join(config.cacheDir, "artifacts")],
	] as const) {
		const probe = join(folder, `.write-check-${process.pid}-${randomUUID()}`);
		try {
			await mkdir(folder, { recursive: true });
			await writeFile(probe, "");
			await rm(probe, { force: true });
		} catch (error) {
			problems.push(
				`${variable}: folder cannot be created or written (${(error as NodeJS.ErrnoException).code ?? "error"})`,
			);
		}
	}
	if (problems.length > 0) throw new ConfigError(problems);
}

export async function runRunner(config: RunnerConfig, logger: Logger = jsonLogger): Promise<void> {
	await checkWritableFolders(config);
	const metrics = new RunnerMetrics({ processMetrics: true });
	let loop: LeaseLoop | undefined;
	const engineProviders: Record<string, { execution_provider: string }> = {};
	const health = await startHealthServer({
		host: config.healthHost,
		port: config.healthPort,
		metrics,
		snapshot: () => ({
			status: loop?.state ?? "starting",
			runner_id: config.runnerId,
			active_jobs: loop?.activeJobs ?? 0,
			capacity: config.capacity,
			engines: engineProviders,
			api: loop?.api ?? { reachable: null, failing_since: null, error: null },
		}),
	});
	logger.info("health server listening", { port: health.port });

	// Outputs of earlier runs that were killed mid-job go before this one writes any (see work-dir.ts).
	const stale = await removeStaleWork(config.workDir);
	logger.info("work dir cleaned", { removed_files: stale.files, removed_bytes: stale.bytes });
	for (const failure of stale.failures) logger.warn("could not remove from the work dir", failure);
	const workDir = processWorkDir(config.workDir);
	await mkdir(workDir, { recursive: true });
	const engines = await loadEngines(config.engines, {
		cacheDir: join(config.cacheDir, "engines"),
		logger,
		capacity: config.capacity,
		...(config.rvcModelThreads !== undefined ? { modelThreads: config.rvcModelThreads } : {}),
		...(config.rvcCachedVoices !== undefined ? { cachedVoices: config.rvcCachedVoices } : {}),
		...(config.rvcIndexCacheBytes !== undefined ? { maxCachedIndexBytes: config.rvcIndexCacheBytes } : {}),
		contentvecInt8: config.rvcContentvecInt8,
		...(config.rvcFeatureArenas !== undefined ? { featureArenas: config.rvcFeatureArenas } : {}),
		uploadedSynthesizerLimits: config.rvcUploadedSynthesizerLimits,
	});
	for (const [name, { info }] of engines) {
		engineProviders[name] = { execution_provider: info.executionProvider };
		metrics.engineInfo.set({ engine: name, execution_provider: info.executionProvider }, 1);
	}

	// Models of the voices converted before the last stop are loaded and warmed while health still says
	// "starting", so the first lease does not pay for them.
	const affinity = new VoiceAffinity();
	const artifacts = new ArtifactCache(join(config.cacheDir, "artifacts"), {
		maxBytes: config.artifactCacheBytes,
		logger,
		onRemoved: (sha256) => affinity.forgetArtifact(sha256),
	});
	const recentVoices = new RecentVoices(config.cacheDir);
	const recent = await recentVoices.load();
	await warmRecentVoices(recent, engines, artifacts, logger);
	// Those whose files are at hand are listed for the broker's affinity, and so the Worker can say if one was
	// deleted since.
	for (const voice of [...recent].reverse()) {
		if ("paths" in (await cachedArtifactPaths(voice, artifacts))) affinity.rememberVoice(voice);
	}
	// A budget lowered since the last run applies at once (what is over it was used before this start).
	const trimmed = await artifacts.trim();
	logger.info("artifact cache", {
		bytes: trimmed.bytesAfter,
		max_bytes: config.artifactCacheBytes,
		removed: trimmed.removed.length,
	});

	const tokens = new TokenProvider({
		apiBaseUrl: config.apiBaseUrl,
		clientId: config.clientId,
		clientSecret: config.clientSecret,
	});
	// A runner that can run rvc voices also validates the ones accounts upload.
	const rvc = engines.get("rvc")?.engine;
	const api = new RunnerApiClient({ apiBaseUrl: config.apiBaseUrl, tokens });
	loop = new LeaseLoop(
		{ runnerId: config.runnerId, capacity: config.capacity, leaseWaitSeconds: config.leaseWaitSeconds },
		{
			api,
			engines,
			processJob: createJobProcessor({
				artifacts,
				recentVoices,
				workDir,
				affinity,
				uploads: api,
			}),
			metrics,
			logger,
			affinity,
			...(rvc ? { validateVoice: createVoiceValidator({ artifacts, engine: rvc }) } : {}),
			// A voice its account deleted leaves this runner too: what the engines keep loaded from its own files (at once,
			// or when the last job using it is done), those files (not the shared base models) and the start-up warm
			// list. One whose files are still in use by a job stays listed, so the next lease response names it again.
			forgetVoices: async (voiceIds) => {
				for (const voiceId of voiceIds) {
					const files = affinity.ownFiles(voiceId);
					const paths = files.map((sha256) => artifacts.pathFor({ sha256 }));
					for (const { engine } of engines.values()) await engine.forget?.(paths);
					if (!(await artifacts.discard(files))) continue;
					affinity.forget(voiceId);
					await recentVoices.forget(voiceId);
					logger.info("deleted voice removed", { voice_id: voiceId, artifacts: files.length });
				}
			},
		},
	);

	let signals = 0;
	const onSignal = (signal: NodeJS.Signals) => {
		signals++;
		if (signals > 1) {
			logger.warn("second signal: exiting now", { signal });
			try {
				rmSync(workDir, { recursive: true, force: true });
			} finally {
				process.exit(130);
			}
		}
		logger.info("signal received: stopping gracefully", { signal, grace_seconds: config.shutdownGraceSeconds });
		void loop?.stop(config.shutdownGraceSeconds * 1000);
	};
	process.on("SIGTERM", onSignal);
	process.on("SIGINT", onSignal);

	logger.info("runner started", { runner_id: config.runnerId, capacity: config.capacity, engines: config.engines });
	await loop.start();
	for (const { engine } of engines.values()) await engine.dispose();
	await health.close();
	await rm(workDir, { recursive: true, force: true });
	logger.info("runner stopped");
}
