/**
 * FLAC: the STREAMINFO block (always first) gives sample rate, channels and the total number of samples. The last
 * frame, whose header carries its frame (or sample) number, must end where that total does: so a file cut short is
 * refused here, not when a conversion of it fails. A total of 0 means "unknown" (allowed for streamed encodes); then
 * the last frame gives the length. Two reads at the end: the last 4 KiB, for tags appended after the audio, then at
 * most `max_framesize` bytes before them.
 */

import {
	APPENDED_TAGS_MAX_BYTES,
	afterAudioStart,
	flacTailBytes,
	lastFlacFrame,
} from "../../contracts/flac-stream-end.ts";
import { appendedDataStart } from "./appended-data.ts";
import type { AudioFacts } from "./audio-facts.ts";
import { corrupted, truncated, zeroDuration } from "./probe-failure.ts";
import { type ProbeReader, u16be, u24be, u32be } from "./probe-reader.ts";

const STREAMINFO = 0;
const MAX_METADATA_BLOCKS = 1024;

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

/**
 * Samples up to the end of the stream's last frame, found in the file's tail (`lastFlacFrame`: the frame whose CRC-16
 * holds up to the tags appended after the audio, if any, or else before other bytes). Null when no frame checks
 * there: the file was cut inside its last frame, or more than the allowance follows the audio.
 */
async function samplesToLastFrame(reader: ProbeReader, audioStart: number, info: StreamInfo): Promise<number | null> {
	const after = await appendedDataStart(reader, audioStart, afterAudioStart);
	if (after === null) return null;
	const afterBytes = reader.size - after;
	// Bytes that are neither tags nor padding may follow the audio too: then the whole allowance is searched.
	let last = null;
	for (const after of [afterBytes, APPENDED_TAGS_MAX_BYTES]) {
		const span = Math.min(reader.size - audioStart, flacTailBytes(info.maxFrameSize, after));
		last = lastFlacFrame(await reader.exactly(reader.size - span, span, "last FLAC frame"));
		if (last || span === reader.size - audioStart) break;
	}
	if (!last) return null;
	const { number, variable, blockSize } = last.header;
	return (variable ? number : number * info.maxBlockSize) + blockSize;
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

	// The last frame: the length where STREAMINFO leaves it unknown, and otherwise the proof that none is missing.
	const framesEnd = await samplesToLastFrame(reader, offset, info);
	const seconds = (samples: number) => `${(samples / info.sampleRate).toFixed(3)} s`;
	if (framesEnd === null) {
		throw info.totalSamples === 0
			? corrupted("The FLAC stream does not state its length and its last frame could not be read")
			: truncated(
					`The FLAC file does not end with a whole audio frame: its last frame is cut short or damaged, or more than ${APPENDED_TAGS_MAX_BYTES >> 20} MiB follows its audio`,
				);
	}
	if (info.totalSamples !== 0 && framesEnd < info.totalSamples) {
		throw truncated(
			`The FLAC file was cut short: its frames end at ${seconds(framesEnd)} of the ${seconds(info.totalSamples)} its STREAMINFO states`,
		);
	}
	if (info.totalSamples !== 0 && framesEnd > info.totalSamples) {
		throw corrupted(
			`The FLAC frames run to ${seconds(framesEnd)}, past the ${seconds(info.totalSamples)} its STREAMINFO states`,
		);
	}
	const totalSamples = framesEnd;
	if (totalSamples === 0) throw zeroDuration("The FLAC stream contains no samples");
	return {
		format: "flac",
		sampleRate: info.sampleRate,
		channels: info.channels,
		durationSeconds: totalSamples / info.sampleRate,
		codec: `FLAC ${info.bitsPerSample}-bit`,
	};
}
