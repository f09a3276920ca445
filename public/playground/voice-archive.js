/**
 * A voice published as a zip archive, read in the browser: the playground's copy of the SDK's reader
 * (`sdk/voice-archive.ts`, with the zip records of `src/contracts/zip-directory.ts`), in plain JavaScript because the
 * playground has no build step. It takes the same entries, refuses the same archives with the same messages and the
 * same size limits; `test/node/playground-voice-archive.test.ts` runs both readers on the same archives to keep it so.
 *
 * It reads only the archive's directory and the two entries used: a stored entry is a slice of the picked file, a
 * deflated one is inflated with `DecompressionStream("deflate-raw")`; each is checked against its CRC-32.
 */

/** The API's limits for the files an archive gives (VOICE_LIMITS.maxBytes). */
export const VOICE_FILE_LIMITS = { model: 200_000_000, index: 1_000_000_000 };

/** An archive the reader refuses; the message says why, naming the entries. */
export class VoiceArchiveError extends Error {
	name = "VoiceArchiveError";
}

/** The zip format's own faults (a truncated or malformed record), said as the SDK says them. */
class ZipFormatError extends Error {}

const STORED = 0;
const DEFLATED = 8;
const LOCAL_HEADER_BYTES = 30;
const END_RECORD_SEARCH_BYTES = 22 + 0xffff;
const ZIP64_END_RECORD_BYTES = 56;
const LOCAL_HEADER = 0x04034b50;
const CENTRAL_HEADER = 0x02014b50;
const END_RECORD = 0x06054b50;
const ZIP64_LOCATOR = 0x07064b50;
const ZIP64_END_RECORD = 0x06064b50;
const UINT32_MAX = 0xffffffff;

const MODEL_EXTENSIONS = [".pth", ".onnx"];
const INDEX_EXTENSION = ".index";

function need(view, at, length, what) {
	if (at < 0 || at + length > view.byteLength) {
		throw new ZipFormatError(`the zip's ${what} runs past the end of the file: the archive is truncated`);
	}
}

async function bytesAt(blob, start, length) {
	const from = Math.min(Math.max(0, start), blob.size);
	return new DataView(await blob.slice(from, Math.min(blob.size, from + length)).arrayBuffer());
}

function readEndRecord(tail, tailOffset) {
	let at = -1;
	for (let i = tail.byteLength - 22; i >= 0; i--) {
		if (tail.getUint32(i, true) === END_RECORD && i + 22 + tail.getUint16(i + 20, true) <= tail.byteLength) {
			at = i;
			break;
		}
	}
	if (at < 0) throw new ZipFormatError("no zip end of central directory record: the archive is truncated or not a zip");
	if (tail.getUint16(at + 4, true) !== 0 || tail.getUint16(at + 6, true) !== 0) {
		throw new ZipFormatError("the zip archive is split over several files");
	}
	const count = tail.getUint16(at + 10, true);
	const size = tail.getUint32(at + 12, true);
	const offset = tail.getUint32(at + 16, true);
	if (count !== 0xffff && size !== UINT32_MAX && offset !== UINT32_MAX) return { offset, size, count };
	const locator = at - 20;
	if (locator < 0 || tail.getUint32(locator, true) !== ZIP64_LOCATOR) {
		throw new ZipFormatError("the zip64 end of central directory locator is missing");
	}
	const zip64EndRecordAt = Number(tail.getBigUint64(locator + 8, true));
	if (zip64EndRecordAt + ZIP64_END_RECORD_BYTES > tailOffset + at) {
		throw new ZipFormatError("the zip64 end record lies past the end record");
	}
	return { zip64EndRecordAt };
}

function readZip64EndRecord(record) {
	need(record, 0, ZIP64_END_RECORD_BYTES, "zip64 end record");
	if (record.getUint32(0, true) !== ZIP64_END_RECORD) throw new ZipFormatError("the zip64 end record is missing");
	return {
		count: Number(record.getBigUint64(32, true)),
		size: Number(record.getBigUint64(40, true)),
		offset: Number(record.getBigUint64(48, true)),
	};
}

/** Code page 437's characters for bytes 0x80 to 0xff, the format's default for names without the UTF-8 flag. */
const CP437_HIGH =
	"ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u00a0";

