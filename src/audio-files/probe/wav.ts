/**
 * WAV (RIFF/WAVE, and RF64 for files whose sizes need 64 bits): walks the chunk headers to the `fmt ` and `data`
 * chunks without reading any audio. Duration is the data chunk size in whole sample frames over the sample rate.
 * Supported encodings: integer PCM (8/16/24/32-bit), IEEE float (32/64-bit), and both inside WAVE_FORMAT_EXTENSIBLE.
 */
import type { AudioFacts } from "./audio-facts.ts";
import { corrupted, truncated, unsupported, zeroDuration } from "./probe-failure.ts";
import { ascii, type ProbeReader, u16le, u32le, u64le } from "./probe-reader.ts";

const WAVE_FORMAT_PCM = 0x0001;
const WAVE_FORMAT_IEEE_FLOAT = 0x0003;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;
/** Bytes 2..15 of every KSDATAFORMAT_SUBTYPE_* GUID (`xxxxxxxx-0000-0010-8000-00aa00389b71`, little-endian fields). */
const KSDATAFORMAT_GUID_TAIL = [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71];
const OTHER_ENCODINGS: Record<number, string> = {
	2: "Microsoft ADPCM",
	6: "A-law",
	7: "µ-law",
	17: "IMA ADPCM",
	49: "GSM 6.10",
	80: "MPEG",
	85: "MPEG Layer III",
};
/** RIFF size fields of 0xFFFFFFFF mean "see ds64" in RF64, or "unknown" from a streaming writer. */
const SIZE_UNKNOWN = 0xffffffff;
const MAX_CHUNKS = 512;
/** A chunk id: four printable ASCII characters. */
const CHUNK_ID = /^[\x20-\x7e]{4}$/;

interface WavFormat {
	encoding: typeof WAVE_FORMAT_PCM | typeof WAVE_FORMAT_IEEE_FLOAT;
	channels: number;
	sampleRate: number;
	blockAlign: number;
	bitsPerSample: number;
	extensible: boolean;
}

function parseFmt(body: Uint8Array): WavFormat {
	if (body.byteLength < 16) throw corrupted(`The WAV fmt chunk is ${body.byteLength} bytes; at least 16 are required`);
	let encoding = u16le(body, 0);
	const channels = u16le(body, 2);
	const sampleRate = u32le(body, 4);
	const blockAlign = u16le(body, 12);
	const bitsPerSample = u16le(body, 14);
	const extensible = encoding === WAVE_FORMAT_EXTENSIBLE;
	if (extensible) {
		if (body.byteLength < 40 || u16le(body, 16) < 22) {
			throw corrupted("The WAV fmt chunk says WAVE_FORMAT_EXTENSIBLE but lacks its 22-byte extension");
		}
		const validBits = u16le(body, 18);
		if (validBits > bitsPerSample) {
			throw corrupted(`The WAV fmt chunk has ${validBits} valid bits in a ${bitsPerSample}-bit sample`);
		}
		if (KSDATAFORMAT_GUID_TAIL.some((byte, i) => body[26 + i] !== byte)) {
			throw unsupported("The WAV sub-format GUID is not a standard KSDATAFORMAT subtype");
		}
		encoding = u16le(body, 24);
	}
	if (encoding !== WAVE_FORMAT_PCM && encoding !== WAVE_FORMAT_IEEE_FLOAT) {
		const name = OTHER_ENCODINGS[encoding] ?? `format tag 0x${encoding.toString(16).padStart(4, "0")}`;
		throw unsupported(`WAV with ${name} encoding is not supported; use integer PCM or IEEE float`);
	}
	const allowedBits = encoding === WAVE_FORMAT_PCM ? [8, 16, 24, 32] : [32, 64];
	if (!allowedBits.includes(bitsPerSample)) {
		const kind = encoding === WAVE_FORMAT_PCM ? "PCM" : "IEEE float";
		throw unsupported(`${bitsPerSample}-bit ${kind} WAV is not supported (${allowedBits.join(", ")}-bit are)`);
	}
	if (channels === 0) throw corrupted("The WAV fmt chunk declares 0 channels");
	if (sampleRate === 0) throw corrupted("The WAV fmt chunk declares a sample rate of 0 Hz");
	if (blockAlign !== (channels * bitsPerSample) / 8) {
		throw corrupted(
			`The WAV fmt chunk's block align (${blockAlign}) does not match ${channels} channels of ${bitsPerSample}-bit samples`,
		);
	}
	return { encoding: encoding as WavFormat["encoding"], channels, sampleRate, blockAlign, bitsPerSample, extensible };
}

