/**
 * FLAC and MP3 decoding through the eshaz wasm decoders (libFLAC and mpg123 compiled to WebAssembly, MIT,
 * no native build, no download). Both accept the file in arbitrary chunks and keep their own frame
 * parser state, so we feed them network chunks as they arrive and never hold the whole file.
 */
import { FLACDecoder } from "@wasm-audio-decoders/flac";
import { MPEGDecoder } from "mpg123-decoder";
import { flacTailBytes } from "../../../src/contracts/flac-stream-end.ts";
import { corruptedSource, unsupportedFormat } from "../job-errors.ts";
import { upToFlacAudioEnd } from "./flac-audio-end.ts";
import { findMp3Start } from "./mp3-stream-start.ts";
import type { AudioBlock } from "./pcm.ts";
import { replayThen } from "./replay.ts";
import { decodeWideFlac, needsWideFlacDecoder } from "./wide-flac-decoder.ts";

interface DecodedChunk {
	channelData: Float32Array[];
	samplesDecoded: number;
	sampleRate: number;
	errors: { message: string }[];
}

interface ChunkDecoder {
	decode(chunk: Uint8Array): DecodedChunk | Promise<DecodedChunk>;
	flush?(): Promise<DecodedChunk>;
	free(): void;
}

async function* decodeWith(
	label: string,
	decoder: ChunkDecoder,
	bytes: AsyncIterable<Uint8Array>,
	/** How many of the decoder's channels are real (mpg123-decoder always returns two). */
	channelCount?: number,
	/**
	 * Whether the decoder's errors after the first audio are skipped rather than fatal. mpg123 reports bytes it cannot
	 * sync to (padding or junk after the last frame, a damaged frame it skips) and goes on, as every MP3 player does;
	 * the pipeline still fails a source whose decoded length is off its stated duration.
	 */
	skipErrorsAfterAudio = false,
): AsyncGenerator<AudioBlock> {
	let framesDecoded = 0;
	const toBlock = (result: DecodedChunk): AudioBlock | undefined => {
		const firstError = result.errors[0];
		const skippable = skipErrorsAfterAudio && framesDecoded + result.samplesDecoded > 0;
		if (firstError && !skippable) throw corruptedSource(`${label} decoder: ${firstError.message}`);
		if (result.samplesDecoded === 0) return undefined;
		framesDecoded += result.samplesDecoded;
		// Copy out: the arrays can be views of the decoder's wasm memory, reused by the next call.
		return {
			sampleRate: result.sampleRate,
			channels: result.channelData
				.slice(0, channelCount ?? result.channelData.length)
				.map((c) => c.slice(0, result.samplesDecoded)),
		};
	};
	// Exceptions from inside the wasm decoder mean the bytes are bad; download errors are not wrapped.
	const decodeOrFail = async (run: () => DecodedChunk | Promise<DecodedChunk>): Promise<DecodedChunk> => {
		try {
			return await run();
		} catch (error) {
			throw corruptedSource(
				`${label} decoder failed: ${error instanceof Error ? error.message : String(error)}`,
				error,
			);
		}
	};
	try {
		for await (const chunk of bytes) {
			const block = toBlock(await decodeOrFail(() => decoder.decode(chunk)));
			if (block) yield block;
		}
		const { flush } = decoder;
		if (flush) {
			const block = toBlock(await decodeOrFail(() => flush.call(decoder)));
			if (block) yield block;
		}
	} finally {
		decoder.free();
	}
	if (framesDecoded === 0) throw corruptedSource(`no ${label} frames could be decoded`);
}

export async function* decodeFlac(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	// Read ahead to the first frame header (past any metadata, cover art included) to pick the decoder.
	const iterator = bytes[Symbol.asyncIterator]();
	const taken: Uint8Array[] = [];
	let head = new Uint8Array(0);
	let wide = needsWideFlacDecoder(head);
	while (wide === undefined) {
		const next = await iterator.next();
		if (next.done) break;
		taken.push(next.value);
		const joined = new Uint8Array(head.length + next.value.length);
		joined.set(head);
		joined.set(next.value, head.length);
		head = joined;
		wide = needsWideFlacDecoder(head);
	}
	// STREAMINFO's largest frame (bytes 15-17 after "fLaC" and the block header) bounds the tail held back.
	const maxFrameSize =
		head.length >= 18 ? ((head[15] as number) << 16) | ((head[16] as number) << 8) | (head[17] as number) : 0;
	const stream = upToFlacAudioEnd(replayThen(taken, iterator), flacTailBytes(maxFrameSize));
	if (wide) {
		yield* decodeWideFlac(stream);
		return;
	}
	const decoder = new FLACDecoder();
	await decoder.ready;
	yield* decodeWith("FLAC", decoder, stream);
}

export async function* decodeMp3(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	const start = await findMp3Start(bytes);
	if (!start) throw corruptedSource("no MPEG audio frame was found at the start of the file");
	const { frame } = start;
	if (frame.layer !== 3)
		throw unsupportedFormat(`MPEG-${frame.version} Layer ${"I".repeat(frame.layer)} audio, not MP3`);
	// Gapless: drops the encoder delay and padding (LAME header), so durations match the source.
	const decoder = new MPEGDecoder({ enableGapless: true });
	await decoder.ready;
	// mpg123-decoder duplicates mono into two channels; the first frame's header says how many are real.
	yield* decodeWith("MP3", decoder, start.stream, frame.channels, true);
}
