/**
 * Reads an RVC inference checkpoint (`.pth`, as RVC's `train/process_ckpt.py` writes it) without running
 * anything from it: a `torch.save` zip whose `data.pkl` is a protocol-2 pickle of
 * `{weight: {name: tensor}, config: [18 items], info, sr, f0, version}` and whose `data/<key>` entries hold
 * the raw tensor storages. The pickle is read by a strict reader that allows only the globals torch uses for
 * this (`collections.OrderedDict`, `torch._utils._rebuild_tensor_v2` and the Half/Float/BFloat16 storage
 * types); anything else is refused by name.
 *
 * Forks' files are read too: weight norm's `g` and `v` may be named as PyTorch 2's parametrizations name them
 * (`.parametrizations.weight.original0` / `original1`, Applio), and what a fork records beside RVC's keys (its
 * training, the embedder and decoder it trained with, ddPn08's 19-item config) is read, and refused where it would
 * not run here, by `checkpoint-provenance.ts`.
 *
 * The result has every tensor as float32 with weight norm folded (`weight = g * v / ||v||`, the norm over all
 * dimensions but the first), checked against the shapes the config implies. Failures are
 * `RvcCheckpointError`s, permanent, with a `problem` code and a message naming what is wrong.
 */

import { isTorchPickle, ZipFormatError } from "../../../../src/contracts/zip-directory.ts";
import { checkTrainedForThisEngine, ddpn08Layout, trainingFacts } from "./checkpoint-provenance.ts";
import { RvcCheckpointError } from "./errors.ts";
import { type PickleCallable, PickleError, PickleTuple, quotePickleValue, readPickle } from "./pickle-reader.ts";
import {
	FEATURE_DIMS,
	parseSynthesizerConfig,
	type RvcVersion,
	type SynthesizerConfig,
	SynthesizerConfigError,
	samplesPerFrame,
	synthesizerTensors,
} from "./synthesizer-config.ts";
import { ZipArchive } from "./zip-archive.ts";

export { type CheckpointProblem, RvcCheckpointError } from "./errors.ts";
export { FEATURE_DIMS, type RvcVersion } from "./synthesizer-config.ts";

export interface Tensor {
	dims: number[];
	data: Float32Array;
}

export type StorageDtype = "float16" | "float32" | "bfloat16";

export interface RvcCheckpoint {
	version: RvcVersion;
	/** RVC's `f0`: true for pitch-guided models (inputs `pitch`, `pitchf`, NSF decoder). */
	f0: boolean;
	/** `sr` as stored ("40k"), if present. */
	sr: string | undefined;
	config: SynthesizerConfig;
	/** ContentVec feature width: 256 for v1, 768 for v2. */
	featureDim: number;
	/** Rows of `emb_g.weight`: the speakers `ds` may select. */
	speakers: number;
	info: string | undefined;
	/** What Applio records of the training beside RVC's keys (`TRAINING_FACTS`), where present: for operators. */
	training: Record<string, string | number>;
	/** Element type of the stored tensors (fp16 for RVC's own exports). */
	dtype: StorageDtype;
	/** Tensors of the inference path, float32, weight norm folded, by RVC's parameter names. */
	weights: Map<string, Tensor>;
	parameters: number;
}

/**
 * How many times the values its tensors hold a checkpoint's storages may hold together (RVC's files: once; a tensor
 * saved as a view of a larger one brings the whole storage).
 */
const STORAGE_ALLOWANCE = 2;
/** The largest `data.pkl` read (RVC's: about 40 KB; it holds names and numbers, the tensors are apart). */
export const MAX_PICKLE_BYTES = 16 * 1024 * 1024;

/** The most parameters a checkpoint may have (RVC's published models: 27.4 to 28.7 million; 400 MB as float32). */
export const MAX_PARAMETERS = 100_000_000;

const STORAGE_TYPES: Record<string, { dtype: StorageDtype; bytes: number }> = {
	"torch.HalfStorage": { dtype: "float16", bytes: 2 },
	"torch.FloatStorage": { dtype: "float32", bytes: 4 },
	"torch.BFloat16Storage": { dtype: "bfloat16", bytes: 2 },
};