const describe = (f: WavFormat) =>
	`${f.encoding === WAVE_FORMAT_PCM ? "PCM" : "IEEE float"} ${f.bitsPerSample}-bit${f.extensible ? " (extensible)" : ""}`;

/** Whether the bytes from `offset` to the end of the file are whole chunks (a header each, the body inside the file). */
async function onlyChunksFrom(reader: ProbeReader, offset: number): Promise<boolean> {
	for (let chunk = 0; chunk < MAX_CHUNKS && offset + 8 <= reader.size; chunk++) {
		const header = await reader.exactly(offset, 8, "header of a WAV chunk");
		const size = u32le(header, 4);
		if (!CHUNK_ID.test(ascii(header, 0, 4)) || offset + 8 + size > reader.size) return false;
		offset += 8 + size + (size & 1);
	}
	return offset >= reader.size;
}

export async function probeWav(reader: ProbeReader): Promise<AudioFacts> {
	const riff = await reader.exactly(0, 12, "RIFF header");
	const isRf64 = ascii(riff, 0, 4) === "RF64";
	let format: WavFormat | undefined;
	let ds64DataSize: number | undefined;
	let offset = 12;
	for (let chunk = 0; chunk < MAX_CHUNKS && offset < reader.size; chunk++) {
		const header = await reader.exactly(offset, 8, "header of a WAV chunk");
		const id = ascii(header, 0, 4);
		let size = u32le(header, 4);
		const body = offset + 8;
		if (id === "ds64") {
			ds64DataSize = u64le(await reader.exactly(body, 16, "ds64 chunk"), 8);
		} else if (id === "fmt ") {
			format = parseFmt(await reader.exactly(body, Math.min(size, 40), "fmt chunk"));
		} else if (id === "data") {
			if (!format) throw corrupted("The WAV data chunk comes before any fmt chunk");
			const available = reader.size - body;
			if (size === SIZE_UNKNOWN) {
				if (isRf64 && ds64DataSize === undefined) throw corrupted("The RF64 file has no ds64 chunk with the data size");
				size = isRf64 ? (ds64DataSize as number) : available;
			} else if (size === 0 && !(await onlyChunksFrom(reader, body))) {
				// A recorder that stopped before writing its sizes: the samples run to the end of the file, as the
				// runner reads them. An empty data chunk followed by other chunks is still empty.
				size = available;
			}
			if (size > available) {
				throw truncated(`The WAV data chunk declares ${size} bytes of audio but the file holds only ${available}`);
			}
			const frames = Math.floor(size / format.blockAlign);
			if (frames === 0) throw zeroDuration("The WAV file contains no audio samples");
			return {
				format: "wav",
				sampleRate: format.sampleRate,
				channels: format.channels,
				durationSeconds: frames / format.sampleRate,
				codec: describe(format),
			};
		} else if (!CHUNK_ID.test(id)) {
			throw corrupted(`Unreadable WAV chunk id at byte ${offset}; the file is damaged`);
		}
		offset = body + size;
		// Chunks are word-aligned: an odd-sized chunk is followed by a zero pad byte. Some writers leave it out; the
		// byte there is then not zero but the first of the next chunk's id (the runner reads it the same way).
		if (size & 1 && offset < reader.size && (await reader.exactly(offset, 1, "pad byte"))[0] === 0) offset += 1;
	}
	throw truncated(format ? "The WAV file has no data chunk" : "The WAV file has no fmt chunk");
}
