/**
 * Reads a faiss index file of the kinds RVC users hold: `IVF{n},Flat` (what RVC's `train_index.py` writes,
 * fourcc `IwFl`) and plain `Flat` (`IxF2` for L2, `IxFI` for inner product). Every other index type is refused by
 * its fourcc, as are truncated or inconsistent files. Trust boundary: the file comes from a voice's uploader, so
 * every count is checked against the bytes that are actually there before anything is allocated.
 *
 * Layout (faiss `impl/index_write.cpp`; all little-endian):
 *   index header   int32 d, int64 ntotal, int64 dummy x2, uint8 is_trained, int32 metric (0 IP, 1 L2),
 *                  float32 metric_arg only when metric > 1
 *   IxF2 / IxFI    header, then the stored vectors as a size-prefixed vector: int64 n, then ntotal x d float32.
 *                  Every faiss release read here writes n = ntotal x d (1.7.0-1.7.1 `WRITEVECTOR` of the float
 *                  array, 1.7.2+ `WRITEXBVECTOR` of the code bytes, whose prefix is bytes / 4); a prefix equal to
 *                  the byte count is accepted as well.
 *   IwFl           header, int64 nlist, int64 nprobe, the coarse quantizer (itself an IxF2 / IxFI index holding
 *                  the nlist centroids), the direct map (uint8 type 0 none / 1 array / 2 hashtable, a
 *                  size-prefixed int64 vector, and for type 2 a size-prefixed vector of int64 pairs), then the
 *                  inverted lists: `ilar`, int64 nlist, int64 code_size (d x 4), list sizes as `full` (a
 *                  size-prefixed vector of nlist int64) or `sprs` (a size-prefixed vector of list, size pairs for
 *                  the non-empty lists), then per non-empty list its vectors (n x code_size bytes) and ids (n int64).
 *
 * The file is read in one pass through a small buffer, its large parts straight into the arrays that keep them:
 * a flat index's vectors, an IVF index's lists (read whole, then compacted in place to the vectors grouped by
 * list), so a several-hundred-MB index costs its vectors once (plus 16 bytes a vector for IVF: its id, and the
 * room its id took in the file) and never a second copy of the file. Describing a file
 * (`describeFaissIndexFile`) makes the same pass and the same checks but steps over the vectors and ids instead
 * of reading them, so checking an uploaded index costs a few kilobytes of memory and reads, whatever its size.
 */
import { type FileHandle, open } from "node:fs/promises";
import { endianness } from "node:os";
import { RvcEngineError } from "./errors.ts";

export type IndexMetric = "l2" | "inner_product";

/** A searchable feature index: every stored vector, and for IVF the coarse centroids and list boundaries. */
export interface FeatureIndex {
	kind: "ivf_flat" | "flat";
	/** The file's fourcc (`IwFl`, `IxF2`, `IxFI`). */
	fourcc: string;
	metric: IndexMetric;
	dim: number;
	ntotal: number;
	/** Inverted lists (IVF); 0 for a flat index. */
	nlist: number;
	/** Lists searched per query (IVF); 0 for a flat index, which searches everything. */
	nprobe: number;
	/** `[ntotal, dim]` row-major: IVF vectors grouped by list, list 0 first; flat vectors in id order. */
	vectors: Float32Array;
	/** The faiss id of each row of `vectors` (IVF); undefined for flat indexes, where the id is the row. */
	ids: Float64Array | undefined;
	/** IVF: the rows of list l are `listStarts[l]` .. `listStarts[l + 1]` (nlist + 1 entries). */
	listStarts: Uint32Array | undefined;
	/** IVF: `[nlist, dim]` coarse centroids, searched with `centroidMetric`. */
	centroids: Float32Array | undefined;
	centroidMetric: IndexMetric | undefined;
}

/** What `npm run rvc -- inspect` and logs show about an index. */
export type IndexDescription = Pick<FeatureIndex, "kind" | "fourcc" | "metric" | "dim" | "ntotal" | "nlist" | "nprobe">;

export function describeFeatureIndex(index: FeatureIndex): IndexDescription {
	const { kind, fourcc, metric, dim, ntotal, nlist, nprobe } = index;
	return { kind, fourcc, metric, dim, ntotal, nlist, nprobe };
}

/**
 * What a loaded `index` holds: the vectors' whole buffer (an IVF index's also holds the room its ids took in
 * the file), its ids, centroids and list bounds, and the squared norms its search computes on first use (of a flat
 * L2 index's vectors; of an IVF index's vectors, whose lists may be scanned by product, and its L2 centroids).
 */
