/**
 * MP3 (MPEG-1, 2 and 2.5 Layer III). The first frame may carry a Xing/Info header (LAME, ffmpeg) or a VBRI header
 * (Fraunhofer) with the frame count; a LAME tag adds the encoder delay and padding, which are removed so the duration
 * is the audio that was encoded. Without such a header the stream is sampled: if frames at its start, middle and end
 * share one bitrate it is constant-bitrate and its length follows from its size (its last frames counted, so bytes
 * after them are not taken for audio: every frame's samples, the encoder's and decoder's delay and the padding
 * included, since no tag says how long they are and a decoder plays them; MPEG-1, 2 and 2.5 alike); otherwise every
 * frame header is
 * counted in large range reads (a file is under 100 MB, so at most a hundred 1 MB reads). Frames are counted too
 * where the stream goes on past the end its header states: files joined end to end (`cat`, tags between them
 * skipped), which a decoder plays to the end.
 */

import { appendedTagsStart } from "../../contracts/flac-stream-end.ts";
import {
	confirmedFrame,
	type MpegFrame,
	meanFrameLength,
	parseMpegFrame,
	sameStream,
} from "../../contracts/mpeg-frame.ts";
import { appendedDataStart } from "./appended-data.ts";
import type { AudioFacts } from "./audio-facts.ts";
import { id3v2TagLength } from "./id3v2.ts";
import { corrupted, truncated, unsupported, zeroDuration } from "./probe-failure.ts";
import { ascii, type ProbeReader, u32be } from "./probe-reader.ts";

/** How far past a tag or junk the first frame is looked for. */
const SYNC_SEARCH_BYTES = 64 * 1024;
const SCAN_CHUNK_BYTES = 1 << 20;
/** Frames read at the start, and windows sampled later, to decide that a stream without a header is CBR. */
const CBR_HEAD_FRAMES = 16;
const CBR_SAMPLE_POINTS = [0.25, 0.5, 0.75, 0.98];
/** Frames at a CBR stream's end that are counted rather than reckoned from its size. */
const CBR_TAIL_FRAMES = 64;
const MAX_FRAME_BYTES = 2881;
const ID3V1_BYTES = 128;

interface FrameAt {
	offset: number;
	frame: MpegFrame;
}

async function findFirstFrame(reader: ProbeReader, start: number, end: number): Promise<FrameAt> {
	// Nearly always the frame is right here: look in a small window first, the whole search span only if needed.
	for (const span of [4 * MAX_FRAME_BYTES, SYNC_SEARCH_BYTES]) {
		const found = await searchFrame(reader, start, end, span);
		if (found) return found;
	}
	throw start > 0
		? corrupted("No MPEG audio frame follows the ID3 tag")
		: unsupported("No MPEG audio frames were found in the file");
}

async function searchFrame(reader: ProbeReader, start: number, end: number, span: number): Promise<FrameAt | null> {
	const window = await reader.bytes(start, span);
	for (let at = 0; at + 4 <= window.byteLength; at++) {
		if (window[at] !== 0xff) continue;
		const frame = confirmedFrame(window, at, end - start);
		if (!frame) continue;
		if (frame.layer !== 3) {
			throw unsupported(`This is MPEG-${frame.version} Layer ${"I".repeat(frame.layer)} audio, not MP3 (Layer III)`);
		}
		return { offset: start + at, frame };
	}
	return null;
}

interface StreamHeader {
	kind: "Xing" | "Info" | "VBRI";
	frames: number;
	/** Stream size the encoder wrote, when the header has it. */
	bytes: number | undefined;
	/** Samples the encoder added at the start and at the end (LAME tag); 0 when unknown. */
	delay: number;
	padding: number;
	hasLameTag: boolean;
}

