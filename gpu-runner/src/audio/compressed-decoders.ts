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
	/** How many of the decoder's channels are real (mpg123-decoder always returns two). */
	channelCount: () => number | undefined = () => undefined,
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
			channels: result.channelData
				.slice(0, channelCount() ?? result.channelData.length)
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
	const decoder = new FLACDecoder();
	await decoder.ready;
	yield* decodeWith("FLAC", decoder, bytes);
}

export async function* decodeMp3(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	// Gapless: drops the encoder delay and padding (LAME header), so durations match the source.
	const decoder = new MPEGDecoder({ enableGapless: true });
	await decoder.ready;
	// mpg123-decoder duplicates mono into two channels; read the real count from the first frame header.
	const probe = new Mp3ChannelProbe();
	async function* probed(): AsyncGenerator<Uint8Array> {
		for await (const chunk of bytes) {
			probe.feed(chunk);
			yield chunk;
		}
	}
	yield* decodeWith("MP3", decoder, probed(), () => probe.channels);
}

/**
 * Finds the first MPEG audio frame header in a byte stream (after an ID3v2 tag, which may be megabytes of
 * cover art) and reads its channel mode. Bytes are seen before the decoder sees them, so the answer is known
 * before the first samples come out.
 */
export class Mp3ChannelProbe {
	channels: number | undefined;
	#position = 0;
	#skipUntil = 0;
	#head: number[] = [];

	feed(chunk: Uint8Array): void {
		for (let i = 0; i < chunk.length && this.channels === undefined; i++, this.#position++) {
			if (this.#position < this.#skipUntil) continue;
			this.#head.push(chunk[i] as number);
			if (this.#head.length > 10) this.#head.shift();
			this.#inspect();
		}
	}

	#inspect(): void {
		const h = this.#head;
		if (h.length === 10 && h[0] === 0x49 && h[1] === 0x44 && h[2] === 0x33) {
			// ID3v2: 10-byte header, syncsafe size, optional 10-byte footer.
			const size =
				(((h[6] as number) << 21) | ((h[7] as number) << 14) | ((h[8] as number) << 7) | (h[9] as number)) >>> 0;
			this.#skipUntil = this.#position + 1 + size + ((h[5] as number) & 0x10 ? 10 : 0);
			this.#head = [];
			return;
		}
		const n = h.length;
		if (n < 4) return;
		const [b0, b1, b2, b3] = [h[n - 4], h[n - 3], h[n - 2], h[n - 1]] as number[];
		const isHeader =
			b0 === 0xff &&
			((b1 as number) & 0xe0) === 0xe0 &&
			((b1 as number) & 0x18) !== 0x08 && // MPEG version not reserved
			((b1 as number) & 0x06) !== 0 && // layer not reserved
			((b2 as number) & 0xf0) !== 0xf0 && // bitrate index not "bad"
			((b2 as number) & 0x0c) !== 0x0c; // sample rate not reserved
		if (isHeader) this.channels = (b3 as number) >> 6 === 3 ? 1 : 2;
	}
}
