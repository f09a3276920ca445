/** The default way a lease becomes an output: fetch the voice's artifacts, then run the conversion pipeline. */
import { mkdir } from "node:fs/promises";
import type { Lease } from "../../../src/contracts/runner.ts";
import type { ArtifactCache } from "../artifacts/artifact-cache.ts";
import type { Engine } from "../engines/engine.ts";
import { type ConversionResult, convertSource } from "../pipeline/convert-source.ts";
import { type OutputUploads, uploadOutput } from "../storage/output-upload.ts";
import type { VoiceAffinity } from "./voice-affinity.ts";

export interface JobContext {
	engine: Engine;
	signal: AbortSignal;
	/** Fraction 0..1 of the source read so far; sent with heartbeats. */
	onProgress: (fraction: number) => void;
}

export type JobProcessor = (lease: Lease, context: JobContext) => Promise<ConversionResult>;

export function createJobProcessor(options: {
	artifacts: ArtifactCache;
	workDir: string;
	affinity?: VoiceAffinity;
	/** The runner API's output uploads, for outputs too large for one request. */
	uploads?: OutputUploads;
}): JobProcessor {
	return async (lease, { engine, signal, onProgress }) => {
		const artifactPaths = await options.artifacts.ensureAll(lease.voice.artifacts, signal);
		if (lease.voice.artifacts.length > 0) options.affinity?.remember(lease.voice.id);
		await mkdir(options.workDir, { recursive: true });
		const previewSeconds = lease.use_preview ? lease.preview_seconds : undefined;
		const expectedSeconds = Math.min(lease.source.duration_seconds, previewSeconds ?? Number.POSITIVE_INFINITY);
		return convertSource({
			sourceUrl: lease.source.url,
			outputUrl: lease.output.url,
			uploadOutput: (path, sizeBytes, uploadSignal) =>
				uploadOutput({ lease, uploads: options.uploads }, path, sizeBytes, uploadSignal),
			engine,
			voice: lease.voice,
			semitones: lease.semitones,
			...(lease.voice_settings ? { voiceSettings: lease.voice_settings } : {}),
			sourceSeconds: lease.source.duration_seconds,
			previewSeconds,
			artifactPaths,
			workDir: options.workDir,
			signal,
			onSourceSeconds: (seconds) => onProgress(expectedSeconds > 0 ? Math.min(1, seconds / expectedSeconds) : 0),
		});
	};
}
