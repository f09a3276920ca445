/**
 * A read-only zip reader for files already in memory, enough for PyTorch's `torch.save` archives (entries
 * stored uncompressed, zip64 records when they are large) and any zip a tool re-packed with deflate. Every
 * offset and size is checked against the file's length, so a truncated or malformed file fails with a
 * `ZipFormatError` instead of reading past the end; each entry's CRC-32 is checked when it is read.
 */
import { constants } from "node:buffer";
import { crc32, inflateRawSync } from "node:zlib";
import {
	DEFLATED,
	END_RECORD_SEARCH_BYTES,
	entryDataOffset,
	LOCAL_HEADER_BYTES,
	readCentralDirectory,
	readEndRecord,
	readZip64EndRecord,
	STORED,
	ZIP64_END_RECORD_BYTES,
	type ZipEntry,
	ZipFormatError,
} from "../../../../src/contracts/zip-directory.ts";

/**
 * The most entries an archive may list: a checkpoint has one per tensor storage and a few more (RVC's about 400; the
 * largest config read has some 2 600 tensors). A 200 MB file can list 3.8 million, which took 5 s and 870 MB to read.
 */
export const MAX_ENTRIES = 65_536;

export class ZipArchive {
	readonly #bytes: Uint8Array;
	readonly #entries = new Map<string, ZipEntry>();

	private constructor(bytes: Uint8Array) {
		this.#bytes = bytes;
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

	/**
	 * The entry's bytes (a view into the file when stored uncompressed). An entry that states more than `maxBytes` is
	 * refused before any of it is inflated: a few KB of deflate can state and hold gigabytes of zeros.
	 */
	read(name: string, maxBytes = Number.MAX_SAFE_INTEGER): Uint8Array {
		const entry = this.#entries.get(name);
		if (entry === undefined) throw new ZipFormatError(`zip has no entry ${name}`, false);
		if (entry.size > maxBytes)
			throw new ZipFormatError(
				`zip entry ${name} states ${entry.size} bytes, more than the ${maxBytes} it may hold`,
				false,
			);
		const start = entryDataOffset(this.#slice(entry.localHeaderOffset, LOCAL_HEADER_BYTES), entry);
		this.#need(start, entry.compressedSize, `data of ${name}`);
		const stored = this.#bytes.subarray(start, start + entry.compressedSize);
		let data: Uint8Array;
		if (entry.method === STORED) data = stored;
		else if (entry.method === DEFLATED) {
			try {
				// Stopped at its stated size: a small entry can inflate to gigabytes (a deflate bomb).
				const maxOutputLength = Math.min(Math.max(1, entry.size), constants.MAX_LENGTH);
				data = new Uint8Array(inflateRawSync(stored, { maxOutputLength }));
			} catch (error) {
				if ((error as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") {
					throw new ZipFormatError(`zip entry ${name} inflates past its stated ${entry.size} bytes`, false);
				}
				throw new ZipFormatError(`zip entry ${name} does not inflate: ${(error as Error).message}`, false);
			}
		} else throw new ZipFormatError(`zip entry ${name} uses compression method ${entry.method}`, false);
		if (data.length !== entry.size)
			throw new ZipFormatError(`zip entry ${name} holds ${data.length} bytes, its header says ${entry.size}`, false);
		if (crc32(data) !== entry.crc32) throw new ZipFormatError(`zip entry ${name} fails its CRC-32 check`, false);
		return data;
	}

	/** A view of `length` bytes from `offset`, cut at the end of the file (the parser checks what it needs). */
	#slice(offset: number, length: number): DataView {
		const start = Math.min(Math.max(0, offset), this.#bytes.length);
		return new DataView(
			this.#bytes.buffer,
			this.#bytes.byteOffset + start,
			Math.min(length, this.#bytes.length - start),
		);
	}

	#need(offset: number, length: number, what: string): void {
		if (offset < 0 || offset + length > this.#bytes.length) {
			throw new ZipFormatError(
				`zip ${what} runs past the end of the file (${offset + length} > ${this.#bytes.length} bytes): truncated`,
				true,
			);
		}
	}

	#readCentralDirectory(): void {
		const length = this.#bytes.length;
		const tailOffset = Math.max(0, length - END_RECORD_SEARCH_BYTES);
		let directory = readEndRecord(this.#slice(tailOffset, length - tailOffset), tailOffset);
		if ("zip64EndRecordAt" in directory) {
			directory = readZip64EndRecord(this.#slice(directory.zip64EndRecordAt, ZIP64_END_RECORD_BYTES));
		}
		// Before the directory is read: each entry costs an object and a name, and one takes 46 bytes of the file.
		if (directory.count > MAX_ENTRIES)
			throw new ZipFormatError(`zip lists ${directory.count} entries, at most ${MAX_ENTRIES} are read`, false);
		this.#need(directory.offset, directory.size, "central directory");
		for (const entry of readCentralDirectory(this.#slice(directory.offset, directory.size), directory.count)) {
			this.#entries.set(entry.name, entry);
		}
	}
}
