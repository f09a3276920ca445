/**
 * The zip format's directory records (APPNOTE 6.3: end of central directory, its zip64 locator and record, central
 * directory headers with their zip64 extra field, local headers), parsed from `DataView`s. Shared by the runner's
 * checkpoint reader (a whole `.pth` in memory) and the SDK's voice-archive reader (which reads a `Blob` in pieces:
 * its tail, then the zip64 record if any, then the directory), so each reads only the bytes these functions ask for.
 * Every offset is checked against the view it reads; what does not fit is a `ZipFormatError`.
 */

export class ZipFormatError extends Error {
	/** True when the archive looks cut short (a record or an entry runs past the end of the file). */
	readonly truncated: boolean;

	constructor(message: string, truncated: boolean) {
		super(message);
		this.name = "ZipFormatError";
		this.truncated = truncated;
	}
}

export interface ZipEntry {
	name: string;
	/** 0 stored, 8 deflate; anything else is another method. */
	method: number;
	encrypted: boolean;
	crc32: number;
	compressedSize: number;
	size: number;
	localHeaderOffset: number;
}

/** Where the central directory is and how many entries it lists. */
export interface ZipDirectory {
	offset: number;
	size: number;
	count: number;
}

/** True when the bytes start like a zip archive (a local file header), as a `.pth` and a voice's `.zip` both do. */
export function hasZipSignature(bytes: Uint8Array): boolean {
	return bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 0x03 && bytes[3] === 0x04;
}

/** Whether a zip entry is a `torch.save` checkpoint's pickle: `<archive name>/data.pkl`, or `data.pkl` at the top. */
export const isTorchPickle = (name: string): boolean => name === "data.pkl" || /^[^/]+\/data\.pkl$/.test(name);

export const STORED = 0;
export const DEFLATED = 8;
/** Bytes a local header takes before its name and extra field. */
export const LOCAL_HEADER_BYTES = 30;
/** The end record (22 bytes) and the longest comment that may follow it: a tail this long holds the record. */
export const END_RECORD_SEARCH_BYTES = 22 + 0xffff;
/** The zip64 end record's fixed part. */
export const ZIP64_END_RECORD_BYTES = 56;

const LOCAL_HEADER = 0x04034b50;
const CENTRAL_HEADER = 0x02014b50;
const END_RECORD = 0x06054b50;
const ZIP64_LOCATOR = 0x07064b50;
const ZIP64_END_RECORD = 0x06064b50;
const UINT32_MAX = 0xffffffff;

function need(view: DataView, at: number, length: number, what: string): void {
	if (at < 0 || at + length > view.byteLength) {
		throw new ZipFormatError(`the zip's ${what} runs past the end of the file: the archive is truncated`, true);
	}
}

/**
 * Reads the end record from `tail`, the file's last bytes (at least `END_RECORD_SEARCH_BYTES` of them, or the whole
 * file), whose first byte is at `tailOffset` in the file. Returns the directory, or for a zip64 archive the offset of
 * the zip64 end record to pass to `readZip64EndRecord`.
 */
export function readEndRecord(tail: DataView, tailOffset: number): ZipDirectory | { zip64EndRecordAt: number } {
	let at = -1;
	for (let i = tail.byteLength - 22; i >= 0; i--) {
		if (tail.getUint32(i, true) === END_RECORD && i + 22 + tail.getUint16(i + 20, true) <= tail.byteLength) {
			at = i;
			break;
		}
	}
	if (at < 0)
		throw new ZipFormatError("no zip end of central directory record: the archive is truncated or not a zip", true);
	if (tail.getUint16(at + 4, true) !== 0 || tail.getUint16(at + 6, true) !== 0) {
		throw new ZipFormatError("the zip archive is split over several files", false);
	}
	const count = tail.getUint16(at + 10, true);
	const size = tail.getUint32(at + 12, true);
	const offset = tail.getUint32(at + 16, true);
	if (count !== 0xffff && size !== UINT32_MAX && offset !== UINT32_MAX) return { offset, size, count };
	const locator = at - 20;
	if (locator < 0 || tail.getUint32(locator, true) !== ZIP64_LOCATOR) {
		throw new ZipFormatError("the zip64 end of central directory locator is missing", true);
	}
	const zip64EndRecordAt = Number(tail.getBigUint64(locator + 8, true));
	if (zip64EndRecordAt + ZIP64_END_RECORD_BYTES > tailOffset + at) {
		throw new ZipFormatError("the zip64 end record lies past the end record", false);
	}
	return { zip64EndRecordAt };
}

