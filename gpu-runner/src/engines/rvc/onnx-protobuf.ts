/**
 * Protobuf's wire format as the runner's ONNX readers walk it (`onnx-graph-rules.ts`, `onnx-speakers.ts`,
 * `int8-matmul.ts`): varints, field tags and wire types, length-delimited values. What a field number means is the
 * reader's; this module only finds where each field lies.
 *
 * Strict: a varint over 10 bytes, one or a field that runs past its message's end, a field number 0, a wire type
 * ONNX does not use (groups), or a number past 2^53 that would have to be read inexactly is an error
 * (`UnreadableProtobuf`), never a shorter or different walk. Int64 values are two's complement (a negative attribute
 * such as `axis = -1` is a 10-byte varint), read exactly when they lie within +-(2^53 - 1).
 *
 * The bytes are a `ByteSource`: an array in memory, or a file read through a window (`withFileSource`), so a walk
 * over the structure of a model of hundreds of MB reads its small fields, never its tensors' data.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LENGTH_DELIMITED = 2;
export const WIRE_FIXED32 = 5;

const MAX_VARINT_BYTES = 10;

export class UnreadableProtobuf extends Error {}

/** Positional reads from a model's bytes: in memory, or in a file. */
export interface ByteSource {
	readonly size: number;
	/** Up to `length` bytes from `at` (fewer at the end of the source). */
	read(at: number, length: number): Uint8Array;
	/** All of them, where they are in memory: varints are read in place, without a view for each. */
	readonly bytes?: Uint8Array;
}

export function bytesSource(bytes: Uint8Array): ByteSource {
	return { size: bytes.length, bytes, read: (at, length) => bytes.subarray(at, Math.min(at + length, bytes.length)) };
}

/** The bytes holding the varint at `at` (up to 10, not past `end`) and where in them it starts. */
function varintBytes(source: ByteSource, at: number, end: number): [Uint8Array, number, number] {
	const length = Math.min(MAX_VARINT_BYTES, end - at);
	return source.bytes === undefined ? [source.read(at, length), 0, length] : [source.bytes, at, length];
}

/** Bytes read from a file a window at a time: a model's structure is thousands of small fields, mostly side by side. */
const WINDOW_BYTES = 64 * 1024;

/** `use` given the file at `path` as a `ByteSource` read in place through a window, never whole. */
export function withFileSource<T>(path: string, use: (source: ByteSource) => T): T {
	const fd = openSync(path, "r");
	try {
		const size = fstatSync(fd).size;
		const window = new Uint8Array(WINDOW_BYTES);
		let windowAt = 0;
		let windowLength = 0;
		return use({
			size,
			read(at, length) {
				if (length > WINDOW_BYTES) {
					const out = new Uint8Array(Math.max(0, Math.min(length, size - at)));
					return out.subarray(0, readSync(fd, out, 0, out.length, at));
				}
				if (at < windowAt || at + length > windowAt + windowLength) {
					windowAt = at;
					windowLength = readSync(fd, window, 0, WINDOW_BYTES, at);
				}
				return window.slice(at - windowAt, Math.min(at - windowAt + length, windowLength));
			},
		});
	} finally {
		closeSync(fd);
	}
}

/**
 * The varint at `at` (which must end before `end`): its value and the offset after it. `signed`: read as a
 * two's-complement int64 (protobuf's int32, int64 and enum fields); else unsigned (tags, lengths).
 */
function decodeVarint(source: ByteSource, at: number, end: number, signed: boolean): [number, number] {
	const [bytes, base, length] = varintBytes(source, at, end);
	let value = 0;
	let scale = 1;
	for (let i = 0; i < length; i++) {
		const byte = bytes[base + i] as number;
		if (byte >= 0x80) {
			// Up to 7 bytes hold 49 bits: exact in a double. Longer ones are summed exactly below.
			value += (byte & 0x7f) * scale;
			scale *= 128;
			continue;
		}
		if (i < 7) return [value + byte * scale, at + i + 1];
		let big = 0n;
		for (let j = i; j >= 0; j--) big = (big << 7n) | BigInt((bytes[base + j] as number) & 0x7f);
		if (big >> 64n !== 0n) throw new UnreadableProtobuf("a protobuf varint holds more than 64 bits");
		const exact = signed ? BigInt.asIntN(64, big) : big;
		if (exact > BigInt(Number.MAX_SAFE_INTEGER) || exact < -BigInt(Number.MAX_SAFE_INTEGER)) {
			throw new UnreadableProtobuf("a protobuf number is past 2^53, beyond what this reader reads exactly");
		}
		return [Number(exact), at + i + 1];
	}
	if (length === MAX_VARINT_BYTES) throw new UnreadableProtobuf("a protobuf varint is longer than 10 bytes");
	throw new UnreadableProtobuf("a protobuf varint runs past the end of its message");
}

