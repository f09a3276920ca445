/**
 * Streaming WAV (RIFF/WAVE) decoder. Parses chunk by chunk as bytes arrive and yields planar float blocks,
 * so memory stays at one network chunk however long the file is. Supports PCM 8/16/24/32-bit, IEEE float
 * 32/64-bit, and WAVE_FORMAT_EXTENSIBLE wrapping either (the default of ffmpeg and sox for >16-bit or
 * multichannel files), which the old npm WAV decoders reject; RIFF and RF64 (sizes in a `ds64` chunk, which
 * broadcast recorders write at any length). What it accepts is what preprocessing accepts
 * (`src/audio-files/probe/wav.ts`; `test/node/wav-probe-and-decoder.test.ts` holds both to it).
 */
import { corruptedSource, unsupportedFormat } from "../job-errors.ts";
import { ByteQueue } from "./byte-queue.ts";
import type { AudioBlock } from "./pcm.ts";

const WAVE_FORMAT_PCM = 0x0001;
const WAVE_FORMAT_IEEE_FLOAT = 0x0003;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;
/** Writers that stream a WAV of unknown length leave the data size at 0 or all ones: read to the end. */
const UNKNOWN_SIZES = new Set([0, 0xffffffff]);
/** An RF64 file's 32-bit size fields hold this; the real sizes are in its `ds64` chunk. */
const SIZE_IN_DS64 = 0xffffffff;
/** A `ds64` chunk is 28 bytes and a table of 12-byte entries that writers leave empty; more is not a ds64. */
const DS64_MAX_BYTES = 64 * 1024;

export interface WavFormat {
	/** `pcm` or `float` after unwrapping WAVE_FORMAT_EXTENSIBLE. */
	encoding: "pcm" | "float";
	bitsPerSample: number;
	channels: number;
	sampleRate: number;
	blockAlign: number;
	/** WAVE_FORMAT_EXTENSIBLE's speaker mask; undefined in a plain fmt chunk, which states no speakers. */
	channelMask?: number;
}

export function parseFmtChunk(body: Uint8Array): WavFormat {
	if (body.length < 16) throw corruptedSource(`WAV fmt chunk is ${body.length} bytes, expected at least 16`);
	const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
	let formatTag = view.getUint16(0, true);
	const channels = view.getUint16(2, true);
	const sampleRate = view.getUint32(4, true);
	const blockAlign = view.getUint16(12, true);
	const bitsPerSample = view.getUint16(14, true);
	let channelMask: number | undefined;
	if (formatTag === WAVE_FORMAT_EXTENSIBLE) {
		// cbSize(2) validBits(2) channelMask(4) then the sub-format GUID whose first two bytes are the real tag.
		if (body.length < 40) throw corruptedSource("WAVE_FORMAT_EXTENSIBLE fmt chunk is shorter than 40 bytes");
		formatTag = view.getUint16(24, true);
		channelMask = view.getUint32(20, true);
	}
	if (channels === 0 || sampleRate === 0) throw corruptedSource("WAV header declares 0 channels or 0 Hz");
	let encoding: WavFormat["encoding"];
	if (formatTag === WAVE_FORMAT_PCM && [8, 16, 24, 32].includes(bitsPerSample)) encoding = "pcm";
	else if (formatTag === WAVE_FORMAT_IEEE_FLOAT && [32, 64].includes(bitsPerSample)) encoding = "float";
	else throw unsupportedFormat(`WAV format tag 0x${formatTag.toString(16)} with ${bitsPerSample}-bit samples`);
	if (blockAlign !== (bitsPerSample / 8) * channels) {
		throw corruptedSource(`WAV block align ${blockAlign} does not match ${channels} × ${bitsPerSample}-bit`);
	}
	return {
		encoding,
		bitsPerSample,
		channels,
		sampleRate,
		blockAlign,
		...(channelMask !== undefined ? { channelMask } : {}),
	};
}

/** Convert whole interleaved frames to planar floats in [-1, 1). */
export function samplesToPlanar(bytes: Uint8Array, format: WavFormat): Float32Array[] {
	const frames = Math.floor(bytes.length / format.blockAlign);
	const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
	const out = Array.from({ length: format.channels }, () => new Float32Array(frames));
	const bytesPerSample = format.bitsPerSample / 8;
	const read = sampleReader(format, view);
	for (let i = 0; i < frames; i++) {
		const frameOffset = i * format.blockAlign;
		for (let c = 0; c < format.channels; c++) {
			(out[c] as Float32Array)[i] = read(frameOffset + c * bytesPerSample);
		}
	}
	return out;
}

function sampleReader(format: WavFormat, view: DataView): (offset: number) => number {
	if (format.encoding === "float") {
		return format.bitsPerSample === 32 ? (o) => view.getFloat32(o, true) : (o) => view.getFloat64(o, true);
	}
	switch (format.bitsPerSample) {
		case 8:
			return (o) => (view.getUint8(o) - 128) / 128; // 8-bit WAV is unsigned
		case 16:
			return (o) => view.getInt16(o, true) / 32768;
		case 24:
			return (o) => (view.getUint8(o) | (view.getUint8(o + 1) << 8) | (view.getInt8(o + 2) << 16)) / 8388608;
		default:
			return (o) => view.getInt32(o, true) / 2147483648;
	}
}

type State =
	| { kind: "riff-header" }
	| { kind: "chunk-header" }
	| { kind: "skip"; remaining: number; padded: boolean }
	| { kind: "pad" }
	| { kind: "fmt"; size: number }
	| { kind: "ds64"; size: number }
	| { kind: "data"; remaining: number; untilEnd: boolean };

