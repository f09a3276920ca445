/**
 * A FLAC decoder in TypeScript for the streams the wasm decoder cannot read. Its libFLAC is fed single frames by
 * a parser in front of it (codec-parser), which takes the 32-bit sample size code that `flac` 1.4 writes for "reserved"
 * and drops every frame, and whose frames lose sync in libFLAC when their header leaves the sample rate to
 * STREAMINFO (code 0, which the format allows). This follows the format (RFC 9639) for every sample size, so the
 * tests check it against files of all widths; it is about six times slower than the wasm decoder, so the pipeline
 * uses it only where that one cannot go (`needsWideFlacDecoder`). Arithmetic is in doubles: a 33-bit side channel times 15-bit LPC
 * coefficients over 32 taps stays below 2^53, so every step is exact.
 */
import { crc8, crc16 } from "../../../src/contracts/flac-crc.ts";
import { corruptedSource } from "../job-errors.ts";
import type { AudioBlock } from "./pcm.ts";

interface StreamInfo {
	sampleRate: number;
	channels: number;
	bitsPerSample: number;
	maxFrameBytes: number;
}

/** Thrown by the bit reader when the frame runs past the bytes received so far. */
class NeedMoreBytes extends Error {}

class BitReader {
	readonly bytes: Uint8Array;
	/** Position in bits. */
	position: number;

	constructor(bytes: Uint8Array, position = 0) {
		this.bytes = bytes;
		this.position = position;
	}

	/** An unsigned value of `n` bits (n ≤ 40). */
	bits(n: number): number {
		let value = 0;
		let left = n;
		while (left > 0) {
			const byte = this.bytes[this.position >>> 3];
			if (byte === undefined) throw new NeedMoreBytes();
			const offset = this.position & 7;
			const take = Math.min(8 - offset, left);
			value = value * (1 << take) + ((byte >>> (8 - offset - take)) & ((1 << take) - 1));
			this.position += take;
			left -= take;
		}
		return value;
	}

	signed(n: number): number {
		const value = this.bits(n);
		return value >= 2 ** (n - 1) ? value - 2 ** n : value;
	}

	/** Zero bits before the next one bit (consumed). */
	unary(): number {
		let count = 0;
		for (;;) {
			const byte = this.bytes[this.position >>> 3];
			if (byte === undefined) throw new NeedMoreBytes();
			const offset = this.position & 7;
			const rest = (byte << offset) & 0xff;
			if (rest === 0) {
				count += 8 - offset;
				this.position += 8 - offset;
				continue;
			}
			const zeros = Math.clz32(rest) - 24;
			this.position += zeros + 1;
			return count + zeros;
		}
	}

	/** FLAC's UTF-8-like coded frame or sample number. */
	codedNumber(): number {
		const first = this.bits(8);
		if (first < 0x80) return first;
		let length = 0;
		for (let mask = 0x80; first & mask; mask >>= 1) length++;
		if (length < 2 || length > 7) throw corruptedSource("FLAC frame number is malformed");
		let value = first & (0xff >> (length + 1));
		for (let i = 1; i < length; i++) {
			const next = this.bits(8);
			if ((next & 0xc0) !== 0x80) throw corruptedSource("FLAC frame number is malformed");
			value = value * 64 + (next & 0x3f);
		}
		return value;
	}
}

const SAMPLE_SIZES = [0, 8, 12, -1, 16, 20, 24, 32];
const SAMPLE_RATES = [0, 88_200, 176_400, 192_000, 8_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000, 96_000];

function readStreamInfo(header: Uint8Array): StreamInfo {
	const r = new BitReader(header, 8 * 8);
	r.bits(16); // minimum block size
	r.bits(16); // maximum block size
	r.bits(24); // minimum frame size
	const maxFrameBytes = r.bits(24);
	const sampleRate = r.bits(20);
	const channels = r.bits(3) + 1;
	const bitsPerSample = r.bits(5) + 1;
	return { sampleRate, channels, bitsPerSample, maxFrameBytes };
}

