/**
 * FLAC and MP3 decoding through the eshaz wasm decoders (libFLAC and mpg123 compiled to WebAssembly, MIT,
 * no native build, no download). Both accept the file in arbitrary chunks and keep their own frame
 * parser state, so we feed them network chunks as they arrive and never hold the whole file.
 */
import { FLACDecoder } from "@wasm-audio-decoders/flac";
import { MPEGDecoder } from "mpg123-decoder";
import { corruptedSource } from "../job-errors.ts";
import type { AudioBlock } from "./pcm.ts";

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
): AsyncGenerator<AudioBlock> {
	let framesDecoded = 0;
	const toBlock = (result: DecodedChunk): AudioBlock | undefined => {
		const firstError = result.errors[0];
		if (firstError) throw corruptedSource(`${label} decoder: ${firstError.message}`);
		if (result.samplesDecoded === 0) return undefined;
		framesDecoded += result.samplesDecoded;
		// Copy out: the arrays can be views of the decoder's wasm memory, reused by the next call.
		return {
			sampleRate: result.sampleRate,
			channels: result.channelData.map((c) => c.slice(0, result.samplesDecoded)),
		};
	};
	try {
		for await (const chunk of bytes) {
			const block = toBlock(await decoder.decode(chunk));
			if (block) yield block;
		}
		if (decoder.flush) {
			const block = toBlock(await decoder.flush());
			if (block) yield block;
		}
	} finally {
		decoder.free();
	}
	if (framesDecoded === 0) throw corruptedSource(`no ${label} frames could be decoded`);
}

export async function* decodeFlac(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	const decoder = new FLACDecoder();
	await decoder.ready;
	yield* decodeWith("FLAC", decoder, bytes);
}

export async function* decodeMp3(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	// Gapless: drops the encoder delay and padding (LAME header), so durations match the source.
	const decoder = new MPEGDecoder({ enableGapless: true });
	await decoder.ready;
	yield* decodeWith("MP3", decoder, bytes);
}
