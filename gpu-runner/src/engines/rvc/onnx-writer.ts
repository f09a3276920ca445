/**
 * A small, dependency-free ONNX model writer: protobuf wire format emitted by hand with the field numbers of
 * `onnx.proto` (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto). It covers what
 * this engine needs: the execution-provider self-test model here, and the tiny and full-size RVC stand-in
 * models that the tests and the benchmark build at run time. It is not a general ONNX library: no sub-graphs,
 * no sparse tensors, no external data (so models stay under protobuf's 2 GiB limit).
 */

export type OnnxElementType = "float32" | "int64" | "int32" | "bool";

/** TensorProto.DataType values. */
const DATA_TYPE: Record<OnnxElementType, number> = {
	float32: 1,
	int32: 6,
	int64: 7,
	bool: 9,
};

/** AttributeProto.AttributeType values. */
const ATTRIBUTE_TYPE = {
	float: 1,
	int: 2,
	string: 3,
	tensor: 4,
	floats: 6,
	ints: 7,
} as const;

const WIRE_VARINT = 0;
const WIRE_FIXED32 = 5;
const WIRE_LENGTH_DELIMITED = 2;

/** Protobuf message under construction: a list of byte parts, so large weight buffers are never copied twice. */
export class ProtoMessage {
	readonly parts: Uint8Array[] = [];
	length = 0;

	#push(bytes: Uint8Array): void {
		this.parts.push(bytes);
		this.length += bytes.length;
	}

	#tag(field: number, wireType: number): void {
		this.#push(encodeVarint(BigInt(field * 8 + wireType)));
	}

	varint(field: number, value: number | bigint): this {
		this.#tag(field, WIRE_VARINT);
		this.#push(encodeVarint(BigInt.asUintN(64, BigInt(value))));
		return this;
	}

	float(field: number, value: number): this {
		this.#tag(field, WIRE_FIXED32);
		const bytes = new Uint8Array(4);
		new DataView(bytes.buffer).setFloat32(0, value, true);
		this.#push(bytes);
		return this;
	}

	bytes(field: number, value: Uint8Array): this {
		this.#tag(field, WIRE_LENGTH_DELIMITED);
		this.#push(encodeVarint(BigInt(value.length)));
		this.#push(value);
		return this;
	}

	string(field: number, value: string): this {
		return this.bytes(field, new TextEncoder().encode(value));
	}

	/** A field copied as it was read: `encoded` is the field's whole value, e.g. a sub-message's bytes. */
	raw(field: number, wireType: number, encoded: Uint8Array): this {
		this.#tag(field, wireType);
		if (wireType === WIRE_LENGTH_DELIMITED) this.#push(encodeVarint(BigInt(encoded.length)));
		this.#push(encoded);
		return this;
	}

	message(field: number, value: ProtoMessage): this {
		this.#tag(field, WIRE_LENGTH_DELIMITED);
		this.#push(encodeVarint(BigInt(value.length)));
		for (const part of value.parts) this.#push(part);
		return this;
	}

	packedVarints(field: number, values: readonly (number | bigint)[]): this {
		const inner = new ProtoMessage();
		for (const v of values) inner.#push(encodeVarint(BigInt.asUintN(64, BigInt(v))));
		return this.message(field, inner);
	}

	packedFloats(field: number, values: readonly number[]): this {
		const bytes = new Uint8Array(values.length * 4);
		const view = new DataView(bytes.buffer);
		for (const [i, v] of values.entries()) view.setFloat32(i * 4, v, true);
		return this.bytes(field, bytes);
	}

	toBytes(): Uint8Array {
		const out = new Uint8Array(this.length);
		let offset = 0;
		for (const part of this.parts) {
			out.set(part, offset);
			offset += part.length;
		}
		return out;
	}
}

function encodeVarint(value: bigint): Uint8Array {
	const bytes: number[] = [];
	let v = value;
	do {
		let byte = Number(v & 0x7fn);
		v >>= 7n;
		if (v !== 0n) byte |= 0x80;
		bytes.push(byte);
	} while (v !== 0n);
	return Uint8Array.from(bytes);
}

/** A dimension is a fixed size or a symbolic name (a dynamic axis). */
export type OnnxDim = number | string;

export type OnnxAttribute = number | number[] | string | { floats: number[] } | { float: number } | TensorData;

export type TensorData =
	| { type: "float32"; dims: number[]; data: Float32Array }
	| { type: "int64"; dims: number[]; data: BigInt64Array };

function tensorProto(name: string, tensor: TensorData): ProtoMessage {
	const expected = tensor.dims.reduce((a, b) => a * b, 1);
	if (expected !== tensor.data.length) {
		throw new Error(
			`tensor ${name}: dims [${tensor.dims.join(", ")}] need ${expected} values, got ${tensor.data.length}`,
		);
	}
	const raw = new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
	// TensorProto: dims = 1, data_type = 2, name = 8, raw_data = 9 (little-endian, as ONNX requires).
	return new ProtoMessage()
		.packedVarints(1, tensor.dims)
		.varint(2, DATA_TYPE[tensor.type])
		.string(8, name)
		.bytes(9, raw);
}

