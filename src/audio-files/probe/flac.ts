/**
 * FLAC: the STREAMINFO block (always first) gives sample rate, channels and the total number of samples. A total of
 * 0 means "unknown" (allowed for streamed encodes); then the length is computed from the last frame, whose header
 * carries its frame (or sample) number: one tail read of at most `max_framesize` bytes, checked with both CRCs.
 */

import { crc8, crc16 } from "../../contracts/flac-crc.ts";
import type { AudioFacts } from "./audio-facts.ts";
import { corrupted, truncated, zeroDuration } from "./probe-failure.ts";
import { ascii, type ProbeReader, u16be, u24be, u32be } from "./probe-reader.ts";

const STREAMINFO = 0;
const MAX_METADATA_BLOCKS = 1024;
/** Tail searched for the last frame when STREAMINFO does not state the largest frame size. */
const DEFAULT_TAIL_BYTES = 1 << 20;

interface StreamInfo {
	minBlockSize: number;
	maxBlockSize: number;
	maxFrameSize: number;
	sampleRate: number;
	channels: number;
	bitsPerSample: number;
	totalSamples: number;
}

function parseStreamInfo(b: Uint8Array): StreamInfo {
	const info: StreamInfo = {
		minBlockSize: u16be(b, 0),
		maxBlockSize: u16be(b, 2),
		maxFrameSize: u24be(b, 7),
		sampleRate: ((b[10] as number) << 12) | ((b[11] as number) << 4) | ((b[12] as number) >> 4),
		channels: (((b[12] as number) >> 1) & 0x07) + 1,
		bitsPerSample: ((((b[12] as number) & 0x01) << 4) | ((b[13] as number) >> 4)) + 1,
		totalSamples: ((b[13] as number) & 0x0f) * 2 ** 32 + u32be(b, 14),
	};
	if (info.sampleRate === 0) throw corrupted("The FLAC STREAMINFO block declares a sample rate of 0 Hz");
	if (info.minBlockSize < 16 || info.maxBlockSize < info.minBlockSize) {
		throw corrupted(`The FLAC STREAMINFO block sizes (${info.minBlockSize}..${info.maxBlockSize}) are invalid`);
	}
	if (info.bitsPerSample < 4) throw corrupted(`The FLAC STREAMINFO block declares ${info.bitsPerSample}-bit samples`);
	return info;
}

/** Reads FLAC's UTF-8-like coded number (frame number: up to 6 bytes; sample number: up to 7). */
function codedNumber(b: Uint8Array, at: number): { value: number; length: number } | null {
	const first = b[at];
	if (first === undefined) return null;
	if (first < 0x80) return { value: first, length: 1 };
	let length = 0;
	for (let mask = 0x80; first & mask && mask > 0; mask >>= 1) length++;
	if (length < 2 || length > 7) return null;
	let value = first & (0xff >> (length + 1));
	for (let i = 1; i < length; i++) {
		const next = b[at + i];
		if (next === undefined || (next & 0xc0) !== 0x80) return null;
		value = value * 64 + (next & 0x3f);
	}
	return { value, length };
}

/** Samples in the frame whose header starts at `at`, and its position in the stream; null if it is not a valid header. */
function frameHeader(b: Uint8Array, at: number, info: StreamInfo): { firstSample: number; blockSize: number } | null {
	if (b[at] !== 0xff || ((b[at + 1] as number) & 0xfe) !== 0xf8) return null;
	const variable = ((b[at + 1] as number) & 0x01) === 1;
	const blockCode = (b[at + 2] as number) >> 4;
	const rateCode = (b[at + 2] as number) & 0x0f;
	const channelCode = (b[at + 3] as number) >> 4;
	const sizeCode = ((b[at + 3] as number) >> 1) & 0x07;
	if (blockCode === 0 || rateCode === 15 || channelCode > 10 || sizeCode === 3 || (b[at + 3] as number) & 0x01) {
		return null;
	}
	const number = codedNumber(b, at + 4);
	if (!number) return null;
	let end = at + 4 + number.length;
	let blockSize: number;
	if (blockCode === 1) blockSize = 192;
	else if (blockCode <= 5) blockSize = 576 << (blockCode - 2);
	else if (blockCode === 6) blockSize = (b[end++] ?? -1) + 1;
	else if (blockCode === 7) {
		blockSize = u16be(b, end) + 1;
		end += 2;
	} else blockSize = 256 << (blockCode - 8);
	if (rateCode === 12) end += 1;
	else if (rateCode === 13 || rateCode === 14) end += 2;
	if (end >= b.byteLength || crc8(b.subarray(at, end)) !== b[end]) return null;
	const firstSample = variable ? number.value : number.value * info.maxBlockSize;
	return { firstSample, blockSize };
}

/**
 * The stream length from its last frame. The tail is searched backwards for a frame header whose CRC-8 holds and
 * whose frame, running to the end of the stream, also passes CRC-16: so a byte pattern inside audio data that merely
 * looks like a header is never taken for the last frame.
 */
async function samplesFromLastFrame(reader: ProbeReader, audioStart: number, info: StreamInfo): Promise<number | null> {
	let end = reader.size;
	const maybeId3v1 = await reader.bytes(end - 128, 3);
	if (end - 128 > audioStart && ascii(maybeId3v1, 0, 3) === "TAG") end -= 128;
	const span = Math.min(end - audioStart, info.maxFrameSize > 0 ? info.maxFrameSize + 16 : DEFAULT_TAIL_BYTES);
	const tail = await reader.exactly(end - span, span, "last FLAC frame");
	const stored = u16be(tail, span - 2);
	for (let at = span - 2; at >= 0; at--) {
		if (tail[at] !== 0xff) continue;
		const header = frameHeader(tail, at, info);
		if (header && crc16(tail.subarray(at, span - 2)) === stored) return header.firstSample + header.blockSize;
	}
	return null;
}

export async function probeFlac(reader: ProbeReader, start: number): Promise<AudioFacts> {
	const blockHeader = await reader.exactly(start + 4, 4, "FLAC STREAMINFO header");
	const type = (blockHeader[0] as number) & 0x7f;
	const length = u24be(blockHeader, 1);
	if (type !== STREAMINFO || length < 34) throw corrupted("The FLAC stream does not begin with a STREAMINFO block");
	const info = parseStreamInfo(await reader.exactly(start + 8, 34, "FLAC STREAMINFO block"));

	// The audio frames begin after the last metadata block.
	let offset = start + 4;
	for (let block = 0; ; block++) {
		if (block >= MAX_METADATA_BLOCKS) throw corrupted("The FLAC file has too many metadata blocks");
		const header = await reader.exactly(offset, 4, "header of a FLAC metadata block");
		offset += 4 + u24be(header, 1);
		if ((header[0] as number) & 0x80) break;
	}
	if (offset >= reader.size) throw truncated("The FLAC file ends before its first audio frame");

	let totalSamples = info.totalSamples;
	if (totalSamples === 0) {
		const counted = await samplesFromLastFrame(reader, offset, info);
		if (counted === null) {
			throw corrupted("The FLAC stream does not state its length and its last frame could not be read");
		}
		totalSamples = counted;
	}
	if (totalSamples === 0) throw zeroDuration("The FLAC stream contains no samples");
	return {
		format: "flac",
		sampleRate: info.sampleRate,
		channels: info.channels,
		durationSeconds: totalSamples / info.sampleRate,
		codec: `FLAC ${info.bitsPerSample}-bit`,
	};
}