class StorageType {
	readonly name: string;
	constructor(name: string) {
		this.name = name;
	}
}

class StorageRef {
	readonly type: StorageType;
	readonly key: string;
	readonly numel: number;
	constructor(type: StorageType, key: string, numel: number) {
		this.type = type;
		this.key = key;
		this.numel = numel;
	}
}

class TensorRef {
	readonly storage: StorageRef;
	readonly offset: number;
	readonly dims: number[];
	readonly strides: number[];
	constructor(storage: StorageRef, offset: number, dims: number[], strides: number[]) {
		this.storage = storage;
		this.offset = offset;
		this.dims = dims;
		this.strides = strides;
	}
}

function integers(value: unknown): number[] | undefined {
	if (!(value instanceof PickleTuple)) return undefined;
	return value.items.every((v) => typeof v === "number" && Number.isInteger(v) && v >= 0)
		? (value.items as number[])
		: undefined;
}

const ORDERED_DICT: PickleCallable = {
	name: "collections.OrderedDict",
	call: (args) => {
		if (args.length !== 0) throw new PickleError("forbidden_global", "collections.OrderedDict called with arguments");
		return new Map();
	},
};

const REBUILD_TENSOR: PickleCallable = {
	name: "torch._utils._rebuild_tensor_v2",
	call: (args) => {
		const [storage, offset, size, stride] = args;
		const dims = integers(size);
		const strides = integers(stride);
		if (
			!(storage instanceof StorageRef) ||
			typeof offset !== "number" ||
			dims === undefined ||
			strides === undefined ||
			dims.length !== strides.length ||
			args.length < 6
		)
			throw new PickleError("malformed", "torch._utils._rebuild_tensor_v2 called with unexpected arguments");
		return new TensorRef(storage, offset, dims, strides);
	},
};

const ALLOWED_GLOBALS: ReadonlyMap<string, unknown> = new Map<string, unknown>([
	["collections.OrderedDict", ORDERED_DICT],
	["torch._utils._rebuild_tensor_v2", REBUILD_TENSOR],
	...Object.keys(STORAGE_TYPES).map((name): [string, unknown] => [name, new StorageType(name)]),
]);

function persistentStorage(id: unknown): StorageRef {
	// ('storage', storage_type, key, location, numel), torch.save's persistent id for a storage.
	const items = id instanceof PickleTuple ? id.items : [];
	const [tag, type, key, , numel] = items;
	if (items.length !== 5 || tag !== "storage" || typeof key !== "string" || typeof numel !== "number")
		throw new PickleError("malformed", `persistent id ${describe(id)} is not a torch storage reference`);
	if (!(type instanceof StorageType))
		throw new PickleError("malformed", `persistent id names storage type ${describe(type)}`);
	return new StorageRef(type, key, numel);
}

/** A value read from the pickle as a message quotes it (bounded, whatever the pickle holds). */
function describe(value: unknown): string {
	return quotePickleValue(value, (v) => {
		if (Array.isArray(v)) return "a list";
		if (v instanceof TensorRef) return `a tensor [${v.dims.join(", ")}]`;
		if (v instanceof StorageType) return v.name;
		if (v instanceof StorageRef) return `a ${v.type.name}`;
		return undefined;
	});
}

/** IEEE 754 half to float32 through the bit patterns (Float16Array is not in Node 22). */
function halfToFloat(bits: Uint16Array): Float32Array {
	const out = new Float32Array(bits.length);
	const outBits = new Uint32Array(out.buffer);
	for (let i = 0; i < bits.length; i++) {
		const h = bits[i] as number;
		const sign = (h & 0x8000) << 16;
		const exponent = (h >> 10) & 0x1f;
		const mantissa = h & 0x3ff;
		if (exponent === 0) {
			// Zero or subnormal: mantissa x 2^-24, exact in float32.
			out[i] = (sign ? -1 : 1) * mantissa * 2 ** -24;
		} else if (exponent === 0x1f) outBits[i] = sign | 0x7f800000 | (mantissa << 13);
		else outBits[i] = sign | ((exponent + 112) << 23) | (mantissa << 13);
	}
	return out;
}

