/**
 * The speaker count of an RVC synthesizer exported to ONNX. A `.pth` records it (rows of `emb_g.weight`); an export
 * holds the same embedding as an initializer, `[speakers, gin_channels]`, that a `Gather` looks up by the `ds` input
 * (RVC's name for the speaker id: `torch.onnx.export` of its `infer`, and this runner's own graph builder, both
 * write `Gather(emb_g.weight, ds)`). Past its rows onnxruntime fails the job with words about a Gather node, after
 * the first window's features; with the count known, a `speaker_id` past it is refused before a job runs, as for a
 * `.pth`.
 *
 * Only the graph's structure is read, never a tensor's values: fields are read where they lie in the file
 * (`ByteSource`), so a model of hundreds of MB is not held for it. The count is given only when it is certain: the
 * graph has a `ds` input, every `Gather` whose indices are `ds` looks up rows (axis 0) of one 2-D initializer, and
 * nothing about it is ambiguous (one graph, one initializer of that name). Otherwise undefined: nothing is refused
 * by it, and onnxruntime decides as before.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";

/** Positional reads from a model's bytes: in memory, or in a file. */
export interface ByteSource {
	readonly size: number;
	/** Up to `length` bytes from `at` (fewer at the end of the source). */
	read(at: number, length: number): Uint8Array;
}

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_FIXED32 = 5;
/** Names and op types are short; a longer one is not what this looks for. */
const MAX_NAME_BYTES = 4096;
/** The speaker id input of RVC's synthesizer exports. */
const SPEAKER_INPUT = "ds";

class NotCertain extends Error {}

interface FieldAt {
	field: number;
	wire: number;
	/** Varint value (wire 0); for length-delimited fields, the value's start and end. */
	value: number;
	start: number;
	end: number;
}

function varintAt(source: ByteSource, at: number): [number, number] {
	const bytes = source.read(at, 10);
	let value = 0;
	let scale = 1;
	for (let i = 0; i < bytes.length; i++) {
		const byte = bytes[i] as number;
		value += (byte & 0x7f) * scale;
		if (byte < 0x80) return [value, at + i + 1];
		scale *= 128;
	}
	throw new NotCertain("truncated or overlong varint");
}

/** The fields of the message in [start, end), one by one, without reading their values. */
function* fieldsIn(source: ByteSource, start: number, end: number): Generator<FieldAt> {
	let at = start;
	while (at < end) {
		const [tag, afterTag] = varintAt(source, at);
		const field = Math.floor(tag / 8);
		const wire = tag % 8;
		let value = 0;
		let valueStart = afterTag;
		let valueEnd: number;
		if (wire === WIRE_VARINT) [value, valueEnd] = varintAt(source, afterTag);
		else if (wire === WIRE_LENGTH_DELIMITED) {
			const [length, afterLength] = varintAt(source, afterTag);
			valueStart = afterLength;
			valueEnd = afterLength + length;
		} else if (wire === WIRE_FIXED32) valueEnd = afterTag + 4;
		else if (wire === WIRE_FIXED64) valueEnd = afterTag + 8;
		else throw new NotCertain(`protobuf wire type ${wire}`);
		if (valueEnd > end) throw new NotCertain("a field runs past its message");
		yield { field, wire, value, start: valueStart, end: valueEnd };
		at = valueEnd;
	}
}

function textOf(source: ByteSource, f: FieldAt): string {
	if (f.wire !== WIRE_LENGTH_DELIMITED || f.end - f.start > MAX_NAME_BYTES) throw new NotCertain("not a name");
	return new TextDecoder().decode(source.read(f.start, f.end - f.start));
}

interface Gather {
	data: string;
	indices: string;
	axis: number;
}

