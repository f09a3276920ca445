/**
 * RVC voices are mostly published as a zip archive holding the model (`.pth`) and its feature index (`.index`),
 * often with RVC's `trained_` index beside the `added_` one, a folder around them and a macOS `__MACOSX/` copy.
 * `readVoiceArchive` picks the model and index out of such an archive (leaving `trained_` indexes out: they hold
 * no features), reading only the archive's directory and
 * those two entries: a stored entry is a slice of the archive, a deflated one is inflated (into memory, or wherever
 * `inflateTo` puts it), and each is checked against its CRC-32. The result goes to `voices.create` as it is.
 *
 * Only what `Blob`, `DecompressionStream` and typed arrays offer is used, so it runs wherever the SDK runs.
 *
 * The web playground has a plain-JavaScript copy (`public/playground/voice-archive.js`, for want of a build step): a
 * change of what is taken or refused here goes there too (`test/node/playground-voice-archive.test.ts` compares them).
 */
import { VOICE_LIMITS } from "../src/contracts/voices.ts";
import {
	DEFLATED,
	END_RECORD_SEARCH_BYTES,
	entryDataOffset,
	hasZipSignature,
	isTorchPickle,
	LOCAL_HEADER_BYTES,
	readCentralDirectory,
	readEndRecord,
	readZip64EndRecord,
	STORED,
	ZIP64_END_RECORD_BYTES,
	type ZipEntry,
	ZipFormatError,
} from "../src/contracts/zip-directory.ts";
import { SDK_ERROR_CODES, VoiceConversionError } from "./errors.ts";

export interface VoiceArchiveFile {
	source: Blob;
	/** The entry's own name, without its folder: the name the voice's file gets. */
	fileName: string;
	/** The entry's path in the archive. */
	entry: string;
}

export interface VoiceArchive {
	model: VoiceArchiveFile;
	/** Absent when the archive holds no usable index, or `index: false` was asked for. */
	index?: VoiceArchiveFile;
	/** Every other entry, with why it was left out. */
	skipped: { entry: string; reason: string }[];
}

export interface ReadVoiceArchiveOptions {
	/** The model's path in the archive, when it holds several `.pth` / `.onnx` files. */
	model?: string;
	/** The index's path in the archive when it holds several, or `false` for none. */
	index?: string | false;
	/**
	 * Where a compressed entry is inflated to; by default into memory. The CLI gives a temporary file, so an index
	 * of hundreds of megabytes is not held in memory.
	 */
	inflateTo?: (stream: ReadableStream<Uint8Array>, entry: string) => Promise<Blob>;
}

const MODEL_EXTENSIONS = [".pth", ".onnx"];
const INDEX_EXTENSION = ".index";

/** An archive's refusal: the message says it all (no request field to name, so no `fieldErrors`). */
function archiveError(message: string): VoiceConversionError {
	return new VoiceConversionError({ status: null, code: SDK_ERROR_CODES.invalidRequest, message });
}

/** An entry's own name. Windows tools (PowerShell's Compress-Archive) write `\` between folders, against the format. */
const baseName = (name: string) => name.slice(Math.max(name.lastIndexOf("/"), name.lastIndexOf("\\")) + 1);
const lower = (name: string) => name.toLowerCase();
const listed = (entries: readonly ZipEntry[]) => entries.map((e) => e.name).join(", ");

async function bytesAt(blob: Blob, start: number, length: number): Promise<DataView> {
	const from = Math.min(Math.max(0, start), blob.size);
	return new DataView(await blob.slice(from, Math.min(blob.size, from + length)).arrayBuffer());
}

/** Every entry the archive's central directory lists. */
async function readEntries(archive: Blob): Promise<ZipEntry[]> {
	const tailOffset = Math.max(0, archive.size - END_RECORD_SEARCH_BYTES);
	let directory = readEndRecord(await bytesAt(archive, tailOffset, archive.size - tailOffset), tailOffset);
	if ("zip64EndRecordAt" in directory) {
		directory = readZip64EndRecord(await bytesAt(archive, directory.zip64EndRecordAt, ZIP64_END_RECORD_BYTES));
	}
	return readCentralDirectory(await bytesAt(archive, directory.offset, directory.size), directory.count);
}

const CRC_TABLE = (() => {
	const table = new Uint32Array(256);
	for (let n = 0; n < 256; n++) {
		let c = n;
		for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
		table[n] = c >>> 0;
	}
	return table;
})();