/** Decodes one frame at `start`; returns its samples (planar, integer-valued) and where the next frame begins. */
function decodeFrame(bytes: Uint8Array, start: number, info: StreamInfo): { channels: Float64Array[]; end: number } {
	const r = new BitReader(bytes, start * 8);
	if (r.bits(15) !== 0x7ffc) throw corruptedSource(`FLAC frame sync not found at byte ${start}`);
	r.bits(1); // blocking strategy: the coded number is then a frame or a sample number; only its length matters here
	const blockCode = r.bits(4);
	const rateCode = r.bits(4);
	const assignment = r.bits(4);
	const sizeCode = r.bits(3);
	r.bits(1);
	r.codedNumber();
	let blockSize: number;
	if (blockCode === 0) throw corruptedSource("FLAC frame uses a reserved block size");
	else if (blockCode === 1) blockSize = 192;
	else if (blockCode <= 5) blockSize = 576 << (blockCode - 2);
	else if (blockCode === 6) blockSize = r.bits(8) + 1;
	else if (blockCode === 7) blockSize = r.bits(16) + 1;
	else blockSize = 256 << (blockCode - 8);
	if (rateCode === 12) r.bits(8);
	else if (rateCode === 13 || rateCode === 14) r.bits(16);
	else if (rateCode === 15) throw corruptedSource("FLAC frame has an invalid sample rate code");
	else if (rateCode !== 0 && SAMPLE_RATES[rateCode] !== info.sampleRate) {
		throw corruptedSource("the sample rate changes within the FLAC stream");
	}
	const headerEnd = r.position >>> 3;
	if (r.bits(8) !== crc8(bytes.subarray(start, headerEnd))) throw corruptedSource("FLAC frame header CRC mismatch");
	const bitsPerSample = sizeCode === 0 ? info.bitsPerSample : (SAMPLE_SIZES[sizeCode] as number);
	if (bitsPerSample < 0 || assignment > 10) throw corruptedSource("FLAC frame header uses a reserved code");
	const channelCount = assignment < 8 ? assignment + 1 : 2;
	if (channelCount !== info.channels) throw corruptedSource("the channel count changes within the FLAC stream");

	const channels: Float64Array[] = [];
	for (let c = 0; c < channelCount; c++) {
		// The side channel of a stereo pair needs one bit more than the samples.
		const side = (assignment === 8 && c === 1) || (assignment === 9 && c === 0) || (assignment === 10 && c === 1);
		channels.push(decodeSubframe(r, blockSize, bitsPerSample + (side ? 1 : 0)));
	}
	restoreStereo(channels, assignment);
	r.position = (r.position + 7) & ~7; // zero padding to the byte
	const crcAt = r.position >>> 3;
	if (r.bits(16) !== crc16(bytes.subarray(start, crcAt))) throw corruptedSource("FLAC frame CRC mismatch");
	return { channels, end: crcAt + 2 };
}

function decodeSubframe(r: BitReader, blockSize: number, bitsPerSample: number): Float64Array {
	if (r.bits(1) !== 0) throw corruptedSource("FLAC subframe padding bit is set");
	const type = r.bits(6);
	const wasted = r.bits(1) ? r.unary() + 1 : 0;
	const bits = bitsPerSample - wasted;
	const out = new Float64Array(blockSize);
	if (type === 0) {
		out.fill(r.signed(bits));
	} else if (type === 1) {
		for (let i = 0; i < blockSize; i++) out[i] = r.signed(bits);
	} else if (type >= 8 && type <= 12) {
		const order = type - 8;
		for (let i = 0; i < order; i++) out[i] = r.signed(bits);
		readResidual(r, out, order);
		restoreFixed(out, order);
	} else if (type >= 32) {
		const order = type - 31;
		for (let i = 0; i < order; i++) out[i] = r.signed(bits);
		const precision = r.bits(4) + 1;
		if (precision === 16) throw corruptedSource("FLAC LPC subframe has an invalid coefficient precision");
		const shift = r.signed(5);
		if (shift < 0) throw corruptedSource("FLAC LPC subframe has a negative shift");
		const coefficients = Array.from({ length: order }, () => r.signed(precision));
		readResidual(r, out, order);
		restoreLpc(out, coefficients, shift);
	} else {
		throw corruptedSource(`FLAC subframe type ${type} is reserved`);
	}
	if (wasted > 0) for (let i = 0; i < blockSize; i++) out[i] = (out[i] as number) * 2 ** wasted;
	return out;
}

/** Rice-coded residuals into `out[order..]`, in partitions that each carry their own parameter. */
function readResidual(r: BitReader, out: Float64Array, order: number): void {
	const method = r.bits(2);
	if (method > 1) throw corruptedSource("FLAC residual uses a reserved coding method");
	const parameterBits = method === 0 ? 4 : 5;
	const escapeCode = (1 << parameterBits) - 1;
	const partitionOrder = r.bits(4);
	const partitions = 1 << partitionOrder;
	const perPartition = out.length >> partitionOrder;
	if (perPartition << partitionOrder !== out.length || perPartition < order) {
		throw corruptedSource("FLAC residual partitions do not fit the block");
	}
	let i = order;
	for (let p = 0; p < partitions; p++) {
		const end = (p + 1) * perPartition;
		const parameter = r.bits(parameterBits);
		if (parameter === escapeCode) {
			const raw = r.bits(5);
			for (; i < end; i++) out[i] = raw === 0 ? 0 : r.signed(raw);
			continue;
		}
		for (; i < end; i++) {
			const folded = r.unary() * 2 ** parameter + r.bits(parameter);
			out[i] = folded % 2 === 0 ? folded / 2 : -(folded + 1) / 2;
		}
	}
}

function restoreFixed(s: Float64Array, order: number): void {
	for (let i = order; i < s.length; i++) {
		const a = s[i - 1] as number;
		const b = s[i - 2] as number;
		const c = s[i - 3] as number;
		const d = s[i - 4] as number;
		const prediction = [0, a, 2 * a - b, 3 * a - 3 * b + c, 4 * a - 6 * b + 4 * c - d][order] as number;
		s[i] = (s[i] as number) + prediction;
	}
}