/**
 * A storage's bytes as its element type: a view of them where they start at a multiple of the element's size, as
 * torch.save places every storage (at 64-byte boundaries of the file, which `readFile` gives at offset 0), and a copy
 * only where they do not (a zip re-packed by another tool). A copy of each storage held an fp32 checkpoint's tensors
 * twice while it was read. The view is only read from: `load` copies each tensor out of it.
 */
function storedValues<T extends Float32Array | Uint16Array>(
	raw: Uint8Array,
	type: { new (buffer: ArrayBufferLike, byteOffset: number, length: number): T; BYTES_PER_ELEMENT: number },
): T {
	const bytes = raw.byteOffset % type.BYTES_PER_ELEMENT === 0 ? raw : new Uint8Array(raw);
	return new type(bytes.buffer, bytes.byteOffset, bytes.byteLength / type.BYTES_PER_ELEMENT);
}

/** Whether `ref` is its storage's every value in row-major order (a size-1 dimension's stride does not matter). */
function wholeStorage(ref: TensorRef, storageLength: number, count: number): boolean {
	if (ref.offset !== 0 || count !== storageLength) return false;
	let stride = 1;
	for (let d = ref.dims.length - 1; d >= 0; d--) {
		const size = ref.dims[d] as number;
		if (size !== 1 && ref.strides[d] !== stride) return false;
		stride *= size;
	}
	return true;
}

class TensorLoader {
	readonly #archive: ZipArchive;
	readonly #prefix: string;
	readonly #storages = new Map<string, Float32Array>();
	/** Storages widened from fp16 / bf16 into arrays of their own (an fp32 one may be a view of the file). */
	readonly #widened = new Set<string>();
	/** How many tensors of the checkpoint view each storage and are not loaded yet (a storage goes once none is). */
	readonly #views: Map<string, number>;
	/** Values the storages read so far hold, and the most they may hold together. */
	#held = 0;
	readonly #budget: number;
	readonly dtypes = new Set<StorageDtype>();

	constructor(archive: ZipArchive, prefix: string, budget: number, tensors: Iterable<TensorRef>) {
		this.#archive = archive;
		this.#prefix = prefix;
		this.#budget = budget;
		const views = new Map<string, number>();
		for (const ref of tensors) views.set(ref.storage.key, (views.get(ref.storage.key) ?? 0) + 1);
		this.#views = views;
	}