function attributeProto(name: string, value: OnnxAttribute): ProtoMessage {
	// AttributeProto: name = 1, f = 2, i = 3, s = 4, t = 5, floats = 7, ints = 8, type = 20.
	const attr = new ProtoMessage().string(1, name);
	if (typeof value === "number") {
		if (!Number.isInteger(value)) throw new Error(`attribute ${name}: use { float: ${value} } for a float attribute`);
		return attr.varint(3, value).varint(20, ATTRIBUTE_TYPE.int);
	}
	if (typeof value === "string") return attr.string(4, value).varint(20, ATTRIBUTE_TYPE.string);
	if (Array.isArray(value)) return attr.packedVarints(8, value).varint(20, ATTRIBUTE_TYPE.ints);
	if ("floats" in value) return attr.packedFloats(7, value.floats).varint(20, ATTRIBUTE_TYPE.floats);
	if ("float" in value) return attr.float(2, value.float).varint(20, ATTRIBUTE_TYPE.float);
	return attr.message(5, tensorProto("", value)).varint(20, ATTRIBUTE_TYPE.tensor);
}

function valueInfoProto(name: string, type: OnnxElementType, shape: readonly OnnxDim[]): ProtoMessage {
	// TensorShapeProto.Dimension: dim_value = 1, dim_param = 2.
	const shapeProto = new ProtoMessage();
	for (const dim of shape) {
		const d = typeof dim === "number" ? new ProtoMessage().varint(1, dim) : new ProtoMessage().string(2, dim);
		shapeProto.message(1, d);
	}
	// TypeProto.Tensor: elem_type = 1, shape = 2; TypeProto: tensor_type = 1; ValueInfoProto: name = 1, type = 2.
	const tensorType = new ProtoMessage().varint(1, DATA_TYPE[type]).message(2, shapeProto);
	return new ProtoMessage().string(1, name).message(2, new ProtoMessage().message(1, tensorType));
}

/**
 * Builds one ONNX graph. Node outputs get generated names unless given; `initializer` returns the name to use
 * as a node input. Call `toModel()` for the serialized ModelProto.
 */
export class OnnxGraphBuilder {
	readonly #nodes: ProtoMessage[] = [];
	readonly #initializers: ProtoMessage[] = [];
	readonly #inputs: ProtoMessage[] = [];
	readonly #outputs: ProtoMessage[] = [];
	#counter = 0;
	#parameterCount = 0;

	/** Number of weight values held in initializers (the model's parameter count). */
	get parameterCount(): number {
		return this.#parameterCount;
	}

	input(name: string, type: OnnxElementType, shape: readonly OnnxDim[]): string {
		this.#inputs.push(valueInfoProto(name, type, shape));
		return name;
	}

	output(name: string, type: OnnxElementType, shape: readonly OnnxDim[]): void {
		this.#outputs.push(valueInfoProto(name, type, shape));
	}

	initializer(prefix: string, tensor: TensorData): string {
		const name = this.fresh(prefix);
		this.#initializers.push(tensorProto(name, tensor));
		this.#parameterCount += tensor.data.length;
		return name;
	}

	/** A float32 initializer, counted in `parameterCount`. */
	floats(prefix: string, dims: number[], data: Float32Array | number[]): string {
		return this.initializer(prefix, {
			type: "float32",
			dims,
			data: Float32Array.from(data),
		});
	}

	/** An int64 constant such as a shape or axes list (not counted as parameters). */
	int64s(prefix: string, values: readonly number[]): string {
		const name = this.initializer(prefix, {
			type: "int64",
			dims: [values.length],
			data: BigInt64Array.from(values.map(BigInt)),
		});
		this.#parameterCount -= values.length;
		return name;
	}

	/** A float32 scalar constant (not counted as parameters). */
	scalar(prefix: string, value: number): string {
		const name = this.floats(prefix, [], [value]);
		this.#parameterCount -= 1;
		return name;
	}

	/** A tensor name not used before in this graph. */
	fresh(prefix: string): string {
		return `${prefix}_${this.#counter++}`;
	}

	/** Adds a node and returns its first output's name. */
	node(
		opType: string,
		inputs: readonly string[],
		attributes: Record<string, OnnxAttribute> = {},
		outputs?: readonly string[],
	): string {
		return this.nodeOutputs(opType, inputs, attributes, outputs ?? [this.fresh(opType.toLowerCase())])[0] as string;
	}

	/** Adds a node with several (named or generated) outputs; an empty name skips an optional output. */
	nodeOutputs(
		opType: string,
		inputs: readonly string[],
		attributes: Record<string, OnnxAttribute>,
		outputs: readonly string[],
	): string[] {
		// NodeProto: input = 1, output = 2, name = 3, op_type = 4, attribute = 5.
		const node = new ProtoMessage();
		for (const input of inputs) node.string(1, input);
		for (const output of outputs) node.string(2, output);
		node.string(3, `${opType}_${this.#counter++}`).string(4, opType);
		for (const [key, value] of Object.entries(attributes)) node.message(5, attributeProto(key, value));
		this.#nodes.push(node);
		return [...outputs];
	}

	toModel(options: { opset?: number; producer?: string; graphName?: string } = {}): Uint8Array {
		// GraphProto: node = 1, name = 2, initializer = 5, input = 11, output = 12.
		const graph = new ProtoMessage();
		for (const node of this.#nodes) graph.message(1, node);
		graph.string(2, options.graphName ?? "graph");
		for (const init of this.#initializers) graph.message(5, init);
		for (const input of this.#inputs) graph.message(11, input);
		for (const output of this.#outputs) graph.message(12, output);
		// OperatorSetIdProto: domain = 1 (empty: the default ai.onnx domain), version = 2.
		const opset = new ProtoMessage().string(1, "").varint(2, options.opset ?? 17);
		// ModelProto: ir_version = 1, producer_name = 2, graph = 7, opset_import = 8. IR 8 goes with opset 17.
		return new ProtoMessage()
			.varint(1, 8)
			.string(2, options.producer ?? "voice-conversion gpu-runner")
			.message(7, graph)
			.message(8, opset)
			.toBytes();
	}
}
