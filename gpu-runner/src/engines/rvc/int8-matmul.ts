/**
 * Dynamic int8 quantisation of a model's matrix products with constant weights, done at load time on the ONNX
 * bytes (no Python tooling on the runner): every `MatMul(x, W)` whose `W` is a 2-D float32 initializer becomes
 * onnxruntime's `com.microsoft.DynamicQuantizeMatMul(x, W8, scale, zero_point)`. Weights are quantised per
 * output column, symmetric around a zero point of 128 in uint8; activations are quantised per call by the
 * runtime. uint8 x uint8 products, rather than u8 x s8, avoid the 16-bit saturation of AVX2's VPMADDUBSW.
 *
 * Used for ContentVec (94 M parameters, almost all in the transformer's matrix products), as an opt-in: it
 * changes the features slightly (the engine's README gives the measured error).
 */
import {
	type ByteSource,
	bytesSource,
	type Field,
	fields,
	int64Of,
	int64sOf,
	textOf,
	valueBytes,
	WIRE_LENGTH_DELIMITED,
	WIRE_VARINT,
} from "./onnx-protobuf.ts";
import { ProtoMessage } from "./onnx-writer.ts";

const FLOAT = 1;
const UINT8 = 2;

/** The fields of the message in [start, end) of `source` (strict: `onnx-protobuf.ts`). */
const readFields = (source: ByteSource, within?: Field): Field[] => [
	...fields(source, within?.start ?? 0, within?.end ?? source.size),
];

/** A float32 matrix initializer: its dims and values, or undefined when it is not one. */
function floatMatrix(
	source: ByteSource,
	initializer: Field,
): { name: string; rows: number; columns: number; values: Float32Array } | undefined {
	let name = "";
	let type = 0;
	const dims: number[] = [];
	let raw: Uint8Array | undefined;
	let packedFloats: Uint8Array | undefined;
	for (const f of readFields(source, initializer)) {
		if (f.field === 1 && (f.wire === WIRE_VARINT || f.wire === WIRE_LENGTH_DELIMITED))
			dims.push(...int64sOf(source, f));
		else if (f.field === 2) type = f.wire === WIRE_VARINT ? int64Of(source, f) : 0;
		else if (f.field === 8) name = textOf(source, f);
		else if (f.field === 9) raw = valueBytes(source, f);
		else if (f.field === 4 && f.wire === WIRE_LENGTH_DELIMITED) packedFloats = valueBytes(source, f);
		else if (f.field === 14 && f.wire === WIRE_VARINT && int64Of(source, f) === 1) return undefined; // external data
	}
	const data = raw ?? packedFloats;
	if (type !== FLOAT || dims.length !== 2 || data === undefined) return undefined;
	const [rows, columns] = dims as [number, number];
	if (data.length !== rows * columns * 4) return undefined;
	const values = new Float32Array(rows * columns);
	new Uint8Array(values.buffer).set(data);
	return { name, rows, columns, values };
}

function tensor(name: string, type: number, dims: number[], data: Uint8Array): ProtoMessage {
	return new ProtoMessage().packedVarints(1, dims).varint(2, type).string(8, name).bytes(9, data);
}

/** Per-column symmetric scales and the uint8 codes (zero point 128) of a row-major matrix. */
function quantizeColumns(
	rows: number,
	columns: number,
	values: Float32Array,
): { scales: Float32Array; quantized: Uint8Array } {
	const peak = new Float64Array(columns);
	for (let r = 0, at = 0; r < rows; r++) {
		for (let c = 0; c < columns; c++, at++) {
			const v = Math.abs(values[at] as number);
			if (v > (peak[c] as number)) peak[c] = v;
		}
	}
	const scales = new Float32Array(columns);
	const inverse = new Float64Array(columns);
	for (let c = 0; c < columns; c++) {
		const scale = (peak[c] as number) / 127 || 1;
		scales[c] = scale;
		inverse[c] = 1 / scale;
	}
	const quantized = new Uint8Array(rows * columns);
	for (let r = 0, at = 0; r < rows; r++) {
		for (let c = 0; c < columns; c++, at++) {
			// |w| x inverse <= 127 by construction, so the code stays in 1..255.
			quantized[at] = 128 + Math.round((values[at] as number) * (inverse[c] as number));
		}
	}
	return { scales, quantized };
}