	#storage(ref: StorageRef): Float32Array {
		const cached = this.#storages.get(ref.key);
		if (cached !== undefined) return cached;
		const type = STORAGE_TYPES[ref.type.name] as { dtype: StorageDtype; bytes: number };
		const name = `${this.#prefix}data/${ref.key}`;
		if (!this.#archive.has(name))
			throw new RvcCheckpointError("truncated_archive", `checkpoint lacks tensor storage ${name}`);
		// Checked before the storage is inflated and widened to float32: a tensor may view a few values of a storage
		// that holds gigabytes (of zeros, a few KB deflated), and several entries may share the same bytes.
		if (this.#held + ref.numel > this.#budget)
			throw new RvcCheckpointError(
				"too_large",
				`tensor storage ${name} holds ${ref.numel} values; with the storages before it that is more than the ${this.#budget} the checkpoint's tensors may hold (twice the values they have)`,
			);
		let raw: Uint8Array;
		try {
			raw = this.#archive.read(name, ref.numel * type.bytes);
		} catch (error) {
			throw zipRefusal(error, `tensor storage ${name} unreadable`);
		}
		this.#held += ref.numel;
		if (raw.length !== ref.numel * type.bytes) {
			throw new RvcCheckpointError(
				"misshapen_tensor",
				`tensor storage ${name} holds ${raw.length} bytes, ${ref.numel} ${type.dtype} values need ${ref.numel * type.bytes}`,
			);
		}
		let values: Float32Array;
		if (type.dtype === "float32") values = storedValues(raw, Float32Array);
		else if (type.dtype === "float16") values = halfToFloat(storedValues(raw, Uint16Array));
		else {
			const bits = storedValues(raw, Uint16Array);
			values = new Float32Array(bits.length);
			const out = new Uint32Array(values.buffer);
			for (let i = 0; i < bits.length; i++) out[i] = (bits[i] as number) << 16;
		}
		this.dtypes.add(type.dtype);
		this.#storages.set(ref.key, values);
		if (type.dtype !== "float32") this.#widened.add(ref.key);
		return values;
	}

	/** The tensor as contiguous float32 (it may be a strided view of a shared storage). */
	load(name: string, ref: TensorRef): Tensor {
		const storage = this.#storage(ref.storage);
		const count = ref.dims.reduce((a, b) => a * b, 1);
		const last = ref.offset + ref.dims.reduce((sum, d, i) => sum + (d - 1) * (ref.strides[i] as number), 0);
		if (count > 0 && (ref.offset < 0 || last >= storage.length)) {
			throw new RvcCheckpointError(
				"misshapen_tensor",
				`tensor ${name} [${ref.dims.join(", ")}] reaches past its storage of ${storage.length} values`,
			);
		}
		const key = ref.storage.key;
		const views = (this.#views.get(key) ?? 1) - 1;
		this.#views.set(key, views);
		// Kept for the tensors still to view it, then let go: held to the end, the storages were a second copy of
		// every tensor (and of the weight-norm `v`s that folding replaces).
		if (views <= 0) this.#storages.delete(key);
		// A widened storage that only this tensor views, whole and in order, is the tensor (RVC's fp16 files: every
		// tensor): copying it held an fp16 checkpoint's tensors twice while it was read.
		if (this.#widened.has(key) && views <= 0 && wholeStorage(ref, storage.length, count)) {
			return { dims: [...ref.dims], data: storage };
		}
		const data = new Float32Array(count);
		const index = new Array<number>(ref.dims.length).fill(0);
		for (let i = 0; i < count; i++) {
			let at = ref.offset;
			for (let d = 0; d < index.length; d++) at += (index[d] as number) * (ref.strides[d] as number);
			data[i] = storage[at] as number;
			for (let d = index.length - 1; d >= 0; d--) {
				index[d] = (index[d] as number) + 1;
				if ((index[d] as number) < (ref.dims[d] as number)) break;
				index[d] = 0;
			}
		}
		return { dims: [...ref.dims], data };
	}
}

/** `g * v / ||v||` per output row (dimension 0), as `torch.nn.utils.weight_norm(dim=0)` computes it. */
export function foldWeightNorm(g: Tensor, v: Tensor): Float32Array {
	const rows = v.dims[0] as number;
	const rowSize = v.data.length / rows;
	const out = new Float32Array(v.data.length);
	for (let r = 0; r < rows; r++) {
		let sum = 0;
		for (let i = r * rowSize; i < (r + 1) * rowSize; i++) sum += (v.data[i] as number) ** 2;
		const scale = (g.data[r] as number) / Math.sqrt(sum);
		for (let i = r * rowSize; i < (r + 1) * rowSize; i++) out[i] = (v.data[i] as number) * scale;
	}
	return out;
}

const sameDims = (a: readonly number[], b: readonly number[]) =>
	a.length === b.length && a.every((d, i) => b[i] === -1 || d === b[i]);
const shape = (dims: readonly number[]) => `[${dims.join(", ")}]`;

/** Weight norm's `g` and `v` suffixes as RVC names them, and as PyTorch 2's parametrizations do (Applio's files). */
const WEIGHT_NORM_NAMES = [
	[".weight_g", ".weight_v"],
	[".parametrizations.weight.original0", ".parametrizations.weight.original1"],
] as const;

/** The weight-norm pair of the layer `base`, under whichever naming the checkpoint uses; undefined when neither. */
function weightNormRefs(
	raw: ReadonlyMap<string, TensorRef>,
	base: string,
): { g: string; v: string; gRef: TensorRef | undefined; vRef: TensorRef | undefined } | undefined {
	for (const [gSuffix, vSuffix] of WEIGHT_NORM_NAMES) {
		const g = `${base}${gSuffix}`;
		const v = `${base}${vSuffix}`;
		const gRef = raw.get(g);
		const vRef = raw.get(v);
		if (gRef !== undefined || vRef !== undefined) return { g, v, gRef, vRef };
	}
	return undefined;
}

/** A zip fault met while reading an entry, as the checkpoint's refusal; anything else as it is. */
function zipRefusal(error: unknown, what: string): unknown {
	if (!(error instanceof ZipFormatError)) return error;
	return new RvcCheckpointError(
		error.truncated ? "truncated_archive" : "not_a_checkpoint",
		`${what}: ${error.message}`,
		{
			cause: error,
		},
	);
}

function openArchive(bytes: Uint8Array): { archive: ZipArchive; prefix: string } {
	let archive: ZipArchive;
	try {
		archive = ZipArchive.open(bytes);
	} catch (error) {
		if (error instanceof ZipFormatError) {
			throw new RvcCheckpointError(
				error.truncated ? "truncated_archive" : "not_a_checkpoint",
				`not a readable torch.save archive: ${error.message}`,
				{ cause: error },
			);
		}
		throw error;
	}
	const pickles = archive.names.filter(isTorchPickle);
	const voiceFiles = archive.names.filter((n) => /\.(pth|onnx|index)$/i.test(n) && !n.startsWith("__MACOSX/"));
	if (pickles.length === 0 && voiceFiles.length > 0) {
		// A voice as it is published (a .zip of its .pth and .index), uploaded whole as the model.
		throw new RvcCheckpointError(
			"not_a_checkpoint",
			`a zip archive holding ${voiceFiles.join(", ")}, not an RVC checkpoint: upload the .pth inside as the model and its added_ .index as the index (the CLI's voices create --archive and the SDK's readVoiceArchive do this)`,
		);
	}
	if (pickles.length !== 1) {
		throw new RvcCheckpointError(
			"not_a_checkpoint",
			`not a torch.save archive: expected one <name>/data.pkl, found ${pickles.length} among ${archive.names.length} entries`,
		);
	}
	const prefix = (pickles[0] as string).slice(0, -"data.pkl".length);
	const byteOrder = `${prefix}byteorder`;
	let order = "little";
	try {
		if (archive.has(byteOrder)) order = new TextDecoder().decode(archive.read(byteOrder, 64)).trim();
	} catch (error) {
		throw zipRefusal(error, `checkpoint ${byteOrder} unreadable`);
	}
	if (order !== "little")
		throw new RvcCheckpointError("unsupported_dtype", "checkpoint tensors are big-endian; only little-endian is read");
	return { archive, prefix };
}

/** Reads and validates a checkpoint held in memory. */
export function readRvcCheckpoint(bytes: Uint8Array): RvcCheckpoint {
	const { archive, prefix } = openArchive(bytes);
	let root: unknown;
	try {
		root = readPickle(archive.read(`${prefix}data.pkl`, MAX_PICKLE_BYTES), {
			globals: ALLOWED_GLOBALS,
			persistentLoad: persistentStorage,
		});
	} catch (error) {
		if (error instanceof PickleError) {
			throw new RvcCheckpointError(
				error.kind === "malformed" ? "not_a_checkpoint" : "forbidden_pickle",
				`checkpoint pickle refused: ${error.message}`,
				{ cause: error },
			);
		}
		if (error instanceof ZipFormatError)
			throw new RvcCheckpointError("not_a_checkpoint", `checkpoint pickle unreadable: ${error.message}`, {
				cause: error,
			});
		throw error;
	}
	if (!(root instanceof Map))
		throw new RvcCheckpointError(
			"not_a_checkpoint",
			`not an RVC checkpoint: the pickle holds ${describe(root)}, not a dict`,
		);
	const weight = root.get("weight");
	if (!(weight instanceof Map)) {
		const keys = [...root.keys()].slice(0, 20).map((key) => (typeof key === "string" ? key : describe(key)));
		if (root.size > 20) keys.push(`… ${root.size - 20} more`);
		const hint = root.has("model")
			? " (this is a training checkpoint; extract the small inference model with RVC first)"
			: "";
		throw new RvcCheckpointError(
			"not_a_checkpoint",
			`not an RVC inference checkpoint: no "weight" dict (keys: ${keys.join(", ")})${hint}`,
		);
	}
	const storedVersion: unknown = root.get("version") ?? "v1";
	if (storedVersion !== "v1" && storedVersion !== "v2")
		throw new RvcCheckpointError(
			"unknown_version",
			`unknown RVC version ${describe(storedVersion)}; v1 and v2 are read`,
		);
	const f0Value = root.get("f0") ?? 1;
	if (f0Value !== 0 && f0Value !== 1 && typeof f0Value !== "boolean")
		throw new RvcCheckpointError("not_a_checkpoint", `checkpoint f0 is ${describe(f0Value)}, expected 1 or 0`);
	const f0 = f0Value === 1 || f0Value === true;
	const rawConfig = root.get("config");
	if (!Array.isArray(rawConfig))
		throw new RvcCheckpointError(
			"not_a_checkpoint",
			`checkpoint config is ${describe(rawConfig)}, expected RVC's 18-item list`,
		);
	const ddpn08 = ddpn08Layout(root, rawConfig);
	const version: RvcVersion = ddpn08?.version ?? storedVersion;
	let config: SynthesizerConfig;
	try {
		config = parseSynthesizerConfig(ddpn08?.config ?? rawConfig);
	} catch (error) {
		if (error instanceof SynthesizerConfigError) throw new RvcCheckpointError("invalid_config", error.message);
		throw error;
	}
	const sr = root.get("sr");
	const srRates: Record<string, number> = { "32k": 32000, "40k": 40000, "48k": 48000 };
	if (typeof sr === "string" && srRates[sr] !== undefined && srRates[sr] !== config.sampleRate)
		throw new RvcCheckpointError(
			"config_mismatch",
			`checkpoint sr is ${sr} but config sampling_rate is ${config.sampleRate}`,
		);
	if (samplesPerFrame(config) * 100 !== config.sampleRate) {
		throw new RvcCheckpointError(
			"config_mismatch",
			`config upsample_rates [${config.upsampleRates.join(", ")}] give ${samplesPerFrame(config)} samples per 10 ms frame, sampling_rate ${config.sampleRate} needs ${config.sampleRate / 100}`,
		);
	}
	const info = root.get("info");

	const raw = new Map<string, TensorRef>();
	for (const [key, value] of weight) {
		if (typeof key === "string" && value instanceof TensorRef) raw.set(key, value);
	}
	checkTrainedForThisEngine(root, raw.keys());
	const featureDim = FEATURE_DIMS[version];
	const specs = synthesizerTensors(config, featureDim, f0);
	const rawDims = (name: string): number[] | undefined => {
		const ref = raw.get(name) ?? weightNormRefs(raw, name.replace(/\.weight$/, ""))?.vRef;
		return ref?.dims;
	};

	// Every tensor read is held as float32 (and a stride-0 view of a one-value storage is as large as any): the count
	// the config and emb_g's rows imply is bounded before anything is read.
	let declared = 0;
	for (const [name, spec] of specs) {
		declared += spec.dims.reduce((n, d, axis) => n * (d === -1 ? (rawDims(name)?.[axis] ?? 0) : d), 1);
	}
	// What the tensors hold as stored (weight norm's g beside v), which their storages may exceed only so far.
	let tensorValues = declared;
	for (const [name, spec] of specs) if (spec.weightNormed && !raw.has(name)) tensorValues += spec.dims[0] as number;
	if (declared > MAX_PARAMETERS)
		throw new RvcCheckpointError(
			"too_large",
			`the checkpoint's config and emb_g.weight make ${declared} parameters; at most ${MAX_PARAMETERS} are read (RVC's published models hold about 28 million)`,
		);

	// Tensors that pin a config size first, so a config that disagrees with the weights says so as a whole.
	const phone = rawDims("enc_p.emb_phone.weight");
	if (phone !== undefined && phone[1] !== featureDim)
		throw new RvcCheckpointError(
			"config_mismatch",
			`version ${version} takes ${featureDim}-wide features but enc_p.emb_phone.weight is ${shape(phone)} (${phone[1]}-wide)`,
		);
	const anchors: [string, number, number, string][] = [
		["enc_p.emb_phone.weight", 0, config.hiddenChannels, "hidden_channels"],
		["enc_p.proj.weight", 0, 2 * config.interChannels, "inter_channels (x2)"],
		["enc_p.encoder.ffn_layers.0.conv_1.weight", 0, config.filterChannels, "filter_channels"],
		["enc_p.encoder.ffn_layers.0.conv_1.weight", 2, config.kernelSize, "kernel_size"],
		["dec.conv_pre.weight", 0, config.upsampleInitialChannel, "upsample_initial_channel"],
		["emb_g.weight", 1, config.ginChannels, "gin_channels"],
	];
	for (const [name, axis, expected, field] of anchors) {
		const dims = rawDims(name);
		if (dims !== undefined && dims[axis] !== expected)
			throw new RvcCheckpointError("config_mismatch", `config ${field} is ${expected} but ${name} is ${shape(dims)}`);
	}
	if (
		raw.has(`enc_p.encoder.attn_layers.${config.layers}.conv_q.weight`) ||
		weightNormRefs(raw, `dec.ups.${config.upsampleRates.length}`) !== undefined
	)
		throw new RvcCheckpointError(
			"config_mismatch",
			"checkpoint has more encoder layers or upsampling stages than its config says",
		);
	if (f0 && !raw.has("enc_p.emb_pitch.weight") && raw.has("enc_p.emb_phone.weight"))
		throw new RvcCheckpointError(
			"config_mismatch",
			"checkpoint says f0 = 1 but has no pitch embedding (enc_p.emb_pitch.weight)",
		);

	const loader = new TensorLoader(archive, prefix, STORAGE_ALLOWANCE * tensorValues, raw.values());
	const weights = new Map<string, Tensor>();
	let parameters = 0;
	for (const [name, spec] of specs) {
		const base = name.slice(0, -".weight".length);
		let tensor: Tensor;
		const direct = raw.get(name);
		if (direct !== undefined || !spec.weightNormed) {
			if (direct === undefined) throw new RvcCheckpointError("missing_tensor", `checkpoint lacks tensor ${name}`);
			if (!sameDims(direct.dims, spec.dims))
				throw new RvcCheckpointError(
					"misshapen_tensor",
					`tensor ${name} is ${shape(direct.dims)}, the config implies ${shape(spec.dims)}`,
				);
			tensor = loader.load(name, direct);
		} else {
			const { g, v, gRef, vRef } = weightNormRefs(raw, base) ?? { g: `${base}.weight_g`, v: `${base}.weight_v` };
			if (gRef === undefined || vRef === undefined)
				throw new RvcCheckpointError("missing_tensor", `checkpoint lacks tensor ${gRef === undefined ? g : v}`);
			const gDims = [spec.dims[0] as number, ...spec.dims.slice(1).map(() => 1)];
			if (!sameDims(vRef.dims, spec.dims) || !sameDims(gRef.dims, gDims))
				throw new RvcCheckpointError(
					"misshapen_tensor",
					`tensors ${g} ${shape(gRef.dims)} / ${v} ${shape(vRef.dims)}, the config implies ${shape(gDims)} / ${shape(spec.dims)}`,
				);
			const vTensor = loader.load(v, vRef);
			tensor = { dims: vTensor.dims, data: foldWeightNorm(loader.load(g, gRef), vTensor) };
		}
		weights.set(name, tensor);
		parameters += tensor.data.length;
	}
	const speakers = (weights.get("emb_g.weight") as Tensor).dims[0] as number;
	if (speakers < 1) throw new RvcCheckpointError("misshapen_tensor", "emb_g.weight has no speaker rows");
	const dtypes = [...loader.dtypes];
	return {
		version,
		f0,
		sr: typeof sr === "string" ? sr : undefined,
		config: { ...config, speakers },
		featureDim,
		speakers,
		info: typeof info === "string" ? info : undefined,
		training: trainingFacts(root),
		dtype: dtypes.length === 1 ? (dtypes[0] as StorageDtype) : "float32",
		weights,
		parameters,
	};
}
