/**
 * The default way a lease becomes an output: fetch the voice's artifacts, settle the pitch shift (measuring the
 * source for `auto`), then run the conversion pipeline.
 */
import { mkdir } from "node:fs/promises";
import type { Lease } from "../../../src/contracts/runner.ts";
import { PITCH_SHIFT_SEMITONES, type PitchShift } from "../../../src/contracts/voice-conversions.ts";
import type { ArtifactCache } from "../artifacts/artifact-cache.ts";
import { decodeSource } from "../audio/decode-source.ts";
import type { Engine } from "../engines/engine.ts";
import { chooseAutoPitchShift, measurePitch, PITCH_ANALYSIS_SECONDS } from "../pipeline/auto-pitch.ts";
import { type ConversionResult, convertSource } from "../pipeline/convert-source.ts";
import { type OutputUploads, uploadOutput } from "../storage/output-upload.ts";
import { downloadSource } from "../storage/transfer.ts";
import type { RecentVoices } from "./recent-voices.ts";
import type { VoiceAffinity } from "./voice-affinity.ts";

export interface JobContext {
	engine: Engine;
	signal: AbortSignal;
	/** Fraction 0..1 of the source read so far; sent with heartbeats. */
	onProgress: (fraction: number) => void;
}

export interface JobResult extends ConversionResult {
	/** The pitch table value applied, when the lease named one (`pitch_shift`); for `auto`, the one chosen. */
	pitchShiftApplied?: PitchShift;
}

export type JobProcessor = (lease: Lease, context: JobContext) => Promise<JobResult>;

/** The semitones to apply and the pitch table value they stand for (none for leases from older Workers). */
async function settlePitch(
	lease: Lease,
	engine: Engine,
	signal: AbortSignal,
): Promise<{ semitones: number; applied?: PitchShift }> {
	if (lease.pitch_shift === undefined) return { semitones: lease.semitones };
	if (lease.pitch_shift !== "auto") return { semitones: lease.semitones, applied: lease.pitch_shift };
	// Its own abort: the measurement stops reading the source long before the end, and the download must stop too.
	const reading = new AbortController();
	const stop = () => reading.abort(signal.reason);
	signal.addEventListener("abort", stop, { once: true });
	try {
		const seconds = Math.min(
			PITCH_ANALYSIS_SECONDS,
			lease.use_preview ? lease.preview_seconds : Number.POSITIVE_INFINITY,
		);
		const profile = await measurePitch(decodeSource(downloadSource(lease.source.url, reading.signal)), seconds);
		const applied = chooseAutoPitchShift(
			profile?.medianHz ?? null,
			lease.voice.pitch_range_hz,
			engine.transposeSemitones?.(lease.voice),
		);
		return { semitones: PITCH_SHIFT_SEMITONES[applied], applied };
	} finally {
		signal.removeEventListener("abort", stop);
		reading.abort();
	}
}

export function createJobProcessor(options: {
	artifacts: ArtifactCache;
	workDir: string;
	affinity?: VoiceAffinity;
	/** Voices to warm at the next start. */
	recentVoices?: RecentVoices;
	/** The runner API's output uploads, for outputs too large for one request. */
	uploads?: OutputUploads;
}): JobProcessor {
	return async (lease, { engine, signal, onProgress }) => {
		// The voice's files stay in the cache until the job is over (the engine may open them at any point).
		const artifacts = options.artifacts.hold();
		try {
			const artifactPaths = await artifacts.ensureAll(lease.voice.artifacts, signal);
			if (lease.voice.artifacts.length > 0) {
				options.affinity?.rememberVoice(lease.voice);
				void options.recentVoices?.remember(lease.voice);
			}
			await mkdir(options.workDir, { recursive: true });
			const previewSeconds = lease.use_preview ? lease.preview_seconds : undefined;
			const expectedSeconds = Math.min(lease.source.duration_seconds, previewSeconds ?? Number.POSITIVE_INFINITY);
			const pitch = await settlePitch(lease, engine, signal);
			const result = await convertSource({
				sourceUrl: lease.source.url,
				outputUrl: lease.output.url,
				uploadOutput: (path, sizeBytes, uploadSignal) =>
					uploadOutput({ lease, uploads: options.uploads }, path, sizeBytes, uploadSignal),
				engine,
				voice: lease.voice,
				semitones: pitch.semitones,
				...(lease.voice_settings ? { voiceSettings: lease.voice_settings } : {}),
				sourceSeconds: lease.source.duration_seconds,
				previewSeconds,
				artifactPaths,
				workDir: options.workDir,
				signal,
				onSourceSeconds: (seconds) => onProgress(expectedSeconds > 0 ? Math.min(1, seconds / expectedSeconds) : 0),
			});
			return pitch.applied ? { ...result, pitchShiftApplied: pitch.applied } : result;
		} finally {
			artifacts.release();
		}
	};
}
