/** Builds WAV files in memory: integer PCM, IEEE float, WAVE_FORMAT_EXTENSIBLE, extra and odd-sized chunks, RF64. */
import { asciiBytes, concatBytes, sineChannels, toInt } from "./pcm.ts";

export interface WavOptions {
	sampleRate: number;
	channels: number;
	frames: number;
	encoding: "pcm" | "float";
	bits: 8 | 16 | 24 | 32 | 64;
	extensible?: boolean;
	/** Chunks written between `fmt ` and `data`, e.g. an odd-sized `LIST` that needs a pad byte. */
	extraChunks?: { id: string; body: Uint8Array }[];
	/** Write RF64 with a ds64 chunk (sizes in 64 bits, 32-bit fields set to 0xFFFFFFFF). */
	rf64?: boolean;
	/** Overrides the data chunk's size field (for truncation and streaming-writer cases). */
	dataSizeField?: number;
}

function chunk(id: string, body: Uint8Array): Uint8Array {
	const header = new Uint8Array(8);
	header.set(asciiBytes(id), 0);
	new DataView(header.buffer).setUint32(4, body.byteLength, true);
	return concatBytes(body.byteLength % 2 ? [header, body, new Uint8Array(1)] : [header, body]);
}

function fmtChunk(o: WavOptions): Uint8Array {
	const blockAlign = (o.channels * o.bits) / 8;
	const body = new Uint8Array(o.extensible ? 40 : 16);
	const v = new DataView(body.buffer);
	const code = o.encoding === "pcm" ? 1 : 3;
	v.setUint16(0, o.extensible ? 0xfffe : code, true);
	v.setUint16(2, o.channels, true);
	v.setUint32(4, o.sampleRate, true);
	v.setUint32(8, o.sampleRate * blockAlign, true);
	v.setUint16(12, blockAlign, true);
	v.setUint16(14, o.bits, true);
	if (o.extensible) {
		v.setUint16(16, 22, true);
		v.setUint16(18, o.bits, true);
		v.setUint32(20, o.channels === 2 ? 0x3 : 0x4, true);
		// KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT: {0000000X-0000-0010-8000-00AA00389B71}
		body.set([code, 0, 0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xaa, 0, 0x38, 0x9b, 0x71], 24);
	}
	return chunk("fmt ", body);
}

function samples(o: WavOptions): Uint8Array {
	const bytesPerSample = o.bits / 8;
	const out = new Uint8Array(o.frames * o.channels * bytesPerSample);
	const v = new DataView(out.buffer);
	const tone = sineChannels(o.frames, o.sampleRate, o.channels);
	let at = 0;
	for (let i = 0; i < o.frames; i++) {
		for (let c = 0; c < o.channels; c++) {
			const x = tone[c]?.[i] ?? 0;
			if (o.encoding === "float") {
				if (o.bits === 32) v.setFloat32(at, x, true);
				else v.setFloat64(at, x, true);
			} else if (o.bits === 8) v.setUint8(at, toInt(x, 8) + 128);
			else if (o.bits === 16) v.setInt16(at, toInt(x, 16), true);
			else if (o.bits === 24) {
				const s = toInt(x, 24);
				v.setUint8(at, s & 0xff);
				v.setUint8(at + 1, (s >> 8) & 0xff);
				v.setUint8(at + 2, (s >> 16) & 0xff);
			} else v.setInt32(at, toInt(x, 32), true);
			at += bytesPerSample;
		}
	}
	return out;
}

export function makeWav(o: WavOptions): Uint8Array {
	const data = samples(o);
	const dataChunk = chunk("data", data);
	if (o.dataSizeField !== undefined) new DataView(dataChunk.buffer).setUint32(4, o.dataSizeField, true);
	const parts: Uint8Array[] = [];
	if (o.rf64) {
		const ds64 = new Uint8Array(28);
		const v = new DataView(ds64.buffer);
		const riffSize = 4 + 36 + 8 + 24 + (o.extensible ? 48 : 24) + dataChunk.byteLength;
		v.setBigUint64(0, BigInt(riffSize), true);
		v.setBigUint64(8, BigInt(data.byteLength), true);
		v.setBigUint64(16, BigInt(o.frames), true);
		parts.push(chunk("ds64", ds64));
		new DataView(dataChunk.buffer).setUint32(4, 0xffffffff, true);
	}
	parts.push(fmtChunk(o), ...(o.extraChunks ?? []).map((c) => chunk(c.id, c.body)), dataChunk);
	const body = concatBytes(parts);
	const header = new Uint8Array(12);
	header.set(asciiBytes(o.rf64 ? "RF64" : "RIFF"), 0);
	new DataView(header.buffer).setUint32(4, o.rf64 ? 0xffffffff : 4 + body.byteLength, true);
	header.set(asciiBytes("WAVE"), 8);
	return concatBytes([header, body]);
}
