/**
 * Identifies a source file by its bytes (never by the type the client claimed) and reads its format, sample rate,
 * channels and duration. Pure apart from the `ByteSource` it reads, so every branch is unit-testable.
 * Expected refusals come back as a value with a stable code; an error thrown from here is an I/O failure to retry.
 */

import { parseMpegFrame } from "../../contracts/mpeg-frame.ts";
import { SOURCE_AUDIO_LIMITS } from "../../contracts/runner.ts";
import { MAX_AUDIO_FILE_BYTES } from "../limits.ts";
import type { AudioFacts } from "./audio-facts.ts";
import type { ByteSource } from "./byte-source.ts";
import { probeFlac } from "./flac.ts";
import { id3v2TagLength } from "./id3v2.ts";
import { probeMp3 } from "./mp3.ts";
import { ProbeFailure, type ProbeFailureCode, truncated, unsupported } from "./probe-failure.ts";
import { ascii, ProbeReader } from "./probe-reader.ts";
import { probeWav } from "./wav.ts";

export type ProbeResult = ({ ok: true } & AudioFacts) | { ok: false; code: ProbeFailureCode; message: string };

/** Range reads made while probing, for logs and for tests that check probing stays small. */
export interface ProbeStats {
	reads: number;
	bytesFetched: number;
}

const MAX_ID3_TAGS = 8;