function readStreamHeader(first: FrameAt, bytes: Uint8Array): StreamHeader | null {
	const { frame } = first;
	const sideInfo = frame.version === "1" ? (frame.channels === 1 ? 17 : 32) : frame.channels === 1 ? 9 : 17;
	for (const at of frame.crcProtected ? [4 + sideInfo, 6 + sideInfo] : [4 + sideInfo]) {
		const id = ascii(bytes, at, 4);
		if (id !== "Xing" && id !== "Info") continue;
		const flags = u32be(bytes, at + 4);
		if (!(flags & 0x1)) return null;
		const frames = u32be(bytes, at + 8);
		const streamBytes = flags & 0x2 ? u32be(bytes, at + 12) : undefined;
		const lame = at + 8 + 4 + (flags & 0x2 ? 4 : 0) + (flags & 0x4 ? 100 : 0) + (flags & 0x8 ? 4 : 0);
		// LAME and ffmpeg (Lavc/Lavf) write the LAME tag layout: delay and padding, 12 bits each, 21 bytes in.
		if (/^(LAME|Lavf|Lavc|L3\.9)/.test(ascii(bytes, lame, 4)) && lame + 24 <= bytes.byteLength) {
			const d0 = bytes[lame + 21] as number;
			const d1 = bytes[lame + 22] as number;
			const d2 = bytes[lame + 23] as number;
			const delay = (d0 << 4) | (d1 >> 4);
			const padding = ((d1 & 0x0f) << 8) | d2;
			return { kind: id, frames, bytes: streamBytes, delay, padding, hasLameTag: true };
		}
		return { kind: id, frames, bytes: streamBytes, delay: 0, padding: 0, hasLameTag: false };
	}
	if (ascii(bytes, 36, 4) === "VBRI") {
		return { kind: "VBRI", frames: u32be(bytes, 50), bytes: u32be(bytes, 46), delay: 0, padding: 0, hasLameTag: false };
	}
	return null;
}

/**
 * Whether the file holds less than its header describes: fewer bytes than the stated stream size, or fewer than even
 * the smallest frames could fill. Then the header's frame count is not what a decoder will find.
 */
function cutShort(header: StreamHeader, first: FrameAt, end: number): boolean {
	const present = end - first.offset;
	if (header.bytes !== undefined && header.bytes > 0) return present < header.bytes;
	// The lowest bitrate of the stream's MPEG version gives the smallest frame its header can announce.
	const smallest = Math.floor(
		(meanFrameLength(first.frame) * (first.frame.version === "1" ? 32 : 8)) / first.frame.bitrateKbps,
	);
	return present < header.frames * smallest;
}

/**
 * Whether more of the same stream follows where the header says it ends: two MP3 files joined end to end (`cat`),
 * whose first header describes the first file only. A decoder plays both.
 */
async function continuesPastHeader(
	reader: ProbeReader,
	header: StreamHeader,
	first: FrameAt,
	end: number,
): Promise<boolean> {
	if (header.bytes === undefined || header.bytes <= first.frame.length) return false;
	const next = await afterTags(reader, first.offset + header.bytes, end);
	if (next + 4 > end) return false;
	const window = await reader.bytes(next, Math.min(4 * MAX_FRAME_BYTES, end - next));
	const frame = confirmedFrame(window, 0, end - next);
	return frame !== null && sameStream(frame, first.frame);
}

/** Resyncs near `offset` and returns the bitrate there, or null when no confirmed frame is found. */
async function bitrateNear(
	reader: ProbeReader,
	offset: number,
	end: number,
	stream: MpegFrame,
): Promise<number | null> {
	const window = await reader.bytes(offset, Math.min(4 * MAX_FRAME_BYTES, end - offset));
	for (let at = 0; at + 4 <= window.byteLength; at++) {
		if (window[at] !== 0xff) continue;
		const frame = confirmedFrame(window, at, end - offset);
		if (frame && sameStream(frame, stream)) return frame.bitrateKbps;
	}
	return null;
}

/** Walks frame headers from `offset` to `end`, reading 1 MB at a time. Stops at the first byte that is not a frame. */
async function countFrames(reader: ProbeReader, offset: number, end: number, stream: MpegFrame): Promise<number> {
	let frames = 0;
	let position = offset;
	while (position + 4 <= end) {
		const chunk = await reader.bytes(position, Math.min(SCAN_CHUNK_BYTES, end - position));
		let at = 0;
		for (;;) {
			if (at + 4 > chunk.byteLength) break;
			const frame = parseMpegFrame(chunk, at);
			if (!frame || !sameStream(frame, stream)) {
				// Tags between the frames (files joined end to end) are skipped, as a decoder skips them.
				const after = await afterTags(reader, position + at, end);
				if (after === position + at) return frames;
				at = after - position;
				break;
			}
			if (position + at + frame.length > end) return frames;
			frames++;
			at += frame.length;
		}
		if (at === 0) break;
		position += at;
	}
	return frames;
}

/** `position`, or the end of the ID3v1 and ID3v2 tags found there one after another (within `end`). */
async function afterTags(reader: ProbeReader, position: number, end: number): Promise<number> {
	for (;;) {
		if (position + 10 > end) return position;
		const head = await reader.bytes(position, 10);
		const id3v2 = id3v2TagLength(head);
		if (ascii(head, 0, 3) === "TAG" && position + ID3V1_BYTES <= end) position += ID3V1_BYTES;
		else if (id3v2 !== null && position + id3v2 <= end) position += id3v2;
		else return position;
	}
}

