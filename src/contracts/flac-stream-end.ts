/**
 * Where a FLAC file's audio ends, and what its last frame holds. Files are not always FLAC to their last byte:
 * taggers append APE tags and ID3v1 (and, rarely, ID3v2 with a footer), some tools pad with zero bytes or leave
 * other bytes behind. libFLAC (the runner's wasm decoder) silently drops the last frame when anything but zeros
 * follows it, and a file cut short ends inside a frame. Shared by preprocessing (which refuses a file cut short and
 * states the length from the last frame when STREAMINFO leaves it unknown) and the runner's decoder (which stops at
 * the audio's end); the MP3 probe finds appended tags with `appendedTagsStart` too.
 */
import { crc8, crc16, crc16Step } from "./flac-crc.ts";

export interface FlacFrameHeader {
	/** The coded number: the frame's index (fixed block size) or its first sample (variable block size). */
	number: number;
	variable: boolean;
	blockSize: number;
}

export interface LastFlacFrame {
	/** Offsets in the bytes searched: the frame's sync code, and just past its CRC-16. */
	start: number;
	end: number;
	header: FlacFrameHeader;
}

/** Tail searched for the last frame when STREAMINFO does not state the largest frame size. */
const DEFAULT_FRAME_SPAN_BYTES = 1 << 20;
/** The most bytes looked past after the audio: tags (an APE tag may carry cover art), padding, other bytes. */
export const APPENDED_TAGS_MAX_BYTES = 1 << 20;

/**
 * How much of a file's end holds its last frame and the tags after it, by STREAMINFO's largest frame (0: unknown)
 * and what follows the audio (tags, zero padding) when known.
 */
export const flacTailBytes = (maxFrameSize: number, afterAudioBytes = APPENDED_TAGS_MAX_BYTES) =>
	(maxFrameSize > 0 ? maxFrameSize + 16 : DEFAULT_FRAME_SPAN_BYTES) + afterAudioBytes;

/**
 * Header candidates tried from the end before giving up: the last frame's is the first, or the one before it when
 * the last is cut; the third is for a byte pattern in audio data that passes a header's CRC-8 (rare).
 */
const HEADERS_TRIED = 3;

/** FLAC's UTF-8-like coded number (frame number: up to 6 bytes; sample number: up to 7). */
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

/** The frame header at `at` with its length, or null where the bytes are not one (its CRC-8 included). */
export function flacFrameHeaderAt(b: Uint8Array, at: number): (FlacFrameHeader & { bytes: number }) | null {
	if (b[at] !== 0xff || ((b[at + 1] ?? 0) & 0xfe) !== 0xf8) return null;
	const variable = ((b[at + 1] as number) & 0x01) === 1;
	const blockCode = (b[at + 2] ?? 0) >> 4;
	const rateCode = (b[at + 2] ?? 0) & 0x0f;
	const channelCode = (b[at + 3] ?? 0xff) >> 4;
	const sizeCode = ((b[at + 3] ?? 0) >> 1) & 0x07;
	if (blockCode === 0 || rateCode === 15 || channelCode > 10 || sizeCode === 3 || (b[at + 3] ?? 0) & 0x01) {
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
		blockSize = (((b[end] ?? 0) << 8) | (b[end + 1] ?? 0)) + 1;
		end += 2;
	} else blockSize = 256 << (blockCode - 8);
	if (rateCode === 12) end += 1;
	else if (rateCode === 13 || rateCode === 14) end += 2;
	if (end >= b.byteLength || crc8(b.subarray(at, end)) !== b[end]) return null;
	return { number: number.value, variable, blockSize, bytes: end + 1 - at };
}

const u32le = (b: Uint8Array, i: number) =>
	((b[i] ?? 0) | ((b[i + 1] ?? 0) << 8) | ((b[i + 2] ?? 0) << 16) | ((b[i + 3] ?? 0) << 24)) >>> 0;
const textAt = (b: Uint8Array, i: number, text: string) =>
	i >= 0 && [...text].every((char, k) => b[i + k] === char.charCodeAt(0));

/**
 * Where the tags appended after the audio begin, counted back from the end of `tail` (whose last byte is the file's):
 * ID3v1 (128 bytes, always last), an APE tag found by its footer, an ID3v2 tag found by its footer ("3DI"). Returns
 * `tail.byteLength` when there are none, and null when a tag reaches back past the start of `tail`.
 */
