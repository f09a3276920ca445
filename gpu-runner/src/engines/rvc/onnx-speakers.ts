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
import {
	type ByteSource,
	type Field,
	fields,
	int64Of,
	int64sOf,
	textOf as protobufText,
	UnreadableProtobuf,
	WIRE_LENGTH_DELIMITED,
	WIRE_VARINT,
	withFileSource,
} from "./onnx-protobuf.ts";

export { type ByteSource, bytesSource } from "./onnx-protobuf.ts";

/** Names and op types are short; a longer one is not what this looks for. */
const MAX_NAME_BYTES = 4096;
/** The speaker id input of RVC's synthesizer exports. */
const SPEAKER_INPUT = "ds";

class NotCertain extends Error {}

function textOf(source: ByteSource, f: Field): string {
	if (f.wire !== WIRE_LENGTH_DELIMITED || f.end - f.start > MAX_NAME_BYTES) throw new NotCertain("not a name");
	return protobufText(source, f);
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
	const attributes: Field[] = [];
	for (const f of fields(source, start, end)) {
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
		for (const f of fields(source, attribute.start, attribute.end)) {
			if (f.field === 1) name = textOf(source, f);
			else if (f.field === 3 && f.wire === WIRE_VARINT) value = int64Of(source, f);
		}
		// A negative axis counts from the last: not a lookup of rows (axis 0) as written.
		if (name === "axis") axis = value ?? Number.NaN;
	}
	return { data: inputs[0] ?? "", indices: inputs[1] ?? "", axis };
}

/** An initializer's name and dims; its data (`raw_data`, external data) is skipped. */
function readInitializer(source: ByteSource, start: number, end: number): { name: string; dims: number[] } {
	let name = "";
	const dims: number[] = [];
	for (const f of fields(source, start, end)) {
		if (f.field === 8) name = textOf(source, f);
		else if (f.field === 1 && (f.wire === WIRE_VARINT || f.wire === WIRE_LENGTH_DELIMITED)) {
			dims.push(...int64sOf(source, f));
		}
	}
	return { name, dims };
}

function valueInfoName(source: ByteSource, start: number, end: number): string {
	for (const f of fields(source, start, end)) if (f.field === 1) return textOf(source, f);
	return "";
}

function speakersIn(source: ByteSource): number | undefined {
	const graphs = [...fields(source, 0, source.size)].filter((f) => f.field === 7);
	const graph = graphs[0];
	if (graphs.length !== 1 || graph === undefined || graph.wire !== WIRE_LENGTH_DELIMITED) return undefined;
	const inputs = new Set<string>();
	const lookups: Gather[] = [];
	const initializers = new Map<string, number[] | null>();
	for (const f of fields(source, graph.start, graph.end)) {
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
		if (error instanceof NotCertain || error instanceof UnreadableProtobuf) return undefined;
		throw error;
	}
}

/** `onnxSpeakers` of the ONNX file at `path`, read in place: the fields it needs, never the whole file. */
export function onnxFileSpeakers(path: string): number | undefined {
	return withFileSource(path, onnxSpeakers);
}