async function isConstantBitrate(reader: ProbeReader, first: FrameAt, end: number): Promise<boolean> {
	const head = await reader.bytes(first.offset, CBR_HEAD_FRAMES * (first.frame.length + 1) + 4);
	let at = 0;
	for (let i = 0; i < CBR_HEAD_FRAMES && first.offset + at < end && at + 4 <= head.byteLength; i++) {
		const frame = parseMpegFrame(head, at);
		if (!frame || !sameStream(frame, first.frame)) break;
		if (frame.bitrateKbps !== first.frame.bitrateKbps) return false;
		at += frame.length;
	}
	for (const point of CBR_SAMPLE_POINTS) {
		const offset = first.offset + Math.floor((end - first.offset) * point);
		if (offset + 4 * MAX_FRAME_BYTES > end) continue;
		if ((await bitrateNear(reader, offset, end, first.frame)) !== first.frame.bitrateKbps) return false;
	}
	return true;
}

/**
 * A CBR stream's frames: those before a point near its end by its size, then the rest counted one by one, so bytes
 * after the last frame that are not a tag (zero padding, junk a tool appended) are not taken for audio, as a decoder
 * skips them. Where no frame is found near the estimated end (more than that many bytes follow the audio), every
 * frame is counted.
 */
async function constantBitrateFrames(reader: ProbeReader, first: FrameAt, end: number): Promise<number> {
	const mean = meanFrameLength(first.frame);
	const before = Math.round((end - first.offset) / mean) - CBR_TAIL_FRAMES;
	const near =
		before > 0 ? await searchFrame(reader, first.offset + Math.round(before * mean), end, 4 * MAX_FRAME_BYTES) : null;
	if (!near) return countFrames(reader, first.offset, end, first.frame);
	return Math.round((near.offset - first.offset) / mean) + (await countFrames(reader, near.offset, end, first.frame));
}

/** A gapless decoder removes the synthesis filter bank's delay (528 + 1 samples) along with the encoder delay. */
const DECODER_DELAY_SAMPLES = 529;

export async function probeMp3(reader: ProbeReader, start: number): Promise<AudioFacts> {
	// Where the audio ends: before the tags a tagger appended, if any.
	const end = (await appendedDataStart(reader, start, appendedTagsStart)) ?? reader.size;
	if (start >= end) throw truncated("The file holds an ID3 tag but no audio");
	const first = await findFirstFrame(reader, start, end);
	const { frame } = first;
	const firstBytes = await reader.bytes(first.offset, frame.length);
	const header = readStreamHeader(first, firstBytes);
	let samples: number;
	let method: string;
	if (header && (await continuesPastHeader(reader, header, first, end))) {
		// Files joined end to end: a decoder plays every frame to the end, dropping the first header's encoder delay
		// at the start and its padding at the stream's end.
		const frames = await countFrames(reader, first.offset + frame.length, end, frame);
		const trim = header.hasLameTag ? header.delay + header.padding : 0;
		samples = frames * frame.samplesPerFrame - trim;
		method = `${header.kind}, more frames than it counts: frame scan`;
	} else if (header && !cutShort(header, first, end)) {
		samples = header.frames * frame.samplesPerFrame - header.delay - header.padding;
		method = header.kind;
	} else if (header) {
		// A cut file: a decoder stops at its last whole frame, so count those. The encoder delay is still removed at
		// the start; the padding is only removed if the cut left the stream's end in place.
		const frames = await countFrames(reader, first.offset + frame.length, end, frame);
		const startTrim = header.hasLameTag ? header.delay + DECODER_DELAY_SAMPLES : 0;
		samples = Math.min(
			header.frames * frame.samplesPerFrame - header.delay - header.padding,
			frames * frame.samplesPerFrame - startTrim,
		);
		method = `${header.kind}, cut short: frame scan`;
	} else if (await isConstantBitrate(reader, first, end)) {
		samples = (await constantBitrateFrames(reader, first, end)) * frame.samplesPerFrame;
		method = "CBR";
	} else {
		samples = (await countFrames(reader, first.offset, end, frame)) * frame.samplesPerFrame;
		method = "frame scan";
	}
	if (samples <= 0) throw zeroDuration("The MP3 stream contains no audio frames");
	return {
		format: "mp3",
		sampleRate: frame.sampleRate,
		channels: frame.channels,
		durationSeconds: samples / frame.sampleRate,
		codec: `MPEG-${frame.version} Layer III, ${method}`,
	};
}