/** The directory, from the zip64 end record's first `ZIP64_END_RECORD_BYTES` bytes. */
export function readZip64EndRecord(record: DataView): ZipDirectory {
	need(record, 0, ZIP64_END_RECORD_BYTES, "zip64 end record");
	if (record.getUint32(0, true) !== ZIP64_END_RECORD) throw new ZipFormatError("the zip64 end record is missing", true);
	return {
		count: Number(record.getBigUint64(32, true)),
		size: Number(record.getBigUint64(40, true)),
		offset: Number(record.getBigUint64(48, true)),
	};
}

/** Code page 437's characters for bytes 0x80 to 0xff (below them it is ASCII). */
const CP437_HIGH =
	"ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u00a0";

/**
 * A name as the entry states it: UTF-8 when its flag says so or when the bytes are valid UTF-8 (tools that write
 * UTF-8 without the flag), else code page 437, the format's default (read as Latin-1 its upper half would be control
 * characters and other letters: `é` is 0x82).
 */
function entryName(bytes: Uint8Array, utf8Flag: boolean): string {
	try {
		return new TextDecoder("utf-8", { fatal: !utf8Flag, ignoreBOM: false }).decode(bytes);
	} catch {
		return Array.from(bytes, (b) => (b < 0x80 ? String.fromCharCode(b) : CP437_HIGH[b - 0x80])).join("");
	}
}

/** Replaces sizes and the offset stated as 0xffffffff with the zip64 extra field's values, in the format's order. */
function applyZip64Extra(entry: ZipEntry, view: DataView, start: number, length: number): void {
	for (let at = start; at + 4 <= start + length; ) {
		const id = view.getUint16(at, true);
		const size = view.getUint16(at + 2, true);
		if (id === 0x0001) {
			let field = at + 4;
			const next = (): number => {
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

/** The entries of the central directory `directory` (its `size` bytes) lists. */
export function readCentralDirectory(directory: DataView, count: number): ZipEntry[] {
	const bytes = new Uint8Array(directory.buffer, directory.byteOffset, directory.byteLength);
	const entries: ZipEntry[] = [];
	let at = 0;
	for (let i = 0; i < count; i++) {
		need(directory, at, 46, "central directory");
		if (directory.getUint32(at, true) !== CENTRAL_HEADER) {
			throw new ZipFormatError(`the zip's central directory entry ${i} is malformed`, false);
		}
		const flags = directory.getUint16(at + 8, true);
		const nameLength = directory.getUint16(at + 28, true);
		const extraLength = directory.getUint16(at + 30, true);
		const commentLength = directory.getUint16(at + 32, true);
		need(directory, at + 46, nameLength + extraLength, "central directory");
		const entry: ZipEntry = {
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

/**
 * Where `entry`'s data starts in the file, from its local header's first `LOCAL_HEADER_BYTES` bytes (its name and
 * extra field, which follow, may differ in length from the central directory's).
 */
export function entryDataOffset(localHeader: DataView, entry: ZipEntry): number {
	need(localHeader, 0, LOCAL_HEADER_BYTES, `local header of ${entry.name}`);
	if (localHeader.getUint32(0, true) !== LOCAL_HEADER) {
		throw new ZipFormatError(`the zip's entry ${entry.name} has no local header where the directory says`, false);
	}
	return (
		entry.localHeaderOffset + LOCAL_HEADER_BYTES + localHeader.getUint16(26, true) + localHeader.getUint16(28, true)
	);
}
