/**
 * What an ONNX synthesizer's graph may hold, read from its bytes before onnxruntime sees them. A graph is code:
 * a run of it holds the thread that started it until it ends, and the runner's model thread runs every job of its
 * slot. Without control flow every node runs once, on tensors its inputs size, so a window's run ends; with it, it
 * need not: a 500-byte `Loop` of 10^15 iterations, or one whose trip count is the input's length (quick on the
 * validation's 4 frames, endless on a conversion's window), holds the thread for ever, and the lease's heartbeats
 * go on meanwhile, so nothing ends it. A node outside the standard domain is onnxruntime's own kernel (or none)
 * with its own rules, and a model's functions are graphs of their own.
 *
 * So a synthesizer is refused when its graph holds any of:
 * - control flow and what only it uses: `Loop`, `Scan`, `If`, the sequence and optional operators;
 * - a nested graph (a node attribute of type GRAPH or GRAPHS, whatever its operator), model-local functions,
 *   or training graphs (`training_info`);
 * - a node whose domain is not the standard one (`""` / `ai.onnx`): `com.microsoft`, `ai.onnx.ml`, custom;
 * - a tensor (initializer or node attribute) whose data is in an external file (see `externalProblem`).
 *
 * A deny-list, not a list of the operators RVC's exports use: those differ with the exporter's PyTorch and opset
 * (RVC has exported at opsets 13, 17 and 18; `LayerNormalization` appears at 17, `ReduceL2` takes its axes as an
 * input at 18, PyTorch 2 decomposes differently again), so a list taken from one export would refuse genuine ones,
 * and every other standard operator is bounded by its tensors' sizes as those are. Measured (`export-onnx.py
 * --ops`): the export of RVC's synthesizer with Debian's PyTorch 1.13 holds 44 standard operators at opset 13 and
 * 42 at opset 17, none of the above, and no functions (RVC's own export code says why: "pad first before slice to
 * avoid using cond ops"; RVC pins PyTorch 2.4.1, whose exporter traces the same way); the graph
 * `synthesizer-graph.ts` builds from a `.pth` holds none either.
 *
 * The reader is strict protobuf (`onnx-protobuf.ts`): a varint over 10 bytes or a length past its message's end is
 * an unreadable model, never a shorter one (a graph cut short would hide the nodes after the cut). It walks the
 * fields in place, holding one node's at a time, so a 200 MB file of tiny nodes costs no more memory than its bytes.
 */
import {
	type ByteSource,
	bytesSource,
	type Field,
	fields,
	int64Of,
	textOf,
	UnreadableProtobuf,
	WIRE_LENGTH_DELIMITED,
	WIRE_VARINT,
} from "./onnx-protobuf.ts";

/** Operators of the standard domain that exist for control flow: bodies, branches, and the values they pass. */
const CONTROL_FLOW_OPERATORS = new Set([
	"Loop",
	"Scan",
	"If",
	"SequenceMap",
	"SequenceConstruct",
	"SequenceEmpty",
	"SequenceAt",
	"SequenceInsert",
	"SequenceErase",
	"SequenceLength",
	"SplitToSequence",
	"ConcatFromSequence",
	"Optional",
	"OptionalHasElement",
	"OptionalGetElement",
]);

const STANDARD_DOMAINS = new Set(["", "ai.onnx"]);

/** AttributeProto.type values of graph attributes: GRAPH, GRAPHS. */
const GRAPH_ATTRIBUTES = new Set([5, 10]);

/** The inputs `model-inspection.ts` takes a model with as an RVC synthesizer. */
export const SYNTHESIZER_INPUTS = ["phone", "phone_lengths", "ds", "rnd"] as const;

/** A model refused by its structure rather than its protobuf: no graph. */
export class UnreadableOnnx extends UnreadableProtobuf {}

/** `text` cut to a length a message may quote. */
const quote = (value: string): string => JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value);

interface NodeFacts {
	op: string;
	domain: string;
	name: string;
	/** The name of an attribute that holds a graph, if any. */
	graphAttribute?: string;
	/** A tensor attribute whose data is in a file: its name and location. */
	externalTensor?: ExternalTensor;
}

interface ExternalTensor {
	name: string;
	location: string;
}