/** A node's op type, inputs and (for a Gather) axis; big attributes are skipped, never read. */
function readNode(source: ByteSource, start: number, end: number): Gather | undefined {
	let opType = "";
	let domain = "";
	const inputs: string[] = [];
	const attributes: FieldAt[] = [];
	for (const f of fieldsIn(source, start, end)) {
		if (f.field === 1) inputs.push(textOf(source, f));
		else if (f.field === 4) opType = textOf(source, f);
		else if (f.field === 7) domain = textOf(source, f);
		else if (f.field === 5 && f.wire === WIRE_LENGTH_DELIMITED) attributes.push(f);
	}
	if (opType !== "Gather" || (domain !== "" && domain !== "ai.onnx")) return undefined;
	let axis = 0;
	for (const attribute of attributes) {
		let name = "";
		let value: number | undefined;
		for (const f of fieldsIn(source, attribute.start, attribute.end)) {
			if (f.field === 1) name = textOf(source, f);
			else if (f.field === 3 && f.wire === WIRE_VARINT) value = f.value;
		}
		// A negative axis is a 10-byte varint, read here as a number far from 0: not a lookup of rows.
		if (name === "axis") axis = value ?? Number.NaN;
	}
	return { data: inputs[0] ?? "", indices: inputs[1] ?? "", axis };
}

/** An initializer's name and dims; its data (`raw_data`, external data) is skipped. */
function readInitializer(source: ByteSource, start: number, end: number): { name: string; dims: number[] } {
	let name = "";
	const dims: number[] = [];
	for (const f of fieldsIn(source, start, end)) {
		if (f.field === 8) name = textOf(source, f);
		else if (f.field === 1 && f.wire === WIRE_VARINT) dims.push(f.value);
		else if (f.field === 1 && f.wire === WIRE_LENGTH_DELIMITED) {
			for (let at = f.start; at < f.end; ) {
				const [dim, next] = varintAt(source, at);
				dims.push(dim);
				at = next;
			}
		}
	}
	return { name, dims };
}

function valueInfoName(source: ByteSource, start: number, end: number): string {
	for (const f of fieldsIn(source, start, end)) if (f.field === 1) return textOf(source, f);
	return "";
}

function speakersIn(source: ByteSource): number | undefined {
	const graphs = [...fieldsIn(source, 0, source.size)].filter((f) => f.field === 7);
	const graph = graphs[0];
	if (graphs.length !== 1 || graph === undefined || graph.wire !== WIRE_LENGTH_DELIMITED) return undefined;
	const inputs = new Set<string>();
	const lookups: Gather[] = [];
	const initializers = new Map<string, number[] | null>();
	for (const f of fieldsIn(source, graph.start, graph.end)) {
		if (f.wire !== WIRE_LENGTH_DELIMITED) continue;
		if (f.field === 11) inputs.add(valueInfoName(source, f.start, f.end));
		else if (f.field === 1) {
			const gather = readNode(source, f.start, f.end);
			if (gather !== undefined && gather.indices === SPEAKER_INPUT) lookups.push(gather);
		} else if (f.field === 5) {
			const { name, dims } = readInitializer(source, f.start, f.end);
			// Two initializers of one name: which one onnxruntime takes is not this reader's to guess.
			initializers.set(name, initializers.has(name) ? null : dims);
		}
	}
	if (!inputs.has(SPEAKER_INPUT) || lookups.length === 0) return undefined;
	const tables = new Set(lookups.map((lookup) => lookup.data));
	const [table] = tables;
	if (tables.size !== 1 || table === undefined || lookups.some((lookup) => lookup.axis !== 0)) return undefined;
	const dims = initializers.get(table);
	if (dims?.length !== 2) return undefined;
	const [speakers = 0, width = 0] = dims;
	return Number.isSafeInteger(speakers) && speakers >= 1 && width >= 1 ? speakers : undefined;
}

/** The speaker count of an RVC synthesizer export, when its graph says it with certainty; else undefined. */
export function onnxSpeakers(source: ByteSource): number | undefined {
	try {
		return speakersIn(source);
	} catch (error) {
		if (error instanceof NotCertain) return undefined;
		throw error;
	}
}

export function bytesSource(bytes: Uint8Array): ByteSource {
	return { size: bytes.length, read: (at, length) => bytes.subarray(at, Math.min(at + length, bytes.length)) };
}

/** Bytes read from the file a window at a time: the structure is thousands of small fields, mostly side by side. */
const WINDOW_BYTES = 64 * 1024;

/** `onnxSpeakers` of the ONNX file at `path`, read in place: the fields it needs, never the whole file. */
export function onnxFileSpeakers(path: string): number | undefined {
	const fd = openSync(path, "r");
	try {
		const size = fstatSync(fd).size;
		const window = new Uint8Array(WINDOW_BYTES);
		let windowAt = 0;
		let windowLength = 0;
		return onnxSpeakers({
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
