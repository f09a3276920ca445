/** Builds a real lease loop (real HTTP client, token provider, pipeline and dsp engine) against a fake API. */

import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { EngineName } from "../../../src/contracts/runner.ts";
import { RunnerApiClient } from "../../src/api/runner-api-client.ts";
import { TokenProvider } from "../../src/api/token-provider.ts";
import { ArtifactCache } from "../../src/artifacts/artifact-cache.ts";
import { DspEngine } from "../../src/engines/dsp/dsp-engine.ts";
import type { LoadedEngine } from "../../src/engines/registry.ts";
import { silentLogger } from "../../src/logger.ts";
import { createJobProcessor } from "../../src/loop/job-processor.ts";
import { LeaseLoop } from "../../src/loop/lease-loop.ts";
import { VoiceAffinity } from "../../src/loop/voice-affinity.ts";
import { RunnerMetrics } from "../../src/observability/metrics.ts";
import { CLIENT_ID, CLIENT_SECRET, type FakeJob, type FakeRunnerApi } from "./fake-runner-api.ts";
import { harmonicTone } from "./signals.ts";
import { makeWav } from "./wav-files.ts";

export function startTestRunner(
	api: FakeRunnerApi,
	options: {
		capacity?: number;
		engines?: ReadonlyMap<EngineName, LoadedEngine>;
		/** The artifact cache's budget, wired to the affinity as the runner does (default: none). */
		artifactBudgetBytes?: number;
		/** How long final reports keep trying past their attempts (default here: 0, so a test's outage ends fast). */
		reportWindowMs?: number;
	} = {},
) {
	const dir = mkdtempSync(join(tmpdir(), "runner-test-"));
	const metrics = new RunnerMetrics();
	const affinity = new VoiceAffinity();
	const artifacts = new ArtifactCache(join(dir, "artifacts"), {
		...(options.artifactBudgetBytes !== undefined ? { maxBytes: options.artifactBudgetBytes } : {}),
		onRemoved: (sha256) => affinity.forgetArtifact(sha256),
	});
	const tokens = new TokenProvider({ apiBaseUrl: api.baseUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
	const engines =
		options.engines ??
		new Map<EngineName, LoadedEngine>([
			["dsp", { engine: new DspEngine(), info: { name: "dsp", executionProvider: "cpu" } }],
		]);
	const loop = new LeaseLoop(
		{
			runnerId: "test-runner",
			capacity: options.capacity ?? 1,
			leaseWaitSeconds: 0.5,
			backoff: { baseMs: 10, maxMs: 40 },
			reportWindowMs: options.reportWindowMs ?? 0,
		},
		{
			api: new RunnerApiClient({ apiBaseUrl: api.baseUrl, tokens }),
			engines,
			processJob: createJobProcessor({
				artifacts,
				workDir: join(dir, "work"),
				affinity,
			}),
			metrics,
			logger: silentLogger,
			affinity,
		},
	);
	const done = loop.start();
	return {
		loop,
		metrics,
		artifacts,
		done,
		/** Count of finished jobs by outcome, read from the Prometheus counter. */
		async outcomes(): Promise<Record<string, number>> {
			const counts: Record<string, number> = {};
			for (const v of (await metrics.jobs.get()).values) counts[String(v.labels.outcome)] = v.value;
			return counts;
		},
		async dispose() {
			await loop.stop(0);
			rmSync(dir, { recursive: true, force: true });
		},
	};
}

export function wavJob(seconds: number, extra: Partial<FakeJob> = {}): FakeJob {
	const sampleRate = 22_050;
	return {
		conversionId: randomUUID(),
		source: makeWav([harmonicTone(180, seconds, sampleRate)], sampleRate, { kind: "pcm", bits: 16 }),
		format: "wav",
		sampleRate,
		channels: 1,
		durationSeconds: seconds,
		semitones: 3,
		...extra,
	};
}

/** Read the fields of the runner's WAV header: `fmt ` first, plain (16 bytes) or extensible (40), then `data`. */
export function readWavHeader(bytes: Uint8Array) {
	const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
	const text = (o: number) => String.fromCharCode(...bytes.subarray(o, o + 4));
	const channels = view.getUint16(22, true);
	const sampleRate = view.getUint32(24, true);
	const bits = view.getUint16(34, true);
	const dataAt = 20 + view.getUint32(16, true);
	const dataBytes = text(dataAt) === "data" ? view.getUint32(dataAt + 4, true) : 0;
	return {
		riff: text(0),
		wave: text(8),
		channels,
		sampleRate,
		bits,
		dataBytes,
		seconds: dataBytes / (channels * (bits / 8)) / sampleRate,
	};
}