/**
 * Passes the bytes through, counting them and their CRC-32; errors at the end when either is not what the directory
 * says, or as soon as there are more bytes than it says (an entry that inflates past its stated size).
 */
function checked(entry: ZipEntry): TransformStream<Uint8Array, Uint8Array> {
	let crc = 0xffffffff;
	let length = 0;
	const damaged = (why: string) => archiveError(`The archive's ${entry.name} is damaged: ${why}`);
	return new TransformStream({
		transform(chunk, controller) {
			length += chunk.length;
			if (length > entry.size) throw damaged(`it holds more than its stated ${entry.size} bytes`);
			for (let i = 0; i < chunk.length; i++)
				crc = (CRC_TABLE[(crc ^ (chunk[i] as number)) & 0xff] as number) ^ (crc >>> 8);
			controller.enqueue(chunk);
		},
		flush() {
			if (length !== entry.size) throw damaged(`${length} bytes where ${entry.size} are stated`);
			if ((crc ^ 0xffffffff) >>> 0 !== entry.crc32) throw damaged("its CRC-32 does not match");
		},
	});
}

async function drain(stream: ReadableStream<Uint8Array>): Promise<void> {
	const reader = stream.getReader();
	while (!(await reader.read()).done) {}
}

type InflateTo = NonNullable<ReadVoiceArchiveOptions["inflateTo"]>;
const inMemory: InflateTo = (stream) => new Response(stream).blob();

/** The entry's bytes as a Blob, checked against its CRC-32. */
async function extract(archive: Blob, entry: ZipEntry, inflateTo: InflateTo = inMemory): Promise<Blob> {
	const start = entryDataOffset(await bytesAt(archive, entry.localHeaderOffset, LOCAL_HEADER_BYTES), entry);
	if (start + entry.compressedSize > archive.size)
		throw archiveError(`The archive is truncated: ${entry.name} runs past its end`);
	const data = archive.slice(start, start + entry.compressedSize);
	if (entry.method === STORED) {
		await drain(data.stream().pipeThrough(checked(entry)));
		return data;
	}
	const inflated = data
		.stream()
		.pipeThrough(new DecompressionStream("deflate-raw") as unknown as TransformStream<Uint8Array, Uint8Array>)
		.pipeThrough(checked(entry));
	try {
		return await inflateTo(inflated, entry.name);
	} catch (error) {
		if (error instanceof VoiceConversionError) throw error;
		throw archiveError(`The archive's ${entry.name} cannot be inflated: ${(error as Error).message}`);
	}
}

/** The entry that `wanted` names (its path, or its own name when that is unique), or an error listing the choices. */
function named(candidates: ZipEntry[], wanted: string, what: string): ZipEntry {
	const byName = candidates.filter((e) => baseName(e.name) === wanted);
	const match = candidates.find((e) => e.name === wanted) ?? (byName.length === 1 ? byName[0] : undefined);
	if (!match) throw archiveError(`The archive holds no ${what} named ${wanted} (its ${what}s: ${listed(candidates)})`);
	return match;
}

function pickModel(candidates: ZipEntry[], wanted: string | undefined): ZipEntry {
	if (wanted !== undefined) return named(candidates, wanted, "model");
	// RVC's training checkpoints (G_2333.pth, D_2333.pth) are not the voice: the small inference model is.
	const voices = candidates.filter((e) => !/^[GD]_\d+\.pth$/i.test(baseName(e.name)));
	if (voices.length === 1) return voices[0] as ZipEntry;
	if (candidates.length === 0) throw archiveError("The archive holds no model (.pth or .onnx)");
	if (voices.length === 0) {
		throw archiveError(
			`The archive holds only RVC training checkpoints (${listed(candidates)}), not the voice's inference model`,
		);
	}
	throw archiveError(`The archive holds several models (${listed(voices)}): name the one to use`);
}

/** RVC writes `trained_*.index` (the clustering alone, with no features in it) before `added_*.index`, the one used. */
const isTrainedOnly = (entry: ZipEntry) => lower(baseName(entry.name)).startsWith("trained_");

function pickIndex(candidates: ZipEntry[], wanted: string | false | undefined): ZipEntry | undefined {
	if (wanted === false) return undefined;
	if (wanted !== undefined) return named(candidates, wanted, "index");
	const usable = candidates.filter((e) => !isTrainedOnly(e));
	if (usable.length <= 1) return usable[0];
	throw archiveError(`The archive holds several indexes (${listed(usable)}): name the one to use`);
}

