/**
 * One conversion, bytes to bytes: download the source by its signed GET, decode in chunks, trim previews,
 * bring it to the engine's input format, convert, encode WAV to a temporary file, PUT it to the signed
 * output address. Every stage is a stream of blocks, so memory stays bounded for any source length; the
 * only whole-file artefact is the output WAV on disk (needed anyway for an exact Content-Length).
 */
import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { MAX_OUTPUT_BYTES, SOURCE_AUDIO_LIMITS, type VoiceDescriptor } from "../../../src/contracts/runner.ts";
import { decodeSource } from "../audio/decode-source.ts";
import { convertToFormat } from "../audio/format-conversion.ts";
import { type AudioBlock, blockFrames, countFrames, framesFor, type PcmFormat, takeFrames } from "../audio/pcm.ts";
import { replayThen } from "../audio/replay.ts";
import { WavFileWriter, wavFileBytes } from "../audio/wav-file-writer.ts";
import type { Engine } from "../engines/engine.ts";
import { corruptedSource, outputTooLarge, unsupportedFormat } from "../job-errors.ts";
import { downloadSource, uploadWav } from "../storage/transfer.ts";

/**
 * How far the decoded source may be from the duration preprocessing stated and still be fitted to it: decoders
 * and probes agree to the sample on every file we know, so this only absorbs a frame of MP3 rounding. Beyond it
 * the file is not what its metadata says (cut short, a false length field), and the job fails as corrupted.
 */
export const SOURCE_LENGTH_TOLERANCE_SECONDS = 0.1;

export interface ConversionRequest {
	sourceUrl: string;
	outputUrl: string;
	/** How the finished WAV is sent; default: one PUT to `outputUrl`. */
	uploadOutput?: (path: string, sizeBytes: number, signal: AbortSignal) => Promise<void>;
	engine: Engine;
	voice: VoiceDescriptor;
	semitones: number;
	/** The conversion's overrides of the voice's settings, for the engine to check and apply. */
	voiceSettings?: Readonly<Record<string, unknown>>;
	/**
	 * The source duration preprocessing stated (the lease's `source.duration_seconds`). The output is made exactly
	 * that long (or the preview's length); undefined takes the length from the decoded audio.
	 */
	sourceSeconds?: number;
	/** Convert only this many seconds from the start (previews); undefined converts everything. */
	previewSeconds?: number;
	artifactPaths: ReadonlyMap<string, string>;
	/** Folder for the temporary output WAV. */
	workDir: string;
	signal: AbortSignal;
	/** Called with the seconds of source read so far (for heartbeat progress). */
	onSourceSeconds?: (seconds: number) => void;
	/** The largest output WAV the output address takes; default `MAX_OUTPUT_BYTES`. */
	maxOutputBytes?: number;
}

export interface ConversionResult {
	sizeBytes: number;
	durationSeconds: number;
	sampleRate: number;
	channels: number;
	/** Seconds of (trimmed) source audio converted. */
	sourceSeconds: number;
	processingSeconds: number;
	/** Processing time ÷ audio duration: below 1 is faster than real time. */
	realTimeFactor: number;
}