/** A TensorProto whose data is in an external file (data_location = 14 is EXTERNAL): its name and location. */
function externalTensor(source: ByteSource, tensor: Field): ExternalTensor | undefined {
	let name = "";
	let location = "";
	let external = false;
	for (const f of fields(source, tensor.start, tensor.end)) {
		// TensorProto: name = 8, external_data = 13 (StringStringEntryProto: key = 1, value = 2), data_location = 14.
		if (f.field === 8 && f.wire === WIRE_LENGTH_DELIMITED) name = textOf(source, f);
		else if (f.field === 14 && f.wire === WIRE_VARINT && int64Of(source, f) === 1) external = true;
		else if (f.field === 13 && f.wire === WIRE_LENGTH_DELIMITED) {
			let key = "";
			let value = "";
			for (const e of fields(source, f.start, f.end)) {
				if (e.field === 1 && e.wire === WIRE_LENGTH_DELIMITED) key = textOf(source, e);
				else if (e.field === 2 && e.wire === WIRE_LENGTH_DELIMITED) value = textOf(source, e);
			}
			if (key === "location") location = value;
		}
	}
	return external ? { name, location } : undefined;
}

function readNode(source: ByteSource, nodeField: Field): NodeFacts {
	const node: NodeFacts = { op: "", domain: "", name: "" };
	for (const f of fields(source, nodeField.start, nodeField.end)) {
		if (f.wire !== WIRE_LENGTH_DELIMITED) continue;
		if (f.field === 4) node.op = textOf(source, f);
		else if (f.field === 7) node.domain = textOf(source, f);
		else if (f.field === 3) node.name = textOf(source, f);
		else if (f.field === 5 && node.graphAttribute === undefined) {
			// AttributeProto: name = 1, t = 5, g = 6, tensors = 10, graphs = 11, type = 20.
			let name = "";
			let holdsGraph = false;
			for (const a of fields(source, f.start, f.end)) {
				if (a.field === 1 && a.wire === WIRE_LENGTH_DELIMITED) name = textOf(source, a);
				else if ((a.field === 6 || a.field === 11) && a.wire === WIRE_LENGTH_DELIMITED) holdsGraph = true;
				else if (a.field === 20 && a.wire === WIRE_VARINT && GRAPH_ATTRIBUTES.has(int64Of(source, a)))
					holdsGraph = true;
				else if ((a.field === 5 || a.field === 10) && a.wire === WIRE_LENGTH_DELIMITED) {
					node.externalTensor ??= externalTensor(source, a);
				}
			}
			if (holdsGraph) node.graphAttribute = name;
		}
	}
	return node;
}

export interface OnnxGraphReading {
	/** The graph's declared input names (initializers among them included). */
	inputs: string[];
	/** Whether those include every input of RVC's synthesizer (`SYNTHESIZER_INPUTS`). */
	synthesizer: boolean;
	/** Why the graph may not run here; undefined when nothing in it is refused. */
	problem?: string;
}

const ADVICE =
	"RVC's synthesizer exports hold none: export it as RVC does (torch.onnx.export), or upload the RVC .pth it came from";

/**
 * Reads `model` (ONNX bytes) against the rules above; throws `UnreadableProtobuf` (`UnreadableOnnx` among them) when
 * it is not a readable ONNX model.
 */
