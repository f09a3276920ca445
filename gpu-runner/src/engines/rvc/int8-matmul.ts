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
import { ProtoMessage } from "./onnx-writer.ts";

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_FIXED32 = 5;
const FLOAT = 1;
const UINT8 = 2;

interface Field {
	field: number;
	wire: number;
	/** The value's bytes (without tag and, for length-delimited fields, without the length). */
	bytes: Uint8Array;
	/** For varints. */
	number: number;
}

function readVarint(bytes: Uint8Array, offset: number): [number, number] {
	let value = 0;
	let scale = 1;
	let at = offset;
	for (;;) {
		const byte = bytes[at++];
		if (byte === undefined) throw new Error("truncated protobuf varint");
		value += (byte & 0x7f) * scale;
		if (byte < 0x80) return [value, at];
		scale *= 128;
	}
}

function readFields(bytes: Uint8Array): Field[] {
	const fields: Field[] = [];
	let at = 0;
	while (at < bytes.length) {
		const [tag, next] = readVarint(bytes, at);
		const field = Math.floor(tag / 8);
		const wire = tag % 8;
		let start = next;
		let end: number;
		let number = 0;
		if (wire === WIRE_VARINT) {
			[number, end] = readVarint(bytes, start);
		} else if (wire === WIRE_LENGTH_DELIMITED) {
			const [length, afterLength] = readVarint(bytes, start);
			start = afterLength;
			end = start + length;
		} else if (wire === WIRE_FIXED32) end = start + 4;
		else if (wire === WIRE_FIXED64) end = start + 8;
		else throw new Error(`unsupported protobuf wire type ${wire}`);
		if (end > bytes.length) throw new Error("truncated protobuf field");
		fields.push({ field, wire, bytes: bytes.subarray(start, end), number });
		at = end;
	}
	return fields;
}

const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

function copyFields(fields: readonly Field[], skip: (f: Field) => boolean = () => false): ProtoMessage {
	const message = new ProtoMessage();
	for (const f of fields) if (!skip(f)) message.raw(f.field, f.wire, encodedValue(f));
	return message;
}

/** The bytes that follow a field's tag (its length prefix is added back by `ProtoMessage.raw`). */
function encodedValue(f: Field): Uint8Array {
	if (f.wire !== WIRE_VARINT) return f.bytes;
	const out: number[] = [];
	let v = f.number;
	do {
		let byte = v % 128;
		v = Math.floor(v / 128);
		if (v > 0) byte |= 0x80;
		out.push(byte);
	} while (v > 0);
	return Uint8Array.from(out);
}

/** A float32 matrix initializer: its dims and values, or undefined when it is not one. */
function floatMatrix(
	fields: readonly Field[],
): { name: string; rows: number; columns: number; values: Float32Array } | undefined {
	let name = "";
	let type = 0;
	const dims: number[] = [];
	let raw: Uint8Array | undefined;
	let packedFloats: Uint8Array | undefined;
	for (const f of fields) {
		if (f.field === 1 && f.wire === WIRE_VARINT) dims.push(f.number);
		else if (f.field === 1 && f.wire === WIRE_LENGTH_DELIMITED) {
			for (let at = 0; at < f.bytes.length; ) {
				const [d, next] = readVarint(f.bytes, at);
				dims.push(d);
				at = next;
			}
		} else if (f.field === 2) type = f.number;
		else if (f.field === 8) name = text(f.bytes);
		else if (f.field === 9) raw = f.bytes;
		else if (f.field === 4 && f.wire === WIRE_LENGTH_DELIMITED) packedFloats = f.bytes;
		else if (f.field === 14 && f.number === 1) return undefined; // external data
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
	const modelFields = readFields(model);
	const graphField = modelFields.find((f) => f.field === 7);
	if (graphField === undefined) throw new Error("ONNX model has no graph");
	const graphFields = readFields(graphField.bytes);

	const matrices = new Map<string, Field>();
	for (const f of graphFields) {
		if (f.field !== 5) continue;
		const name = readFields(f.bytes).find((t) => t.field === 8);
		if (name !== undefined) matrices.set(text(name.bytes), f);
	}
	const uses = new Map<string, number>();
	const nodes = graphFields.filter((f) => f.field === 1).map((f) => readFields(f.bytes));
	for (const node of nodes) {
		for (const input of node.filter((f) => f.field === 1))
			uses.set(text(input.bytes), (uses.get(text(input.bytes)) ?? 0) + 1);
	}

	const replaced = new Set<Field>();
	const added: ProtoMessage[] = [];
	const newNodes = new Map<Field[], ProtoMessage>();
	let parameters = 0;
	for (const node of nodes) {
		const op = node.find((f) => f.field === 4);
		const domain = node.find((f) => f.field === 7);
		const inputs = node.filter((f) => f.field === 1).map((f) => text(f.bytes));
		if (op === undefined || text(op.bytes) !== "MatMul" || (domain !== undefined && domain.bytes.length > 0)) continue;
		const weightName = inputs[1] as string;
		const initializer = matrices.get(weightName);
		// A weight shared by several products stays float (RVC's exports share none).
		if (initializer === undefined || uses.get(weightName) !== 1) continue;
		const matrix = floatMatrix(readFields(initializer.bytes));
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
			else graph.raw(1, f.wire, f.bytes);
		} else if (!replaced.has(f)) graph.raw(f.field, f.wire, encodedValue(f));
	}
	for (const t of added) graph.message(5, t);

	const out = copyFields(modelFields, (f) => f.field === 7);
	out.message(7, graph);
	const hasContrib = modelFields.some(
		(f) => f.field === 8 && readFields(f.bytes).some((o) => o.field === 1 && text(o.bytes) === "com.microsoft"),
	);
	if (!hasContrib) out.message(8, new ProtoMessage().string(1, "com.microsoft").varint(2, 1));
	return { model: out.toBytes(), matMuls: newNodes.size, parameters };
}