/** The offset after the varint at `at` (which must end before `end`), its value unread. */
function varintEnd(source: ByteSource, at: number, end: number): number {
	const [bytes, base, length] = varintBytes(source, at, end);
	for (let i = 0; i < length; i++) {
		if ((bytes[base + i] as number) < 0x80) return at + i + 1;
	}
	if (length === MAX_VARINT_BYTES) throw new UnreadableProtobuf("a protobuf varint is longer than 10 bytes");
	throw new UnreadableProtobuf("a protobuf varint runs past the end of its message");
}

/** The unsigned varint at `at`, ending before `end`: its value and the offset after it. */
export function readVarint(source: ByteSource, at: number, end: number = source.size): [number, number] {
	return decodeVarint(source, at, end, false);
}

export interface Field {
	field: number;
	wire: number;
	/**
	 * Where the value lies: a length-delimited value's bytes (after its length), a varint's own bytes, a fixed
	 * value's 4 or 8 bytes. `valueBytes` gives them, as they follow the tag (less a length prefix).
	 */
	start: number;
	end: number;
}

/** Each field of the message in [start, end) of `source`, in order, without reading their values. */
export function* fields(source: ByteSource, start = 0, end: number = source.size): Generator<Field> {
	let at = start;
	while (at < end) {
		const [tag, afterTag] = readVarint(source, at, end);
		const field = Math.floor(tag / 8);
		const wire = tag % 8;
		let valueStart = afterTag;
		let valueEnd: number;
		// A varint value is read when its reader asks (`int64Of`): an int64 past 2^53 nobody reads is no error.
		if (wire === WIRE_VARINT) valueEnd = varintEnd(source, afterTag, end);
		else if (wire === WIRE_LENGTH_DELIMITED) {
			const [length, afterLength] = readVarint(source, afterTag, end);
			valueStart = afterLength;
			valueEnd = afterLength + length;
		} else if (wire === WIRE_FIXED32) valueEnd = afterTag + 4;
		else if (wire === WIRE_FIXED64) valueEnd = afterTag + 8;
		else throw new UnreadableProtobuf(`protobuf wire type ${wire} (field ${field}) is not one ONNX uses`);
		if (field === 0) throw new UnreadableProtobuf("a protobuf field has the number 0, which no field has");
		if (valueEnd > end) throw new UnreadableProtobuf("a protobuf field runs past the end of its message");
		yield { field, wire, start: valueStart, end: valueEnd };
		at = valueEnd;
	}
}

/** The bytes of `f`'s value, as they follow its tag (a length-delimited value's without its length). */
export function valueBytes(source: ByteSource, f: Field): Uint8Array {
	return source.read(f.start, f.end - f.start);
}

/** A length-delimited field's value as UTF-8 text. */
export function textOf(source: ByteSource, f: Field): string {
	return new TextDecoder().decode(valueBytes(source, f));
}

/** A varint field's value as an int64 (negative values included); an error when `f` is not a varint. */
export function int64Of(source: ByteSource, f: Field): number {
	if (f.wire !== WIRE_VARINT) throw new UnreadableProtobuf(`protobuf field ${f.field} is not a varint`);
	return decodeVarint(source, f.start, f.end, true)[0];
}

/** The int64 values of a repeated field: one (a varint) or a packed run of them (length-delimited). */
export function int64sOf(source: ByteSource, f: Field): number[] {
	if (f.wire === WIRE_VARINT) return [int64Of(source, f)];
	if (f.wire !== WIRE_LENGTH_DELIMITED) throw new UnreadableProtobuf(`protobuf field ${f.field} holds no int64s`);
	const values: number[] = [];
	for (let at = f.start; at < f.end; ) {
		const [value, next] = decodeVarint(source, at, f.end, true);
		values.push(value);
		at = next;
	}
	return values;
}