function entryName(bytes, utf8Flag) {
	try {
		return new TextDecoder("utf-8", { fatal: !utf8Flag }).decode(bytes);
	} catch {
		return Array.from(bytes, (b) => (b < 0x80 ? String.fromCharCode(b) : CP437_HIGH[b - 0x80])).join("");
	}
}

function applyZip64Extra(entry, view, start, length) {
	for (let at = start; at + 4 <= start + length; ) {
		const id = view.getUint16(at, true);
		const size = view.getUint16(at + 2, true);
		if (id === 0x0001) {
			let field = at + 4;
			const next = () => {
				need(view, field, 8, "zip64 extra field");
				const value = Number(view.getBigUint64(field, true));
				field += 8;
				return value;
			};
			if (entry.size === UINT32_MAX) entry.size = next();
			if (entry.compressedSize === UINT32_MAX) entry.compressedSize = next();
			if (entry.localHeaderOffset === UINT32_MAX) entry.localHeaderOffset = next();
		}
		at += 4 + size;
	}
}

function readCentralDirectory(directory, count) {
	const bytes = new Uint8Array(directory.buffer, directory.byteOffset, directory.byteLength);
	const entries = [];
	let at = 0;
	for (let i = 0; i < count; i++) {
		need(directory, at, 46, "central directory");
		if (directory.getUint32(at, true) !== CENTRAL_HEADER) {
			throw new ZipFormatError(`the zip's central directory entry ${i} is malformed`);
		}
		const flags = directory.getUint16(at + 8, true);
		const nameLength = directory.getUint16(at + 28, true);
		const extraLength = directory.getUint16(at + 30, true);
		const commentLength = directory.getUint16(at + 32, true);
		need(directory, at + 46, nameLength + extraLength, "central directory");
		const entry = {
			name: entryName(bytes.subarray(at + 46, at + 46 + nameLength), (flags & 0x800) !== 0),
			method: directory.getUint16(at + 10, true),
			encrypted: (flags & 1) !== 0,
			crc32: directory.getUint32(at + 16, true),
			compressedSize: directory.getUint32(at + 20, true),
			size: directory.getUint32(at + 24, true),
			localHeaderOffset: directory.getUint32(at + 42, true),
		};
		applyZip64Extra(entry, directory, at + 46 + nameLength, extraLength);
		entries.push(entry);
		at += 46 + nameLength + extraLength + commentLength;
	}
	return entries;
}

/** Every entry the archive's central directory lists, reading only its tail and its directory. */
async function readEntries(archive) {
	const tailOffset = Math.max(0, archive.size - END_RECORD_SEARCH_BYTES);
	let directory = readEndRecord(await bytesAt(archive, tailOffset, archive.size - tailOffset), tailOffset);
	if ("zip64EndRecordAt" in directory) {
		directory = readZip64EndRecord(await bytesAt(archive, directory.zip64EndRecordAt, ZIP64_END_RECORD_BYTES));
	}
	return readCentralDirectory(await bytesAt(archive, directory.offset, directory.size), directory.count);
}