export function heldBytes(index: FeatureIndex): number {
	const normed =
		index.kind === "flat"
			? index.metric === "l2"
				? index.ntotal
				: 0
			: index.ntotal + (index.centroidMetric === "l2" ? index.nlist : 0);
	return (
		index.vectors.buffer.byteLength +
		(index.ids?.byteLength ?? 0) +
		(index.centroids?.byteLength ?? 0) +
		(index.listStarts?.byteLength ?? 0) +
		4 * normed
	);
}

/**
 * Checks `path` as `readFaissIndex` does (every header, count and size, the file's exact length) and describes
 * it, without reading the stored vectors and ids: memory and reads stay small whatever the index's size. Throws
 * `RvcEngineError` (`invalid_index`) with the same reason `readFaissIndex` would give.
 */
export async function describeFaissIndexFile(path: string): Promise<IndexDescription> {
	return (await parseIndexFile(path, false)).description;
}

/**
 * The vector width `d` an index file states, from its first 8 bytes (its fourcc, then `d`, in each layout read here),
 * without reading further; undefined for a file of another type, too short, or a width outside 1..`MAX_DIM`, which
 * `readFaissIndex` and `describeFaissIndexFile` then refuse by name. A voice's models fix the width its index must have
 * (and nothing else in the header), so a caller that knows it refuses a file of another width before the file is read
 * through: a 240 MB IVF index of width 1 with 20 million lists took 4-7 s to check, list by list, before its width was
 * compared.
 */
export async function readFaissIndexWidth(path: string): Promise<number | undefined> {
	let handle: FileHandle;
	try {
		handle = await open(path, "r");
	} catch {
		return undefined; // the reader says why
	}
	try {
		const head = new Uint8Array(8);
		const { bytesRead } = await handle.read(head, 0, 8, 0);
		const fourcc = String.fromCharCode(...head.subarray(0, 4));
		if (bytesRead < 8 || (fourcc !== "IwFl" && fourcc !== "IxF2" && fourcc !== "IxFI")) return undefined;
		const dim = new DataView(head.buffer).getInt32(4, true);
		return dim >= 1 && dim <= MAX_DIM ? dim : undefined;
	} finally {
		await handle.close();
	}
}

/** Index types faiss writes that this reader refuses, by fourcc, so the message can say what the file is. */
const OTHER_INDEX_TYPES: Record<string, string> = {
	IxFl: "a flat index with a metric other than L2 or inner product",
	IwPQ: "IVF with product quantisation (IVF…,PQ…)",
	IwQR: "IVF with residual quantisation",
	IwSQ: "IVF with a scalar quantiser (IVF…,SQ…)",
	IwSq: "IVF with a scalar quantiser (IVF…,SQ…)",
	IwSh: "IVF spectral hash",
	IwFd: "IVF flat with deduplication",
	IvFl: "IVF flat in faiss's pre-2018 layout",
	IvPQ: "IVF with product quantisation (legacy layout)",
	IxPQ: "product quantisation (PQ…)",
	IxPq: "product quantisation (PQ…)",
	IxSQ: "scalar quantisation (SQ…)",
	IxSq: "scalar quantisation (SQ…)",
	IxHe: "LSH",
	IxHE: "LSH",
	IHNf: "HNSW with flat storage (HNSW…,Flat)",
	IHNp: "HNSW with PQ storage",
	IHNs: "HNSW with scalar-quantised storage",
	IHN2: "HNSW two-level",
	IxMp: "an ID map wrapper (IDMap)",
	IxM2: "an ID map wrapper (IDMap2)",
	IxPT: "a pre-transformed index (e.g. PCA…,…)",
	IxRF: "a refined index (…,Refine)",
	IxSh: "a sharded index",
	IxRp: "a replicated index",
	ImRQ: "residual quantisation",
	IxLS: "local search quantisation",
	IBxF: "a binary flat index",
	IBwF: "a binary IVF index",
	null: "an empty (null) index",
};

const METRIC_NAMES = ["inner product", "L2", "L1", "Linf", "Lp", "Canberra", "BrayCurtis", "JensenShannon"];

/** Largest vector width accepted (faiss itself allows 2^20; RVC's are 256 or 768). */
const MAX_DIM = 65_536;

class IndexFormatError extends RvcEngineError {
	constructor(path: string, message: string) {
		super("invalid_index", `feature index ${path}: ${message}`);
	}
}