export interface QuantizedModel {
	model: Uint8Array;
	/** Matrix products replaced, and the weights they hold. */
	matMuls: number;
	parameters: number;
}

/** Rewrites `model` (ONNX bytes); matrices smaller than `minimumSize` values stay float. */
export function quantizeMatMuls(model: Uint8Array, minimumSize = 4096): QuantizedModel {
	const source = bytesSource(model);
	const text = (f: Field): string => textOf(source, f);
	/** The bytes that follow a field's tag (its length prefix is added back by `ProtoMessage.raw`). */
	const encodedValue = (f: Field): Uint8Array => valueBytes(source, f);
	const modelFields = readFields(source);
	const graphField = modelFields.find((f) => f.field === 7);
	if (graphField === undefined) throw new Error("ONNX model has no graph");
	const graphFields = readFields(source, graphField);

	const matrices = new Map<string, Field>();
	for (const f of graphFields) {
		if (f.field !== 5) continue;
		const name = readFields(source, f).find((t) => t.field === 8);
		if (name !== undefined) matrices.set(text(name), f);
	}
	const uses = new Map<string, number>();
	const nodes = graphFields.filter((f) => f.field === 1).map((f) => readFields(source, f));
	for (const node of nodes) {
		for (const input of node.filter((f) => f.field === 1)) uses.set(text(input), (uses.get(text(input)) ?? 0) + 1);
	}

	const replaced = new Set<Field>();
	const added: ProtoMessage[] = [];
	const newNodes = new Map<Field[], ProtoMessage>();
	let parameters = 0;
	for (const node of nodes) {
		const op = node.find((f) => f.field === 4);
		const domain = node.find((f) => f.field === 7);
		const inputs = node.filter((f) => f.field === 1).map(text);
		if (op === undefined || text(op) !== "MatMul" || (domain !== undefined && domain.end > domain.start)) continue;
		const weightName = inputs[1] as string;
		const initializer = matrices.get(weightName);
		// A weight shared by several products stays float (RVC's exports share none).
		if (initializer === undefined || uses.get(weightName) !== 1) continue;
		const matrix = floatMatrix(source, initializer);
		if (matrix === undefined || matrix.rows * matrix.columns < minimumSize) continue;
		const { rows, columns, values } = matrix;
		const { scales, quantized } = quantizeColumns(rows, columns, values);
		const base = `${weightName}_int8`;
		added.push(tensor(`${base}_q`, UINT8, [rows, columns], quantized));
		added.push(tensor(`${base}_scale`, FLOAT, [columns], new Uint8Array(scales.buffer)));
		added.push(tensor(`${base}_zero`, UINT8, [columns], new Uint8Array(columns).fill(128)));
		replaced.add(initializer);
		const rewritten = new ProtoMessage();
		rewritten
			.string(1, inputs[0] as string)
			.string(1, `${base}_q`)
			.string(1, `${base}_scale`)
			.string(1, `${base}_zero`);
		for (const f of node) {
			if (f.field === 2 || f.field === 3 || f.field === 6) rewritten.raw(f.field, f.wire, encodedValue(f));
		}
		rewritten.string(4, "DynamicQuantizeMatMul").string(7, "com.microsoft");
		newNodes.set(node, rewritten);
		parameters += rows * columns;
	}

	const graph = new ProtoMessage();
	let nodeIndex = 0;
	for (const f of graphFields) {
		if (f.field === 1) {
			const node = nodes[nodeIndex++] as Field[];
			const rewritten = newNodes.get(node);
			if (rewritten !== undefined) graph.message(1, rewritten);
			else graph.raw(1, f.wire, encodedValue(f));
		} else if (!replaced.has(f)) graph.raw(f.field, f.wire, encodedValue(f));
	}
	for (const t of added) graph.message(5, t);

	const out = new ProtoMessage();
	for (const f of modelFields) if (f.field !== 7) out.raw(f.field, f.wire, encodedValue(f));
	out.message(7, graph);
	const hasContrib = modelFields.some(
		(f) => f.field === 8 && readFields(source, f).some((o) => o.field === 1 && text(o) === "com.microsoft"),
	);
	if (!hasContrib) out.message(8, new ProtoMessage().string(1, "com.microsoft").varint(2, 1));
	return { model: out.toBytes(), matMuls: newNodes.size, parameters };
}
