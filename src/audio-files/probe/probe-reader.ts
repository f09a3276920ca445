import type { ByteSource } from "./byte-source.ts";
import { truncated } from "./probe-failure.ts";

/**
 * Reads through a small window so that parsing many little fields (chunk headers, frame headers) costs one range
 * read per region of the file, not one per field. Counts what it fetched, so tests can check how little was read.
 */
export class ProbeReader {
	readonly source: ByteSource;
	readonly windowBytes: number;
	#window: { offset: number; bytes: Uint8Array } | undefined;
	/** Range reads sent to the source, and bytes they returned. */
	reads = 0;
	bytesFetched = 0;

	constructor(source: ByteSource, windowBytes = 4096) {
		this.source = source;
		this.windowBytes = windowBytes;
	}

	get size(): number {
		return this.source.size;
	}

	/** Up to `length` bytes at `offset` (fewer at the end of the file). */
	async bytes(offset: number, length: number): Promise<Uint8Array> {
		const end = Math.min(this.size, offset + length);
		if (offset >= end) return new Uint8Array(0);
		const window = this.#window;
		if (window && offset >= window.offset && end <= window.offset + window.bytes.byteLength) {
			return window.bytes.subarray(offset - window.offset, end - window.offset);
		}
		const fetched = await this.source.read(
			offset,
			Math.max(end - offset, Math.min(this.windowBytes, this.size - offset)),
		);
		this.reads++;
		this.bytesFetched += fetched.byteLength;
		this.#window = { offset, bytes: fetched };
		return fetched.subarray(0, end - offset);
	}

	/** Exactly `length` bytes at `offset`, or a `truncated` failure naming `what` was cut short. */
	async exactly(offset: number, length: number, what: string): Promise<Uint8Array> {
		const bytes = await this.bytes(offset, length);
		if (bytes.byteLength < length)
			throw truncated(`The file ends inside the ${what} (at byte ${offset + bytes.byteLength})`);
		return bytes;
	}
}

export const ascii = (bytes: Uint8Array, start: number, length: number) =>
	String.fromCharCode(...bytes.subarray(start, start + length));
export const u16le = (b: Uint8Array, i: number) => (b[i] ?? 0) | ((b[i + 1] ?? 0) << 8);
export const u32le = (b: Uint8Array, i: number) => (u16le(b, i) | (u16le(b, i + 2) << 16)) >>> 0;
export const u64le = (b: Uint8Array, i: number) => u32le(b, i) + u32le(b, i + 4) * 2 ** 32;
export const u16be = (b: Uint8Array, i: number) => ((b[i] ?? 0) << 8) | (b[i + 1] ?? 0);
export const u24be = (b: Uint8Array, i: number) => ((b[i] ?? 0) << 16) | u16be(b, i + 1);
export const u32be = (b: Uint8Array, i: number) => (u16be(b, i) * 0x10000 + u16be(b, i + 2)) >>> 0;