export function appendedTagsStart(tail: Uint8Array): number | null {
	let end = tail.byteLength;
	if (textAt(tail, end - 128, "TAG")) end -= 128;
	for (;;) {
		if (textAt(tail, end - 32, "APETAGEX")) {
			// The footer's size counts the items and the footer; bit 31 of its flags says a 32-byte header precedes.
			const size = u32le(tail, end - 32 + 12);
			const header = (tail[end - 32 + 23] ?? 0) & 0x80 ? 32 : 0;
			if (size < 32 || end - size - header < 0) return null;
			end -= size + header;
		} else if (textAt(tail, end - 10, "3DI")) {
			const s = end - 10 + 6;
			const size = ((tail[s] ?? 0) << 21) | ((tail[s + 1] ?? 0) << 14) | ((tail[s + 2] ?? 0) << 7) | (tail[s + 3] ?? 0);
			if (end - 20 - size < 0) return null;
			end -= 20 + size;
		} else return end;
	}
}

/**
 * Where what follows the audio begins, counted back from the end of `tail`: the appended tags, and zero bytes
 * before them. Null when that reaches the start of `tail` (more of the file is needed to tell).
 */
export function afterAudioStart(tail: Uint8Array): number | null {
	let start = appendedTagsStart(tail);
	while (start !== null && start > 0 && tail[start - 1] === 0) start--;
	return start === 0 ? null : start;
}

/**
 * The stream's last frame in `tail` (the end of a FLAC file, tags included). First the header nearest the end whose
 * frame, checked by its CRC-16, runs to the appended tags, or to zero bytes padding up to them. Failing that (other
 * bytes follow the audio), the header nearest the end whose frame checks at all, ending at the last point where its
 * CRC-16 holds, when no frame header follows: less certain, as bytes after it pass a CRC-16 by chance about once in
 * 64 KiB, so only as a fallback. Null when no frame checks so: the last frame is cut or damaged.
 */
export function lastFlacFrame(tail: Uint8Array): LastFlacFrame | null {
	const tagsStart = appendedTagsStart(tail);
	if (tagsStart !== null) {
		let zerosFrom = tagsStart;
		while (zerosFrom > 0 && tail[zerosFrom - 1] === 0) zerosFrom--;
		const found = searchBack(tail, tagsStart, (start, headerBytes) =>
			frameEnd(tail, start, headerBytes, zerosFrom, tagsStart),
		);
		if (found) return found;
	}
	// What follows must not be a frame: a frame after it is the last one, damaged or cut, not bytes after the audio.
	return searchBack(tail, tail.byteLength, (start, headerBytes) => {
		const end = lastCheckPoint(tail, start, headerBytes);
		return end !== null && flacFrameHeaderAt(tail, end) === null ? end : null;
	});
}

/** The first frame header back from `before` (of the first `HEADERS_TRIED`) whose frame `end` finds an end for. */
function searchBack(
	tail: Uint8Array,
	before: number,
	end: (start: number, headerBytes: number) => number | null,
): LastFlacFrame | null {
	let tried = 0;
	for (let start = before - 2; start >= 0 && tried < HEADERS_TRIED; start--) {
		if (tail[start] !== 0xff) continue;
		const header = flacFrameHeaderAt(tail, start);
		if (!header) continue;
		tried++;
		const frameEnd = end(start, header.bytes);
		if (frameEnd !== null) {
			const { number, variable, blockSize } = header;
			return { start, end: frameEnd, header: { number, variable, blockSize } };
		}
	}
	return null;
}

/**
 * Just past the CRC-16 of the frame at `start`, when it ends among the zero padding before `contentEnd` or at it: the
 * first point there where the running CRC-16 is 0. A frame followed by its own CRC-16 checks to 0 (FLAC's CRC-16 has
 * no reflection and no final XOR), and zeros after it keep it 0.
 */
function frameEnd(tail: Uint8Array, start: number, headerBytes: number, zerosFrom: number, contentEnd: number) {
	const from = Math.max(start + headerBytes + 3, zerosFrom);
	if (from > contentEnd) return null;
	let crc = crc16(tail.subarray(start, from));
	for (let end = from; ; end++) {
		if (crc === 0) return end;
		if (end === contentEnd) return null;
		crc = crc16Step(crc, tail[end] as number);
	}
}

/** The last point after the frame at `start` where the running CRC-16 is 0 (the frame and its CRC, and no more). */
function lastCheckPoint(tail: Uint8Array, start: number, headerBytes: number): number | null {
	const from = start + headerBytes + 3;
	if (from > tail.byteLength) return null;
	let crc = crc16(tail.subarray(start, from));
	let last: number | null = null;
	for (let end = from; ; end++) {
		if (crc === 0) last = end;
		if (end === tail.byteLength) return last;
		crc = crc16Step(crc, tail[end] as number);
	}
}