function restoreLpc(s: Float64Array, coefficients: number[], shift: number): void {
	const scale = 2 ** shift;
	for (let i = coefficients.length; i < s.length; i++) {
		let sum = 0;
		for (let j = 0; j < coefficients.length; j++) sum += (coefficients[j] as number) * (s[i - 1 - j] as number);
		s[i] = (s[i] as number) + Math.floor(sum / scale);
	}
}

function restoreStereo(channels: Float64Array[], assignment: number): void {
	if (assignment < 8) return;
	const [a, b] = channels as [Float64Array, Float64Array];
	for (let i = 0; i < a.length; i++) {
		const x = a[i] as number;
		const y = b[i] as number;
		if (assignment === 8)
			b[i] = x - y; // left, side
		else if (assignment === 9)
			a[i] = x + y; // side, right
		else if (assignment === 10) {
			// mid, side: the mid channel lost its lowest bit, which the side channel's parity restores
			const mid = x * 2 + (((y % 2) + 2) % 2);
			a[i] = (mid + y) / 2;
			b[i] = (mid - y) / 2;
		}
	}
}

/**
 * Whether a FLAC stream, from its start, needs this decoder: 32-bit samples, or a first frame whose header takes
 * its sample rate or sample size from STREAMINFO. Undefined while `head` ends before the first frame header.
 */
export function needsWideFlacDecoder(head: Uint8Array): boolean | undefined {
	if (head.length < 42) return undefined;
	if (readStreamInfo(head).bitsPerSample > 24) return true;
	let offset = 4;
	for (let last = false; !last; ) {
		if (offset + 4 > head.length) return undefined;
		last = ((head[offset] as number) & 0x80) !== 0;
		offset +=
			4 + (((head[offset + 1] as number) << 16) | ((head[offset + 2] as number) << 8) | (head[offset + 3] as number));
	}
	if (offset + 4 > head.length) return undefined;
	const rateCode = (head[offset + 2] as number) & 0x0f;
	const sizeCode = ((head[offset + 3] as number) >> 1) & 0x07;
	return rateCode === 0 || sizeCode === 0 || sizeCode === 7;
}

/** Decode a FLAC byte stream (from its `fLaC` marker) into planar float blocks, one per frame. */
export async function* decodeWideFlac(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	let buffer = new Uint8Array(0);
	let offset = 0;
	let ended = false;
	const iterator = bytes[Symbol.asyncIterator]();
	const pull = async (): Promise<boolean> => {
		const next = await iterator.next();
		if (next.done) {
			ended = true;
			return false;
		}
		const joined = new Uint8Array(buffer.length - offset + next.value.length);
		joined.set(buffer.subarray(offset));
		joined.set(next.value, buffer.length - offset);
		buffer = joined;
		offset = 0;
		return true;
	};
	const fill = async (length: number) => {
		while (buffer.length - offset < length && (await pull()));
		return buffer.length - offset >= length;
	};

	if (!(await fill(42))) throw corruptedSource("the FLAC stream ends inside its STREAMINFO block");
	const info = readStreamInfo(buffer);
	const scale = 2 ** (info.bitsPerSample - 1);
	// Skip the metadata blocks: each starts with a last-block flag, its type and a 24-bit length.
	offset = 4;
	for (let last = false; !last; ) {
		if (!(await fill(4))) throw corruptedSource("the FLAC stream ends inside its metadata");
		last = ((buffer[offset] as number) & 0x80) !== 0;
		let skip =
			4 +
			(((buffer[offset + 1] as number) << 16) | ((buffer[offset + 2] as number) << 8) | (buffer[offset + 3] as number));
		while (skip > buffer.length - offset) {
			skip -= buffer.length - offset;
			offset = buffer.length;
			if (!(await pull())) throw corruptedSource("the FLAC stream ends inside its metadata");
		}
		offset += skip;
	}

	// A frame is decoded once its largest possible size is buffered (or the stream ended), so a frame split across
	// network chunks is retried at most once or twice, never byte by byte.
	const wanted = info.maxFrameBytes > 0 ? info.maxFrameBytes : 1 << 20;
	let frames = 0;
	for (;;) {
		await fill(wanted);
		if (buffer.length === offset) break;
		let decoded: { channels: Float64Array[]; end: number };
		try {
			decoded = decodeFrame(buffer, offset, info);
		} catch (error) {
			if (!(error instanceof NeedMoreBytes)) throw error;
			if (ended || !(await pull())) throw corruptedSource("the FLAC stream ends inside a frame");
			continue;
		}
		offset = decoded.end;
		frames++;
		yield {
			sampleRate: info.sampleRate,
			channels: decoded.channels.map((channel) => Float32Array.from(channel, (sample) => sample / scale)),
		};
	}
	if (frames === 0) throw corruptedSource("no FLAC frames could be decoded");
}
