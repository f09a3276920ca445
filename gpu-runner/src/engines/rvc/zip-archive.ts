/**
 * A read-only zip reader for files already in memory, enough for PyTorch's `torch.save` archives (entries
 * stored uncompressed, zip64 records when they are large) and any zip a tool re-packed with deflate. Every
 * offset and size is checked against the file's length, so a truncated or malformed file fails with a
 * `ZipArchiveError` instead of reading past the end; each entry's CRC-32 is checked when it is read.
 */
import { crc32, inflateRawSync } from "node:zlib";

export class ZipArchiveError extends Error {
	/** True when the file looks like a zip cut short (its end records or an entry run past the end of the file). */
	readonly truncated: boolean;

	constructor(message: string, truncated: boolean) {
		super(message);
		this.name = "ZipArchiveError";
		this.truncated = truncated;
	}
}

interface ZipEntry {
	method: number;
	crc: number;
	compressedSize: number;
	size: number;
	localHeaderOffset: number;
}

const LOCAL_HEADER = 0x04034b50;
const CENTRAL_HEADER = 0x02014b50;
const END_OF_CENTRAL_DIRECTORY = 0x06054b50;
const ZIP64_END_LOCATOR = 0x07064b50;
const ZIP64_END = 0x06064b50;
const UINT32_MAX = 0xffffffff;

/** True when the bytes start like a zip archive (a local file header). */
export function hasZipSignature(bytes: Uint8Array): boolean {
	return bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 0x03 && bytes[3] === 0x04;
}

export class ZipArchive {
	readonly #bytes: Uint8Array;
	readonly #view: DataView;
	readonly #entries = new Map<string, ZipEntry>();

	private constructor(bytes: Uint8Array) {
		this.#bytes = bytes;
		this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
	}

	static open(bytes: Uint8Array): ZipArchive {
		const archive = new ZipArchive(bytes);
		archive.#readCentralDirectory();
		return archive;
	}

	get names(): string[] {
		return [...this.#entries.keys()];
	}

	has(name: string): boolean {
		return this.#entries.has(name);
	}

	/** The entry's bytes (a view into the file when stored uncompressed). */
	read(name: string): Uint8Array {
		const entry = this.#entries.get(name);
		if (entry === undefined) throw new ZipArchiveError(`zip has no entry ${name}`, false);
		const at = entry.localHeaderOffset;
		this.#need(at, 30, `local header of ${name}`);
		if (this.#view.getUint32(at, true) !== LOCAL_HEADER)
			throw new ZipArchiveError(`zip entry ${name} has no local header at offset ${at}`, false);
		const start = at + 30 + this.#view.getUint16(at + 26, true) + this.#view.getUint16(at + 28, true);
		this.#need(start, entry.compressedSize, `data of ${name}`);
		const stored = this.#bytes.subarray(start, start + entry.compressedSize);
		let data: Uint8Array;
		if (entry.method === 0) data = stored;
		else if (entry.method === 8) {
			try {
				data = new Uint8Array(inflateRawSync(stored));
			} catch (error) {
				throw new ZipArchiveError(`zip entry ${name} does not inflate: ${(error as Error).message}`, false);
			}
		} else throw new ZipArchiveError(`zip entry ${name} uses compression method ${entry.method}`, false);
		if (data.length !== entry.size)
			throw new ZipArchiveError(`zip entry ${name} holds ${data.length} bytes, its header says ${entry.size}`, false);
		if (crc32(data) !== entry.crc) throw new ZipArchiveError(`zip entry ${name} fails its CRC-32 check`, false);
		return data;
	}

	#need(offset: number, length: number, what: string): void {
		if (offset < 0 || offset + length > this.#bytes.length) {
			throw new ZipArchiveError(
				`zip ${what} runs past the end of the file (${offset + length} > ${this.#bytes.length} bytes): truncated`,
				true,
			);
		}
	}

	#readCentralDirectory(): void {
		const view = this.#view;
		const length = this.#bytes.length;
		// The end record is the last 22 bytes plus a comment of at most 65535 bytes.
		let end = -1;
		for (let at = length - 22; at >= Math.max(0, length - 22 - 65535); at--) {
			if (view.getUint32(at, true) === END_OF_CENTRAL_DIRECTORY) {
				end = at;
				break;
			}
		}
		if (end < 0) {
			throw new ZipArchiveError(
				`no zip end-of-central-directory record in ${length} bytes: the archive is truncated or not a zip`,
				true,
			);
		}
		let count = view.getUint16(end + 10, true);
		let directorySize = view.getUint32(end + 12, true);
		let directoryOffset = view.getUint32(end + 16, true);
		if (count === 0xffff || directoryOffset === UINT32_MAX || directorySize === UINT32_MAX) {
			const locator = end - 20;
			if (locator < 0 || view.getUint32(locator, true) !== ZIP64_END_LOCATOR)
				throw new ZipArchiveError("zip64 end-of-central-directory locator missing", true);
			const zip64End = Number(view.getBigUint64(locator + 8, true));
			this.#need(zip64End, 56, "zip64 end record");
			if (view.getUint32(zip64End, true) !== ZIP64_END) throw new ZipArchiveError("zip64 end record missing", true);
			count = Number(view.getBigUint64(zip64End + 32, true));
			directorySize = Number(view.getBigUint64(zip64End + 40, true));
			directoryOffset = Number(view.getBigUint64(zip64End + 48, true));
		}
		this.#need(directoryOffset, directorySize, "central directory");
		let at = directoryOffset;
		const decoder = new TextDecoder();
		for (let i = 0; i < count; i++) {
			this.#need(at, 46, "central directory entry");
			if (view.getUint32(at, true) !== CENTRAL_HEADER)
				throw new ZipArchiveError(`zip central directory entry ${i} is malformed`, false);
			const nameLength = view.getUint16(at + 28, true);
			const extraLength = view.getUint16(at + 30, true);
			const commentLength = view.getUint16(at + 32, true);
			this.#need(at + 46, nameLength + extraLength, "central directory entry");
			const name = decoder.decode(this.#bytes.subarray(at + 46, at + 46 + nameLength));
			const entry: ZipEntry = {
				method: view.getUint16(at + 10, true),
				crc: view.getUint32(at + 16, true),
				compressedSize: view.getUint32(at + 20, true),
				size: view.getUint32(at + 24, true),
				localHeaderOffset: view.getUint32(at + 42, true),
			};
			this.#applyZip64Extra(entry, at + 46 + nameLength, extraLength);
			this.#entries.set(name, entry);
			at += 46 + nameLength + extraLength + commentLength;
		}
	}

	/** Replaces 0xffffffff sizes and offset with the zip64 extra field's 64-bit values, in the format's order. */
	#applyZip64Extra(entry: ZipEntry, start: number, length: number): void {
		const view = this.#view;
		for (let at = start; at + 4 <= start + length; ) {
			const id = view.getUint16(at, true);
			const size = view.getUint16(at + 2, true);
			if (id === 0x0001) {
				let field = at + 4;
				const next = (): number => {
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
}