export async function convertSource(request: ConversionRequest): Promise<ConversionResult> {
	const started = performance.now();
	const { engine, voice, signal } = request;
	const decoded = decodeSource(downloadSource(request.sourceUrl, signal));
	const { first, rest } = await peekFirst(decoded);
	if (!first) throw corruptedSource("no audio frames");
	const source: PcmFormat = { sampleRate: first.sampleRate, channels: first.channels.length };
	refuseOutsideLimits(source);

	const trimmed =
		request.previewSeconds === undefined
			? rest
			: takeFrames(rest, framesFor(request.previewSeconds, source.sampleRate));
	let sourceFrames = 0;
	const counted = countFrames(trimmed, (frames, block) => {
		if (block.sampleRate !== source.sampleRate || block.channels.length !== source.channels) {
			throw corruptedSource("the sample rate or channel count changes within the file");
		}
		sourceFrames += frames;
		request.onSourceSeconds?.(sourceFrames / source.sampleRate);
	});

	const input = engine.inputFormat(source, voice);
	const output = engine.outputFormat(source, voice);
	const statedFrames = statedSourceFrames(request, source.sampleRate);
	// Known from the stated length before anything is converted; without one, checked as the output grows.
	const maxOutputBytes = request.maxOutputBytes ?? MAX_OUTPUT_BYTES;
	if (statedFrames !== undefined) {
		refuseLargeOutput(Math.round((statedFrames * output.sampleRate) / source.sampleRate), output, maxOutputBytes);
	}
	const path = join(request.workDir, `output-${randomUUID()}.wav`);
	// The source's speakers stay with its channels where the engine keeps them (dsp); a downmix states none.
	const channelMask = output.channels === source.channels ? first.channelMask : undefined;
	const writer = await WavFileWriter.create(path, output.sampleRate, output.channels, {
		...(channelMask !== undefined ? { channelMask } : {}),
	});
	try {
		const job = {
			voice,
			semitones: request.semitones,
			artifactPaths: request.artifactPaths,
			input,
			...(statedFrames !== undefined
				? { inputFrames: Math.round((statedFrames * input.sampleRate) / source.sampleRate) }
				: {}),
			...(request.voiceSettings ? { voiceSettings: request.voiceSettings } : {}),
		};
		for await (const block of engine.convert(convertToFormat(counted, input), job, signal)) {
			refuseLargeOutput(writer.frames + blockFrames(block), output, maxOutputBytes);
			await writer.write(block);
		}
		if (
			statedFrames !== undefined &&
			Math.abs(statedFrames - sourceFrames) > SOURCE_LENGTH_TOLERANCE_SECONDS * source.sampleRate
		) {
			const seconds = (frames: number) => `${(frames / source.sampleRate).toFixed(3)} s`;
			throw corruptedSource(
				`the source decodes to ${seconds(sourceFrames)} of audio but its metadata says ${seconds(statedFrames)}`,
			);
		}
		// The engine contract allows ±10 ms; the file is made exact so previews and full outputs line up.
		const expectedFrames = Math.round(((statedFrames ?? sourceFrames) * output.sampleRate) / source.sampleRate);
		const file = await writer.finish(expectedFrames);
		signal.throwIfAborted();
		if (request.uploadOutput) await request.uploadOutput(path, file.sizeBytes, signal);
		else await uploadWav(request.outputUrl, path, file.sizeBytes, signal);
		const processingSeconds = (performance.now() - started) / 1000;
		const sourceSeconds = sourceFrames / source.sampleRate;
		return {
			sizeBytes: file.sizeBytes,
			durationSeconds: file.frames / file.sampleRate,
			sampleRate: file.sampleRate,
			channels: file.channels,
			sourceSeconds,
			processingSeconds,
			realTimeFactor: sourceSeconds > 0 ? processingSeconds / sourceSeconds : 0,
		};
	} finally {
		await writer.abort();
		await rm(path, { force: true });
	}
}

/** Source frames the output must stand for: the stated duration, cut to the preview; undefined when none was stated. */
function statedSourceFrames(request: ConversionRequest, sampleRate: number): number | undefined {
	const stated = request.sourceSeconds;
	if (stated === undefined || stated <= 0) return undefined;
	return framesFor(Math.min(stated, request.previewSeconds ?? Number.POSITIVE_INFINITY), sampleRate);
}

/** An output WAV over `maxBytes` could never be uploaded: the job fails for good, with the sizes. */
function refuseLargeOutput(frames: number, output: PcmFormat, maxBytes: number): void {
	const bytes = wavFileBytes(frames, output.channels);
	if (bytes <= maxBytes) return;
	const hours = frames / output.sampleRate / 3600;
	throw outputTooLarge(
		`${hours.toFixed(2)} h of ${output.sampleRate} Hz, ${output.channels}-channel 16-bit WAV is ${bytes} bytes or more (at most ${maxBytes})`,
	);
}

/** A header outside the service's limits is refused before any engine allocates for it (see `SOURCE_AUDIO_LIMITS`). */
function refuseOutsideLimits(source: PcmFormat): void {
	const { minSampleRate, maxSampleRate, maxChannels } = SOURCE_AUDIO_LIMITS;
	if (source.sampleRate < minSampleRate || source.sampleRate > maxSampleRate) {
		throw unsupportedFormat(
			`a sample rate of ${source.sampleRate} Hz (${minSampleRate} to ${maxSampleRate} Hz are supported)`,
		);
	}
	if (source.channels > maxChannels) throw unsupportedFormat(`${source.channels} channels (at most ${maxChannels})`);
}

/** Take the first block of a stream and give back a stream that starts with it again. */
async function peekFirst(
	blocks: AsyncIterable<AudioBlock>,
): Promise<{ first: AudioBlock | undefined; rest: AsyncIterable<AudioBlock> }> {
	const iterator = blocks[Symbol.asyncIterator]();
	const head = await iterator.next();
	if (head.done) return { first: undefined, rest: (async function* () {})() };
	return { first: head.value, rest: replayThen([head.value], iterator) };
}