/** A forward-only reader over the file with a small buffer; large payloads are read straight into their arrays. */
class IndexFileReader {
	readonly path: string;
	readonly size: number;
	readonly #handle: FileHandle;
	readonly #buffer = new Uint8Array(1 << 16);
	readonly #view = new DataView(this.#buffer.buffer);
	/** File offset of `#buffer[0]`, and how many buffered bytes are valid / already consumed. */
	#bufferOffset = 0;
	#filled = 0;
	#used = 0;

	constructor(path: string, handle: FileHandle, size: number) {
		this.path = path;
		this.#handle = handle;
		this.size = size;
	}

	get position(): number {
		return this.#bufferOffset + this.#used;
	}

	get remaining(): number {
		return this.size - this.position;
	}

	fail(message: string): IndexFormatError {
		return new IndexFormatError(this.path, message);
	}

	#truncated(needed: number, what: string): IndexFormatError {
		return this.fail(
			`truncated: ${what} needs ${needed} bytes at offset ${this.position} but the file ends at ${this.size}`,
		);
	}

	async #have(bytes: number, what: string): Promise<void> {
		if (this.#filled - this.#used >= bytes) return;
		if (bytes > this.remaining) throw this.#truncated(bytes, what);
		const kept = this.#filled - this.#used;
		this.#buffer.copyWithin(0, this.#used, this.#filled);
		this.#bufferOffset += this.#used;
		this.#used = 0;
		this.#filled = kept;
		while (this.#filled < bytes) {
			const { bytesRead } = await this.#handle.read(
				this.#buffer,
				this.#filled,
				this.#buffer.length - this.#filled,
				this.#bufferOffset + this.#filled,
			);
			if (bytesRead === 0) throw this.#truncated(bytes, what);
			this.#filled += bytesRead;
		}
	}

	async fourcc(what: string): Promise<string> {
		await this.#have(4, what);
		const bytes = this.#buffer.subarray(this.#used, this.#used + 4);
		this.#used += 4;
		return String.fromCharCode(...bytes);
	}

	async uint8(what: string): Promise<number> {
		await this.#have(1, what);
		return this.#buffer[this.#used++] as number;
	}

	async int32(what: string): Promise<number> {
		await this.#have(4, what);
		const value = this.#view.getInt32(this.#used, true);
		this.#used += 4;
		return value;
	}

	async float32(what: string): Promise<number> {
		await this.#have(4, what);
		const value = this.#view.getFloat32(this.#used, true);
		this.#used += 4;
		return value;
	}

	/** An int64 that must be a count in 0..max. */
	async count(what: string, max = Number.MAX_SAFE_INTEGER): Promise<number> {
		await this.#have(8, what);
		const value = this.#view.getBigInt64(this.#used, true);
		this.#used += 8;
		if (value < 0n || value > BigInt(max)) throw this.fail(`${what} is ${value}, expected 0..${max}`);
		return Number(value);
	}

	/**
	 * `n` int64 counts in 0..max (at most 2^53), each handed to `take` in order: a buffer of them at a time, not one
	 * wait each (an IVF index's 20 million list sizes took 4-7 s one by one).
	 */
	async counts(n: number, what: string, max: number, take: (value: number) => void): Promise<void> {
		for (let left = n; left > 0; ) {
			const batch = Math.min(left, this.#buffer.length >> 3);
			await this.#have(batch * 8, what);
			for (let k = 0; k < batch; k++) {
				const high = this.#view.getInt32(this.#used + 4, true);
				const value = this.#view.getUint32(this.#used, true) + high * 2 ** 32;
				if (high < 0 || value > max) {
					throw this.fail(`${what} is ${this.#view.getBigInt64(this.#used, true)}, expected 0..${max}`);
				}
				this.#used += 8;
				take(value);
			}
			left -= batch;
		}
	}

	/** Fills `target` with the next `target.byteLength` bytes of the file. */
	async bytesInto(target: Uint8Array, what: string): Promise<void> {
		if (target.byteLength > this.remaining) throw this.#truncated(target.byteLength, what);
		const buffered = Math.min(this.#filled - this.#used, target.byteLength);
		target.set(this.#buffer.subarray(this.#used, this.#used + buffered));
		this.#used += buffered;
		let done = buffered;
		while (done < target.byteLength) {
			// Past the buffer: read straight from the file into the destination, then leave the buffer empty there.
			const { bytesRead } = await this.#handle.read(target, done, target.byteLength - done, this.position);
			if (bytesRead === 0) throw this.#truncated(target.byteLength - done, what);
			this.#bufferOffset += bytesRead;
			done += bytesRead;
		}
	}

	/** Skips `bytes` bytes (parts of the file the search does not need, such as a direct map). */
	skip(bytes: number, what: string): void {
		if (bytes > this.remaining) throw this.#truncated(bytes, what);
		const buffered = Math.min(this.#filled - this.#used, bytes);
		this.#used += buffered;
		this.#bufferOffset += bytes - buffered;
	}
}

interface IndexHeader {
	dim: number;
	ntotal: number;
	metric: IndexMetric;
	isTrained: boolean;
}

async function readHeader(reader: IndexFileReader, fourcc: string): Promise<IndexHeader> {
	const dim = await reader.int32(`${fourcc} dimension`);
	if (dim < 1 || dim > MAX_DIM) throw reader.fail(`${fourcc} dimension is ${dim}, expected 1..${MAX_DIM}`);
	const ntotal = await reader.count(`${fourcc} vector count`, 2 ** 32 - 1);
	await reader.count(`${fourcc} header`, Number.MAX_SAFE_INTEGER);
	await reader.count(`${fourcc} header`, Number.MAX_SAFE_INTEGER);
	const trained = await reader.uint8(`${fourcc} is_trained flag`);
	if (trained > 1) throw reader.fail(`${fourcc} is_trained byte is ${trained}, expected 0 or 1 (not a faiss index?)`);
	const metricType = await reader.int32(`${fourcc} metric`);
	if (metricType !== 0 && metricType !== 1) {
		const name = METRIC_NAMES[metricType] ?? `number ${metricType}`;
		throw reader.fail(
			`${fourcc} uses the ${name} metric; only L2 (RVC's) and inner-product indexes can be searched here`,
		);
	}
	return { dim, ntotal, metric: metricType === 1 ? "l2" : "inner_product", isTrained: trained === 1 };
}

function refuseType(reader: IndexFileReader, fourcc: string, where: string): never {
	const known = OTHER_INDEX_TYPES[fourcc];
	if (known !== undefined) {
		throw reader.fail(
			`${where} is ${known} (faiss fourcc ${fourcc}); only IVF…,Flat (IwFl, what RVC's training writes) and Flat (IxF2, IxFI) indexes are supported`,
		);
	}
	const printable = /^[\x20-\x7e]{4}$/.test(fourcc);
	throw reader.fail(
		printable
			? `${where} has the unknown faiss fourcc "${fourcc}"; only IVF…,Flat (IwFl) and Flat (IxF2, IxFI) indexes are supported`
			: `${where} does not start with a faiss index fourcc (bytes ${[...fourcc].map((c) => c.charCodeAt(0).toString(16).padStart(2, "0")).join(" ")}); is this a faiss .index file?`,
	);
}

/**
 * The vectors of a flat index (after its header): a size prefix of ntotal x d floats (or bytes), then the floats;
 * stepped over (null) when the payload is not kept.
 */
async function readFlatVectors(
	reader: IndexFileReader,
	fourcc: string,
	header: IndexHeader,
	keep: boolean,
): Promise<Float32Array | null> {
	const floats = header.ntotal * header.dim;
	const prefix = await reader.count(`${fourcc} vector data size`);
	if (prefix !== floats && prefix !== floats * 4) {
		throw reader.fail(
			`${fourcc} says ${prefix} for its vector data, expected ${floats} floats for ${header.ntotal} vectors of ${header.dim}`,
		);
	}
	if (floats * 4 > reader.remaining) {
		throw reader.fail(
			`truncated: ${fourcc} holds ${header.ntotal} vectors of ${header.dim} (${floats * 4} bytes) but only ${reader.remaining} bytes follow`,
		);
	}
	if (!keep) {
		reader.skip(floats * 4, `${fourcc} vectors`);
		return null;
	}
	const vectors = new Float32Array(floats);
	await reader.bytesInto(new Uint8Array(vectors.buffer), `${fourcc} vectors`);
	return vectors;
}

/** The arrays search needs, which a description does without. */
type IndexPayload = Pick<FeatureIndex, "vectors" | "ids" | "listStarts" | "centroids" | "centroidMetric">;

/** One pass over an index file: what it is, and its payload when that was kept (null when stepped over). */
interface ParsedIndex {
	description: IndexDescription;
	payload: IndexPayload | null;
}

async function readIvfFlat(reader: IndexFileReader, keep: boolean): Promise<ParsedIndex> {
	const header = await readHeader(reader, "IwFl");
	if (!header.isTrained) throw reader.fail("the IVF index was never trained (no coarse centroids)");
	const nlist = await reader.count("IwFl nlist", 2 ** 31 - 1);
	const nprobe = await reader.count("IwFl nprobe", 2 ** 31 - 1);
	if (nlist < 1) throw reader.fail("the IVF index has no inverted lists");
	if (nprobe < 1) throw reader.fail("the IVF index has nprobe 0");

	const quantizerType = await reader.fourcc("quantizer fourcc");
	if (quantizerType !== "IxF2" && quantizerType !== "IxFI")
		refuseType(reader, quantizerType, "the IVF index's coarse quantizer");
	const quantizer = await readHeader(reader, quantizerType);
	if (quantizer.dim !== header.dim || quantizer.ntotal !== nlist) {
		throw reader.fail(
			`the coarse quantizer holds ${quantizer.ntotal} centroids of ${quantizer.dim}, expected ${nlist} of ${header.dim}`,
		);
	}
	const centroids = await readFlatVectors(reader, quantizerType, quantizer, keep);

	// The direct map (id -> list position) serves faiss's reconstruct(); search does not need it.
	const mapType = await reader.uint8("direct map type");
	if (mapType > 2) throw reader.fail(`direct map type is ${mapType}, expected 0, 1 or 2`);
	const mapEntries = await reader.count("direct map size", Math.floor(reader.remaining / 8));
	reader.skip(mapEntries * 8, "direct map");
	if (mapType === 2) {
		const pairs = await reader.count("direct map hashtable size", Math.floor(reader.remaining / 16));
		reader.skip(pairs * 16, "direct map hashtable");
	}

	const listsType = await reader.fourcc("inverted lists fourcc");
	if (listsType !== "ilar") {
		const what =
			listsType === "il00"
				? "no inverted lists (written without its vectors)"
				: listsType === "ilod"
					? "on-disk inverted lists (kept in a separate file)"
					: `inverted lists of type "${listsType}"`;
		throw reader.fail(`the IVF index has ${what}; only lists stored in the file (ilar) can be read`);
	}
	const storedNlist = await reader.count("inverted lists nlist", 2 ** 31 - 1);
	const codeSize = await reader.count("inverted lists code size", MAX_DIM * 4);
	if (storedNlist !== nlist) throw reader.fail(`the inverted lists say ${storedNlist} lists, the index ${nlist}`);
	if (codeSize !== header.dim * 4) {
		throw reader.fail(`code size is ${codeSize} bytes, expected ${header.dim * 4} for Flat vectors of ${header.dim}`);
	}
	const sizes = new Float64Array(nlist);
	const sizesType = await reader.fourcc("inverted list sizes type");
	if (sizesType === "full") {
		const n = await reader.count("list sizes count", Math.floor(reader.remaining / 8));
		if (n !== nlist) throw reader.fail(`the list sizes cover ${n} lists, expected ${nlist}`);
		let l = 0;
		await reader.counts(nlist, "list size", header.ntotal, (size) => {
			sizes[l++] = size;
		});
	} else if (sizesType === "sprs") {
		// A pair per non-empty list, as faiss writes them: more would be read one by one to no end (a 256 MB file
		// of (0, 0) pairs took 6 s to check, and as long again at each load).
		const n = await reader.count("sparse list sizes count", 2 * nlist);
		if (n % 2 !== 0) throw reader.fail(`sparse list sizes hold ${n} numbers, expected list/size pairs`);
		// Pairs of (list, size), the list checked against nlist and the size against ntotal.
		let list = -1;
		await reader.counts(n, "sparse list number or size", Math.max(nlist - 1, header.ntotal), (value) => {
			if (list < 0) {
				if (value > nlist - 1) throw reader.fail(`sparse list number is ${value}, expected 0..${nlist - 1}`);
				list = value;
			} else {
				if (value > header.ntotal) throw reader.fail(`list size is ${value}, expected 0..${header.ntotal}`);
				sizes[list] = value;
				list = -1;
			}
		});
	} else {
		throw reader.fail(`inverted list sizes have the unknown type "${sizesType}", expected "full" or "sprs"`);
	}
	const stored = sizes.reduce((a, b) => a + b, 0);
	if (stored !== header.ntotal) {
		throw reader.fail(`the inverted lists hold ${stored} vectors but the index header says ${header.ntotal}`);
	}
	const needed = stored * (codeSize + 8);
	if (needed > reader.remaining) {
		throw reader.fail(
			`truncated: ${stored} vectors of ${header.dim} need ${needed} bytes but only ${reader.remaining} follow`,
		);
	}

	const description: IndexDescription = {
		kind: "ivf_flat",
		fourcc: "IwFl",
		metric: header.metric,
		dim: header.dim,
		ntotal: header.ntotal,
		nlist,
		nprobe,
	};
	if (!keep || centroids === null) {
		reader.skip(needed, "inverted lists");
		return { description, payload: null };
	}

	// The lists as stored (each list's vectors, then its ids) come in one read, straight into one buffer, instead
	// of two reads a list (10 000 for a 5128-list index). Each list's vectors then move down over the ids before
	// them, so the vectors end up contiguous, grouped by list; each list's ids are taken out first. The buffer
	// keeps 8 bytes a vector of slack at its end.
	const lists = new Uint8Array(needed);
	await reader.bytesInto(lists, "inverted lists");
	const view = new DataView(lists.buffer);
	const ids = new Float64Array(stored);
	const listStarts = new Uint32Array(nlist + 1);
	let row = 0;
	let at = 0;
	for (let l = 0; l < nlist; l++) {
		listStarts[l] = row;
		const n = sizes[l] as number;
		if (n === 0) continue;
		const idsAt = at + n * codeSize;
		// int64 ids as numbers, exact below 2^53: low word plus the signed high word.
		for (let i = 0; i < n; i++) {
			ids[row + i] = view.getUint32(idsAt + 8 * i, true) + view.getInt32(idsAt + 8 * i + 4, true) * 2 ** 32;
		}
		lists.copyWithin(row * codeSize, at, idsAt);
		at = idsAt + 8 * n;
		row += n;
	}
	const vectors = new Float32Array(lists.buffer, 0, stored * header.dim);
	listStarts[nlist] = row;
	const centroidMetric = quantizerType === "IxF2" ? "l2" : "inner_product";
	return { description, payload: { vectors, ids, listStarts, centroids, centroidMetric } };
}

/**
 * Reads a faiss `IVF…,Flat` or `Flat` index file. Throws `RvcEngineError` with code `invalid_index` naming the
 * problem: another index type (by fourcc), another metric, a truncated file, counts that disagree.
 */
export async function readFaissIndex(path: string): Promise<FeatureIndex> {
	const { description, payload } = await parseIndexFile(path, true);
	if (payload === null) throw new IndexFormatError(path, "the reader kept no vectors"); // not reached: kept above
	return { ...description, ...payload };
}

/** One checked pass over the file; the vectors, ids and centroids are read when `keep`, stepped over otherwise. */
async function parseIndexFile(path: string, keep: boolean): Promise<ParsedIndex> {
	// The vectors are copied from the file's bytes as they are; faiss writes little-endian.
	if (endianness() !== "LE") throw new IndexFormatError(path, "faiss indexes can only be read on little-endian hosts");
	let handle: FileHandle;
	try {
		handle = await open(path, "r");
	} catch (error) {
		throw new RvcEngineError("invalid_index", `feature index ${path} cannot be opened: ${(error as Error).message}`, {
			cause: error,
		});
	}
	try {
		const reader = new IndexFileReader(path, handle, (await handle.stat()).size);
		const fourcc = await reader.fourcc("index fourcc");
		let parsed: ParsedIndex;
		if (fourcc === "IwFl") parsed = await readIvfFlat(reader, keep);
		else if (fourcc === "IxF2" || fourcc === "IxFI") {
			const header = await readHeader(reader, fourcc);
			const vectors = await readFlatVectors(reader, fourcc, header, keep);
			parsed = {
				description: {
					kind: "flat",
					fourcc,
					metric: header.metric,
					dim: header.dim,
					ntotal: header.ntotal,
					nlist: 0,
					nprobe: 0,
				},
				payload:
					vectors === null
						? null
						: { vectors, ids: undefined, listStarts: undefined, centroids: undefined, centroidMetric: undefined },
			};
		} else refuseType(reader, fourcc, "the file");
		if (reader.remaining > 0) {
			throw reader.fail(`${reader.remaining} bytes follow the end of the index (not one faiss index?)`);
		}
		if (parsed.description.ntotal === 0)
			throw reader.fail(
				"the index holds no vectors (RVC writes a trained_*.index, the clustering alone, before its added_*.index: use the added_ one)",
			);
		return parsed;
	} finally {
		await handle.close();
	}
}
