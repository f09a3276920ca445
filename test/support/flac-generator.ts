/**
 * A small FLAC encoder for tests: fixed block size, every subframe VERBATIM (or CONSTANT for digital silence), with
 * real frame headers, CRC-8 and CRC-16, so `flac -t` accepts its output. Compression is not the point; a correct
 * stream whose length we know is.
 */
import { crc8, crc16 } from "../../src/contracts/flac-crc.ts";
import { asciiBytes, concatBytes, sineChannels, toInt } from "./pcm.ts";

export interface FlacOptions {
	sampleRate: number;
	channels: number;
	bitsPerSample: 8 | 16 | 24;
	frames: number;
	blockSize?: number;
	/** Write 0 ("unknown") as the total sample count in STREAMINFO, as streaming encoders may. */
	unknownTotal?: boolean;
	/** Extra metadata (a PADDING block) to walk past before the first frame. */
	paddingBytes?: number;
	silent?: boolean;
}

class BitWriter {
	#bytes: number[] = [];
	#current = 0;
	#bits = 0;

	write(value: number, width: number): void {
		for (let i = width - 1; i >= 0; i--) {
			this.#current = (this.#current << 1) | (Math.floor(value / 2 ** i) & 1);
			if (++this.#bits === 8) {
				this.#bytes.push(this.#current);
				this.#current = 0;
				this.#bits = 0;
			}
		}
	}

	/** Two's complement of a signed value in `width` bits. */
	writeSigned(value: number, width: number): void {
		this.write(value < 0 ? value + 2 ** width : value, width);
	}

	bytes(): Uint8Array {
		if (this.#bits > 0) this.write(0, 8 - this.#bits);
		return Uint8Array.from(this.#bytes);
	}
}

/** FLAC's UTF-8-style coding of the frame number: n >= 2 bytes carry 5n + 1 bits. */
function codedNumber(value: number): number[] {
	if (value < 0x80) return [value];
	let n = 2;
	while (value >= 2 ** (5 * n + 1)) n++;
	const out: number[] = [];
	let rest = value;
	for (let i = 0; i < n - 1; i++) {
		out.unshift(0x80 | (rest & 0x3f));
		rest = Math.floor(rest / 64);
	}
	out.unshift(((0xff << (8 - n)) & 0xff) | rest);
	return out;
}

function frame(index: number, blockSize: number, channels: number[][], o: FlacOptions): Uint8Array {
	const header = [0xff, 0xf8, 0x70 /* block size: 16-bit field follows; rate: from STREAMINFO */];
	const sizeCode = { 8: 1, 16: 4, 24: 6 }[o.bitsPerSample];
	header.push(((o.channels - 1) << 4) | (sizeCode << 1));
	header.push(...codedNumber(index), (blockSize - 1) >> 8, (blockSize - 1) & 0xff);
	header.push(crc8(Uint8Array.from(header)));
	const body = new BitWriter();
	for (const samples of channels) {
		if (o.silent) {
			body.write(0x00, 8); // CONSTANT subframe
			body.writeSigned(0, o.bitsPerSample);
			continue;
		}
		body.write(0x02, 8); // VERBATIM subframe, no wasted bits
		for (const s of samples) body.writeSigned(s, o.bitsPerSample);
	}
	const bytes = concatBytes([Uint8Array.from(header), body.bytes()]);
	const crc = crc16(bytes);
	return concatBytes([bytes, Uint8Array.from([crc >> 8, crc & 0xff])]);
}

function metadataBlock(type: number, last: boolean, body: Uint8Array): Uint8Array {
	const n = body.byteLength;
	return concatBytes([Uint8Array.from([(last ? 0x80 : 0) | type, n >> 16, (n >> 8) & 0xff, n & 0xff]), body]);
}

export function makeFlac(o: FlacOptions): Uint8Array {
	const blockSize = o.blockSize ?? 4096;
	const tone = sineChannels(o.frames, o.sampleRate, o.channels).map((c) =>
		Array.from(c, (x) => toInt(x, o.bitsPerSample)),
	);
	const frames: Uint8Array[] = [];
	for (let start = 0, index = 0; start < o.frames; start += blockSize, index++) {
		const size = Math.min(blockSize, o.frames - start);
		frames.push(
			frame(
				index,
				size,
				tone.map((c) => c.slice(start, start + size)),
				o,
			),
		);
	}
	const info = new BitWriter();
	info.write(blockSize, 16);
	info.write(blockSize, 16);
	info.write(Math.min(...frames.map((f) => f.byteLength)), 24);
	info.write(Math.max(...frames.map((f) => f.byteLength)), 24);
	info.write(o.sampleRate, 20);
	info.write(o.channels - 1, 3);
	info.write(o.bitsPerSample - 1, 5);
	info.write(o.unknownTotal ? 0 : o.frames, 36);
	info.write(0, 64); // MD5 of the audio: zero means "not computed", which the format allows
	info.write(0, 64);
	const blocks = [metadataBlock(0, !o.paddingBytes, info.bytes())];
	if (o.paddingBytes) blocks.push(metadataBlock(1, true, new Uint8Array(o.paddingBytes)));
	return concatBytes([asciiBytes("fLaC"), ...blocks, ...frames]);
}