/** Other formats people upload by mistake, by their leading bytes. */
const OTHER_FORMATS: { name: string; matches: (b: Uint8Array) => boolean }[] = [
	{ name: "Ogg (Vorbis/Opus)", matches: (b) => ascii(b, 0, 4) === "OggS" },
	{ name: "MP4/M4A (AAC)", matches: (b) => ascii(b, 4, 4) === "ftyp" },
	{ name: "AIFF", matches: (b) => ascii(b, 0, 4) === "FORM" && /^AIF[FC]$/.test(ascii(b, 8, 4)) },
	{ name: "WebM/Matroska", matches: (b) => b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3 },
	{ name: "AMR", matches: (b) => ascii(b, 0, 5) === "#!AMR" },
	{ name: "CAF", matches: (b) => ascii(b, 0, 4) === "caff" },
	{ name: "AAC (ADTS)", matches: (b) => b[0] === 0xff && ((b[1] ?? 0) & 0xf6) === 0xf0 },
	{ name: "WMA/ASF", matches: (b) => b[0] === 0x30 && b[1] === 0x26 && b[2] === 0xb2 && b[3] === 0x75 },
	{ name: "PDF", matches: (b) => ascii(b, 0, 5) === "%PDF-" },
	{ name: "ZIP", matches: (b) => ascii(b, 0, 4) === "PK\x03\x04" },
	{ name: "PNG", matches: (b) => b[0] === 0x89 && ascii(b, 1, 3) === "PNG" },
	{ name: "JPEG", matches: (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff },
];

function looksLikeText(b: Uint8Array): boolean {
	if (b.byteLength === 0) return false;
	try {
		// `stream: true` tolerates a multi-byte character cut at the end of the window; anything else invalid throws.
		const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(b, { stream: true });
		// Text has no control characters other than tab, line feed, form feed and carriage return.
		for (const char of text) {
			const code = char.charCodeAt(0);
			if ((code < 0x20 && code !== 0x09 && code !== 0x0a && code !== 0x0c && code !== 0x0d) || code === 0x7f)
				return false;
		}
		return true;
	} catch {
		return false;
	}
}

/** Skips any ID3v2 tags at `start` (a tag may be followed by another); returns where the audio begins. */
async function skipId3v2(reader: ProbeReader, start: number): Promise<number> {
	let offset = start;
	for (let i = 0; i < MAX_ID3_TAGS; i++) {
		const header = await reader.bytes(offset, 10);
		if (ascii(header, 0, 3) !== "ID3") return offset;
		if (header.byteLength < 10) throw truncated("The file ends inside its ID3 tag header");
		const length = id3v2TagLength(header);
		if (length === null) throw new ProbeFailure("corrupted", "The ID3 tag size is malformed");
		offset += length;
		if (offset > reader.size) throw truncated("The file ends inside its ID3 tag");
	}
	return offset;
}

async function identifyAndProbe(reader: ProbeReader): Promise<AudioFacts> {
	const head = await reader.bytes(0, 64);
	const magic = ascii(head, 0, 4);
	if (magic === "RIFF" || magic === "RF64") {
		if (head.byteLength < 12) throw truncated("The file ends inside its RIFF header");
		const form = ascii(head, 8, 4);
		if (form === "WAVE") return probeWav(reader);
		throw unsupported(`This is a RIFF file of type "${form}", not WAVE audio`);
	}
	if (magic === "fLaC") return probeFlac(reader, 0);
	if (ascii(head, 0, 3) === "ID3") {
		const start = await skipId3v2(reader, 0);
		const after = await reader.bytes(start, 4);
		if (ascii(after, 0, 4) === "fLaC") return probeFlac(reader, start);
		return probeMp3(reader, start);
	}
	const frame = parseMpegFrame(head, 0);
	if (frame) return probeMp3(reader, 0);
	const other = OTHER_FORMATS.find((f) => f.matches(head));
	if (other) throw unsupported(`This is ${other.name} data; upload WAV, MP3 or FLAC`);
	if (looksLikeText(await reader.bytes(0, 1024)))
		throw unsupported("This is plain text, not audio; upload WAV, MP3 or FLAC");
	// Some MP3 files start with a little junk before the first frame; the MP3 probe searches a bounded window for it.
	try {
		return await probeMp3(reader, 0);
	} catch (error) {
		if (error instanceof ProbeFailure) {
			throw unsupported("The file is not WAV, MP3 or FLAC audio (its bytes match none of them)");
		}
		throw error;
	}
}

/** Why a header's values cannot be converted (see `SOURCE_AUDIO_LIMITS`), or undefined when they can. */
function outsideLimits(facts: AudioFacts): string | undefined {
	const { minSampleRate, maxSampleRate, maxChannels } = SOURCE_AUDIO_LIMITS;
	const name = facts.format.toUpperCase();
	if (facts.sampleRate < minSampleRate || facts.sampleRate > maxSampleRate) {
		return `The ${name} header declares a sample rate of ${facts.sampleRate} Hz; rates from ${minSampleRate} to ${maxSampleRate} Hz are supported`;
	}
	if (facts.channels > maxChannels) {
		return `The ${name} header declares ${facts.channels} channels; at most ${maxChannels} are supported`;
	}
	return undefined;
}

export async function probeAudio(source: ByteSource, stats?: ProbeStats): Promise<ProbeResult> {
	if (source.size === 0) return { ok: false, code: "empty_file", message: "The file is empty (0 bytes)" };
	if (source.size >= MAX_AUDIO_FILE_BYTES) {
		return {
			ok: false,
			code: "too_large",
			message: `The file is ${source.size} bytes; source audio must be under 100 MB (${MAX_AUDIO_FILE_BYTES} bytes)`,
		};
	}
	const reader = new ProbeReader(source);
	try {
		const facts = await identifyAndProbe(reader);
		if (!Number.isFinite(facts.durationSeconds) || facts.durationSeconds <= 0) {
			return { ok: false, code: "zero_duration", message: "The audio has no duration" };
		}
		const refusal = outsideLimits(facts);
		if (refusal) return { ok: false, code: "unsupported_format", message: refusal };
		return { ok: true, ...facts };
	} catch (error) {
		if (error instanceof ProbeFailure) return { ok: false, code: error.code, message: error.message };
		throw error;
	} finally {
		if (stats) {
			stats.reads = reader.reads;
			stats.bytesFetched = reader.bytesFetched;
		}
	}
}