/** Decode a WAV byte stream into blocks of at most one network chunk's worth of frames. */
export async function* decodeWav(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	const queue = new ByteQueue();
	let state = { kind: "riff-header" } as State;
	let format: WavFormat | undefined;
	let rf64 = false;
	let ds64DataSize: number | undefined;
	let framesDecoded = 0;

	for await (const chunk of bytes) {
		queue.push(chunk);
		for (;;) {
			if (state.kind === "riff-header") {
				if (queue.length < 12) break;
				const header = queue.read(12);
				const riff = ascii(header, 0, 4);
				rf64 = riff === "RF64";
				if ((riff !== "RIFF" && !rf64) || ascii(header, 8, 4) !== "WAVE") throw corruptedSource("not a RIFF/WAVE file");
				state = { kind: "chunk-header" };
			} else if (state.kind === "chunk-header") {
				if (queue.length < 8) break;
				const header = queue.read(8);
				const id = ascii(header, 0, 4);
				const size = new DataView(header.buffer).getUint32(4, true);
				if (id === "fmt ") state = { kind: "fmt", size };
				else if (id === "ds64" && rf64) {
					if (size < 16 || size > DS64_MAX_BYTES) throw corruptedSource(`RF64 ds64 chunk of ${size} bytes`);
					state = { kind: "ds64", size };
				} else if (id === "data") {
					if (!format) throw corruptedSource("WAV data chunk comes before the fmt chunk");
					if (rf64 && size === SIZE_IN_DS64) {
						if (ds64DataSize === undefined) throw corruptedSource("RF64 file has no ds64 chunk with the data size");
						state = { kind: "data", remaining: ds64DataSize, untilEnd: false };
					} else state = { kind: "data", remaining: size, untilEnd: UNKNOWN_SIZES.has(size) };
				} else state = { kind: "skip", remaining: size, padded: size % 2 === 1 };
			} else if (state.kind === "skip") {
				state.remaining -= queue.skip(state.remaining);
				if (state.remaining > 0) break;
				state = state.padded ? { kind: "pad" } : { kind: "chunk-header" };
			} else if (state.kind === "pad") {
				// Chunks are word aligned: an odd-sized one is followed by a zero pad byte. Some writers leave it
				// out; then the byte there is not zero but the first of the next chunk's id.
				if (queue.length < 1) break;
				if (queue.peek() === 0) queue.skip(1);
				state = { kind: "chunk-header" };
			} else if (state.kind === "fmt" || state.kind === "ds64") {
				if (queue.length < state.size) break;
				const body = queue.read(state.size);
				if (state.kind === "fmt") format = parseFmtChunk(body);
				else ds64DataSize = Number(new DataView(body.buffer).getBigUint64(8, true));
				state = state.size % 2 === 1 ? { kind: "pad" } : { kind: "chunk-header" };
			} else {
				const wavFormat = format as WavFormat;
				const available = state.untilEnd ? queue.length : Math.min(queue.length, state.remaining);
				const frames = Math.floor(available / wavFormat.blockAlign);
				if (frames === 0) {
					if (!state.untilEnd && state.remaining < wavFormat.blockAlign) {
						// Data done (a stray partial frame is dropped); later chunks (LIST, id3) are not audio.
						queue.skip(state.remaining);
						state = { kind: "skip", remaining: Number.POSITIVE_INFINITY, padded: false };
						continue;
					}
					break;
				}
				const data = queue.read(frames * wavFormat.blockAlign);
				if (!state.untilEnd) state.remaining -= data.length;
				const channels = samplesToPlanar(data, wavFormat);
				if (wavFormat.encoding === "float") refuseNonFinite(channels, framesDecoded, wavFormat.sampleRate);
				framesDecoded += frames;
				yield {
					sampleRate: wavFormat.sampleRate,
					channels,
					...(wavFormat.channelMask !== undefined ? { channelMask: wavFormat.channelMask } : {}),
				};
			}
		}
	}

	if (!format) throw corruptedSource("WAV file ended before its fmt chunk");
	if (state.kind === "data" && !state.untilEnd && state.remaining >= format.blockAlign) {
		throw corruptedSource(`WAV data chunk is truncated: ${state.remaining} bytes missing`);
	}
	if (state.kind !== "data" && state.kind !== "skip") throw corruptedSource("WAV file has no data chunk");
	if (framesDecoded === 0) throw corruptedSource("WAV file contains no audio frames");
}

/**
 * NaN and ±Inf are not sound: a float WAV holding them was damaged or written by a faulty tool. Any value put in
 * their place would be a guess the client never sees, and once inside the filters they spread over the whole
 * output; so the file is refused as corrupted, saying where the first one is.
 */
function refuseNonFinite(channels: Float32Array[], firstFrame: number, sampleRate: number): void {
	channels.forEach((channel, c) => {
		for (let i = 0; i < channel.length; i++) {
			const value = channel[i] as number;
			if (Number.isFinite(value)) continue;
			const frame = firstFrame + i;
			const what = Number.isNaN(value) ? "a NaN" : `an infinite (${value > 0 ? "+" : "-"}Inf)`;
			throw corruptedSource(
				`the float WAV has ${what} sample at ${(frame / sampleRate).toFixed(3)} s (frame ${frame}, channel ${c + 1}); samples must be finite numbers`,
			);
		}
	});
}

function ascii(bytes: Uint8Array, start: number, length: number): string {
	return String.fromCharCode(...bytes.subarray(start, start + length));
}