/** macOS's `__MACOSX/` copies (resource forks) and hidden files such as `.DS_Store`. */
const isHidden = (entry: ZipEntry) => entry.name.startsWith("__MACOSX/") || baseName(entry.name).startsWith(".");

/** Why an entry that is neither the model nor the index was left out. */
function skipReason(entry: ZipEntry): string {
	if (entry.name.endsWith("/")) return "a folder";
	if (isHidden(entry)) return "a hidden or macOS file";
	if (isTrainedOnly(entry)) return "RVC's trained_ index, which holds no features (its added_ index is the one used)";
	if (lower(entry.name).endsWith(INDEX_EXTENSION)) return "another index";
	if (MODEL_EXTENSIONS.some((ext) => lower(entry.name).endsWith(ext))) return "another model";
	return "not a model or an index";
}

function checkUsable(entry: ZipEntry, role: "model" | "index"): void {
	if (entry.encrypted) throw archiveError(`The archive's ${entry.name} is encrypted: extract it first`);
	if (entry.method !== STORED && entry.method !== DEFLATED) {
		throw archiveError(
			`The archive's ${entry.name} is compressed with a method this reader does not take (${entry.method}; stored and deflate only): extract it first`,
		);
	}
	const limit = VOICE_LIMITS.maxBytes[role];
	if (entry.size > limit) {
		throw archiveError(`The archive's ${entry.name} is ${entry.size} bytes, over the ${role} limit of ${limit}`);
	}
}

/** Whether the entries are a PyTorch checkpoint's own (`<name>/data.pkl`), i.e. the file is a `.pth`, not an archive. */
const isTorchCheckpoint = (entries: ZipEntry[]) => entries.some((e) => isTorchPickle(e.name));

/**
 * The model and index of an RVC voice published as a zip archive, ready for `voices.create`:
 * `client.voices.create({ name, files: await readVoiceArchive(zip) })`. Refuses, naming the entries, what it cannot
 * decide (several models or indexes: `options` names one) or read (encrypted, split, other compression, damaged).
 */
export async function readVoiceArchive(archive: Blob, options: ReadVoiceArchiveOptions = {}): Promise<VoiceArchive> {
	try {
		return await readArchive(archive, options);
	} catch (error) {
		if (error instanceof ZipFormatError) throw archiveError(`The archive cannot be read: ${error.message}`);
		throw error;
	}
}

async function readArchive(archive: Blob, options: ReadVoiceArchiveOptions): Promise<VoiceArchive> {
	const entries = await readEntries(archive);
	if (isTorchCheckpoint(entries)) {
		throw archiveError("This is an RVC checkpoint (.pth) itself, not an archive of one: upload it as the model");
	}
	const files = entries.filter((e) => !e.name.endsWith("/") && !isHidden(e));
	const model = pickModel(
		files.filter((e) => MODEL_EXTENSIONS.some((ext) => lower(e.name).endsWith(ext))),
		options.model,
	);
	const index = pickIndex(
		files.filter((e) => lower(e.name).endsWith(INDEX_EXTENSION)),
		options.index,
	);
	checkUsable(model, "model");
	if (index) checkUsable(index, "index");
	const file = async (entry: ZipEntry): Promise<VoiceArchiveFile> => ({
		source: await extract(archive, entry, options.inflateTo),
		fileName: baseName(entry.name),
		entry: entry.name,
	});
	return {
		model: await file(model),
		...(index ? { index: await file(index) } : {}),
		skipped: entries.filter((e) => e !== model && e !== index).map((e) => ({ entry: e.name, reason: skipReason(e) })),
	};
}

/**
 * When `file` is a zip archive of a voice rather than a checkpoint (a `.zip` passed as the model), what it holds;
 * null for anything else. Lets `voices.create` say so before uploading it.
 */
export async function describeVoiceArchive(file: Blob): Promise<string[] | null> {
	if (!hasZipSignature(new Uint8Array(await file.slice(0, 4).arrayBuffer()))) return null;
	const entries = await readEntries(file).catch(() => null);
	if (!entries || isTorchCheckpoint(entries)) return null;
	return entries.filter((e) => !e.name.endsWith("/")).map((e) => e.name);
}