function entryDataOffset(localHeader, entry) {
	need(localHeader, 0, LOCAL_HEADER_BYTES, `local header of ${entry.name}`);
	if (localHeader.getUint32(0, true) !== LOCAL_HEADER) {
		throw new ZipFormatError(`the zip's entry ${entry.name} has no local header where the directory says`);
	}
	return (
		entry.localHeaderOffset + LOCAL_HEADER_BYTES + localHeader.getUint16(26, true) + localHeader.getUint16(28, true)
	);
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

/** Passes the bytes through, refusing more bytes than the directory states, another length or another CRC-32. */
function checked(entry) {
	let crc = 0xffffffff;
	let length = 0;
	const damaged = (why) => new VoiceArchiveError(`The archive's ${entry.name} is damaged: ${why}`);
	return new TransformStream({
		transform(chunk, controller) {
			length += chunk.length;
			if (length > entry.size) throw damaged(`it holds more than its stated ${entry.size} bytes`);
			for (let i = 0; i < chunk.length; i++) crc = CRC_TABLE[(crc ^ chunk[i]) & 0xff] ^ (crc >>> 8);
			controller.enqueue(chunk);
		},
		flush() {
			if (length !== entry.size) throw damaged(`${length} bytes where ${entry.size} are stated`);
			if ((crc ^ 0xffffffff) >>> 0 !== entry.crc32) throw damaged("its CRC-32 does not match");
		},
	});
}

async function drain(stream) {
	const reader = stream.getReader();
	while (!(await reader.read()).done) {}
}

/** The entry's bytes as a Blob (a slice of the archive when stored), checked against its CRC-32. */
async function extract(archive, entry) {
	const start = entryDataOffset(await bytesAt(archive, entry.localHeaderOffset, LOCAL_HEADER_BYTES), entry);
	if (start + entry.compressedSize > archive.size) {
		throw new VoiceArchiveError(`The archive is truncated: ${entry.name} runs past its end`);
	}
	const data = archive.slice(start, start + entry.compressedSize);
	if (entry.method === STORED) {
		await drain(data.stream().pipeThrough(checked(entry)));
		return data;
	}
	let inflate;
	try {
		inflate = new DecompressionStream("deflate-raw");
	} catch {
		// Browsers before 2023 (Safari 16.3, Firefox 112) have no DecompressionStream, or none for raw deflate.
		throw new VoiceArchiveError(
			`This browser cannot inflate the archive's ${entry.name} (it has no DecompressionStream for deflate-raw): use a current browser, or extract the archive and pick its files`,
		);
	}
	const inflated = data.stream().pipeThrough(inflate).pipeThrough(checked(entry));
	try {
		return await new Response(inflated).blob();
	} catch (error) {
		if (error instanceof VoiceArchiveError) throw error;
		throw new VoiceArchiveError(`The archive's ${entry.name} cannot be inflated: ${error.message}`);
	}
}

/** An entry's own name. Windows tools (PowerShell's Compress-Archive) write `\` between folders, against the format. */
const baseName = (name) => name.slice(Math.max(name.lastIndexOf("/"), name.lastIndexOf("\\")) + 1);
const lower = (name) => name.toLowerCase();
const listed = (entries) => entries.map((e) => e.name).join(", ");
/** macOS's `__MACOSX/` copies (resource forks) and hidden files such as `.DS_Store`. */
const isHidden = (entry) => entry.name.startsWith("__MACOSX/") || baseName(entry.name).startsWith(".");
/** RVC writes `trained_*.index` (the clustering alone, with no features in it) before `added_*.index`, the one used. */
const isTrainedOnly = (entry) => lower(baseName(entry.name)).startsWith("trained_");
/** RVC's training checkpoints (G_2333.pth, D_2333.pth) are not the voice: the small inference model is. */
const isTrainingCheckpoint = (entry) => /^[GD]_\d+\.pth$/i.test(baseName(entry.name));
/** A `torch.save` checkpoint's pickle: the file is a `.pth` itself, not an archive of one. */
const isTorchPickle = (name) => name === "data.pkl" || /^[^/]+\/data\.pkl$/.test(name);

function named(candidates, wanted, what) {
	const byName = candidates.filter((e) => baseName(e.name) === wanted);
	const match = candidates.find((e) => e.name === wanted) ?? (byName.length === 1 ? byName[0] : undefined);
	if (!match) {
		throw new VoiceArchiveError(`The archive holds no ${what} named ${wanted} (its ${what}s: ${listed(candidates)})`);
	}
	return match;
}

function pickModel(candidates, wanted) {
	if (wanted !== undefined) return named(candidates, wanted, "model");
	const voices = candidates.filter((e) => !isTrainingCheckpoint(e));
	if (voices.length === 1) return voices[0];
	if (candidates.length === 0) throw new VoiceArchiveError("The archive holds no model (.pth or .onnx)");
	if (voices.length === 0) {
		throw new VoiceArchiveError(
			`The archive holds only RVC training checkpoints (${listed(candidates)}), not the voice's inference model`,
		);
	}
	throw new VoiceArchiveError(`The archive holds several models (${listed(voices)}): name the one to use`);
}

function pickIndex(candidates, wanted) {
	if (wanted === false) return undefined;
	if (wanted !== undefined) return named(candidates, wanted, "index");
	const usable = candidates.filter((e) => !isTrainedOnly(e));
	if (usable.length <= 1) return usable[0];
	throw new VoiceArchiveError(`The archive holds several indexes (${listed(usable)}): name the one to use`);
}

function skipReason(entry) {
	if (entry.name.endsWith("/")) return "a folder";
	if (isHidden(entry)) return "a hidden or macOS file";
	if (isTrainedOnly(entry)) return "RVC's trained_ index, which holds no features (its added_ index is the one used)";
	if (lower(entry.name).endsWith(INDEX_EXTENSION)) return "another index";
	if (MODEL_EXTENSIONS.some((ext) => lower(entry.name).endsWith(ext))) return "another model";
	return "not a model or an index";
}

function checkUsable(entry, role) {
	if (entry.encrypted) throw new VoiceArchiveError(`The archive's ${entry.name} is encrypted: extract it first`);
	if (entry.method !== STORED && entry.method !== DEFLATED) {
		throw new VoiceArchiveError(
			`The archive's ${entry.name} is compressed with a method this reader does not take (${entry.method}; stored and deflate only): extract it first`,
		);
	}
	const limit = VOICE_FILE_LIMITS[role];
	if (entry.size > limit) {
		throw new VoiceArchiveError(
			`The archive's ${entry.name} is ${entry.size} bytes, over the ${role} limit of ${limit}`,
		);
	}
}

/** The archive's entries, its model and index candidates; refuses a checkpoint given as an archive. */
async function candidatesOf(archive) {
	const entries = await readEntries(archive);
	if (entries.some((e) => isTorchPickle(e.name))) {
		throw new VoiceArchiveError(
			"This is an RVC checkpoint (.pth) itself, not an archive of one: upload it as the model",
		);
	}
	const files = entries.filter((e) => !e.name.endsWith("/") && !isHidden(e));
	return {
		entries,
		models: files.filter((e) => MODEL_EXTENSIONS.some((ext) => lower(e.name).endsWith(ext))),
		indexes: files.filter((e) => lower(e.name).endsWith(INDEX_EXTENSION)),
	};
}

async function withZipErrors(work) {
	try {
		return await work();
	} catch (error) {
		if (error instanceof ZipFormatError) throw new VoiceArchiveError(`The archive cannot be read: ${error.message}`);
		throw error;
	}
}

/**
 * The model and index of a voice published as a zip: `{ model, index?, skipped }`, where model and index are
 * `{ source: Blob, fileName, entry }`. `options.model` / `options.index` name an entry when the archive holds several
 * (`index: false` for none). Refuses, naming the entries, what it cannot decide or read.
 */
export function readVoiceArchive(archive, options = {}) {
	return withZipErrors(async () => {
		const { entries, models, indexes } = await candidatesOf(archive);
		const model = pickModel(models, options.model);
		const index = pickIndex(indexes, options.index);
		checkUsable(model, "model");
		if (index) checkUsable(index, "index");
		const file = async (entry) => ({
			source: await extract(archive, entry),
			fileName: baseName(entry.name),
			entry: entry.name,
		});
		return {
			model: await file(model),
			...(index ? { index: await file(index) } : {}),
			skipped: entries.filter((e) => e !== model && e !== index).map((e) => ({ entry: e.name, reason: skipReason(e) })),
		};
	});
}

/**
 * What a picked archive offers to choose from, from its directory alone: the models (RVC's training checkpoints left
 * out) and the indexes (RVC's trained_ ones left out), by path. Refuses what `readVoiceArchive` would refuse before
 * choosing.
 */
export function voiceArchiveChoices(archive) {
	return withZipErrors(async () => {
		const { models, indexes } = await candidatesOf(archive);
		const voices = models.filter((e) => !isTrainingCheckpoint(e));
		return {
			models: (voices.length > 0 ? voices : models).map((e) => e.name),
			indexes: indexes.filter((e) => !isTrainedOnly(e)).map((e) => e.name),
		};
	});
}

/**
 * Whether a picked file is to be read as a voice's archive: one named `.zip` (so that a damaged one is refused as an
 * archive), or one that starts like a zip and is not a PyTorch checkpoint (which is a zip too) whatever its name.
 */
export async function isVoiceArchive(file) {
	if (lower(file.name ?? "").endsWith(".zip")) return true;
	const head = new Uint8Array(await file.slice(0, 4).arrayBuffer());
	if (!(head[0] === 0x50 && head[1] === 0x4b && head[2] === 0x03 && head[3] === 0x04)) return false;
	const entries = await readEntries(file).catch(() => null);
	return entries !== null && !entries.some((e) => isTorchPickle(e.name));
}