export function readOnnxGraph(model: Uint8Array): OnnxGraphReading {
	const source = bytesSource(model);
	let graph: Field | undefined;
	const modelProblems: string[] = [];
	for (const f of fields(source)) {
		// ModelProto: graph = 7, training_info = 20, functions = 25.
		if (f.field === 7 && f.wire === WIRE_LENGTH_DELIMITED) graph = f;
		else if (f.field === 25 && modelProblems.length === 0) {
			let name = "";
			let domain = "";
			for (const g of fields(source, f.start, f.end)) {
				if (g.field === 1 && g.wire === WIRE_LENGTH_DELIMITED) name = textOf(source, g);
				else if (g.field === 10 && g.wire === WIRE_LENGTH_DELIMITED) domain = textOf(source, g);
			}
			modelProblems.push(
				`the ONNX model defines its own function ${quote(domain ? `${domain}.${name}` : name)}: functions are graphs of their own, and ${ADVICE}`,
			);
		} else if (f.field === 20 && modelProblems.length === 0) {
			modelProblems.push(`the ONNX model holds training graphs (training_info), and ${ADVICE}`);
		}
	}
	if (graph === undefined) throw new UnreadableOnnx("the model has no graph");
	const inputs: string[] = [];
	let problem: string | undefined = modelProblems[0];
	for (const f of fields(source, graph.start, graph.end)) {
		// GraphProto: node = 1, input = 11 (ValueInfoProto: name = 1).
		if (f.field === 11 && f.wire === WIRE_LENGTH_DELIMITED) {
			for (const v of fields(source, f.start, f.end))
				if (v.field === 1 && v.wire === WIRE_LENGTH_DELIMITED) inputs.push(textOf(source, v));
		} else if (f.field === 1 && f.wire === WIRE_LENGTH_DELIMITED && problem === undefined) {
			problem = nodeProblem(readNode(source, f));
		} else if (f.field === 5 && f.wire === WIRE_LENGTH_DELIMITED && problem === undefined) {
			// initializer = 5
			const external = externalTensor(source, f);
			if (external !== undefined) problem = externalProblem(external);
		}
	}
	const synthesizer = SYNTHESIZER_INPUTS.every((name) => inputs.includes(name));
	return { inputs, synthesizer, ...(problem === undefined ? {} : { problem }) };
}

/**
 * onnxruntime reads an external tensor's file from beside the model (a model loaded by path: here, the runner's
 * artifact folder, other voices' files among them) or from its working directory (loaded from bytes), and the
 * values flow into the audio; RVC's exports, far below protobuf's 2 GiB, keep every tensor inline.
 */
function externalProblem({ name, location }: ExternalTensor): string {
	return `the ONNX model keeps tensor ${quote(name)} in an external file (${quote(location)}): a voice's model is one file, every tensor in it, and ${ADVICE}`;
}

function nodeProblem({ op, domain, name, graphAttribute, externalTensor }: NodeFacts): string | undefined {
	const node = `${quote(op)}${name ? ` (node ${quote(name)})` : ""}`;
	if (!STANDARD_DOMAINS.has(domain)) {
		return `the ONNX graph holds the operator ${node} of domain ${quote(domain)}: only the standard ONNX operators (domain ai.onnx) run here, and ${ADVICE}`;
	}
	if (CONTROL_FLOW_OPERATORS.has(op)) {
		return `the ONNX graph holds the control-flow operator ${node}: loops, branches and sequences can run for as long as their inputs say, so they are not run here, and ${ADVICE}`;
	}
	if (graphAttribute !== undefined) {
		return `the ONNX graph holds a nested graph (attribute ${quote(graphAttribute)} of ${node}): nested graphs are not run here, and ${ADVICE}`;
	}
	return externalTensor === undefined ? undefined : externalProblem(externalTensor);
}

/** Why `model` may not run as a synthesizer: the rules' problem, or why it could not be read; undefined if fine. */
export function synthesizerGraphProblem(model: Uint8Array): string | undefined {
	try {
		return readOnnxGraph(model).problem;
	} catch (error) {
		if (!(error instanceof UnreadableProtobuf)) throw error;
		return `not a readable ONNX model: ${error.message}`;
	}
}

/**
 * For `inspectOnnx`, before onnxruntime loads anything: the facts of a model refused by its bytes alone (a
 * synthesizer whose graph breaks the rules, or bytes that are not ONNX's protobuf); undefined for one to load.
 */
export function graphRefusal(model: Uint8Array): Record<string, unknown> | undefined {
	let reading: OnnxGraphReading;
	try {
		reading = readOnnxGraph(model);
	} catch (error) {
		if (!(error instanceof UnreadableProtobuf)) throw error;
		return { refused: { problem: "invalid_model", message: `not a loadable ONNX model: ${error.message}` } };
	}
	if (!reading.synthesizer || reading.problem === undefined) return undefined;
	return {
		inputs: reading.inputs.map((name) => ({ name })),
		role: "synthesizer",
		refused: { problem: "invalid_model", message: reading.problem },
	};
}
