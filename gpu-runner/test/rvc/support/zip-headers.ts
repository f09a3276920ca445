/**
 * The fixed-size records of a zip archive (PKWARE APPNOTE 4.3), for tests that build archives no zip tool would
 * write: sizes that lie, tens of thousands of entries, a huge stored entry left as a hole of a sparse file. Names and
 * data follow each header as the caller lays them out; the readers under test are `src/contracts/zip-directory.ts`
 * and the runner's `zip-archive.ts`.
 */

export interface EntryFields {
	/** 0 stored, 8 deflated. */
	method?: number;
	crc?: number;
	compressedSize?: number;
	size?: number;
	nameLength: number;
}

/** A local file header (30 bytes; its name follows). */
export function localHeader(entry: EntryFields): Buffer {
	const header = Buffer.alloc(30);
	header.writeUInt32LE(0x04034b50, 0);
	header.writeUInt16LE(20, 4);
	header.writeUInt16LE(entry.method ?? 0, 8);
	header.writeUInt32LE((entry.crc ?? 0) >>> 0, 14);
	header.writeUInt32LE(entry.compressedSize ?? 0, 18);
	header.writeUInt32LE(entry.size ?? 0, 22);
	header.writeUInt16LE(entry.nameLength, 26);
	return header;
}

/** A central directory header (46 bytes; its name follows) for an entry whose local header is at `localOffset`. */
export function centralHeader(entry: EntryFields & { localOffset?: number }): Buffer {
	const header = Buffer.alloc(46);
	header.writeUInt32LE(0x02014b50, 0);
	header.writeUInt16LE(20, 4);
	header.writeUInt16LE(20, 6);
	header.writeUInt16LE(entry.method ?? 0, 10);
	header.writeUInt32LE((entry.crc ?? 0) >>> 0, 16);
	header.writeUInt32LE(entry.compressedSize ?? 0, 20);
	header.writeUInt32LE(entry.size ?? 0, 24);
	header.writeUInt16LE(entry.nameLength, 28);
	header.writeUInt32LE(entry.localOffset ?? 0, 42);
	return header;
}

/** The end of central directory record (22 bytes): `count` entries in `size` bytes of directory at `offset`. */
export function endRecord(directory: { count: number; size: number; offset: number }): Buffer {
	const record = Buffer.alloc(22);
	record.writeUInt32LE(0x06054b50, 0);
	record.writeUInt16LE(directory.count, 8);
	record.writeUInt16LE(directory.count, 10);
	record.writeUInt32LE(directory.size, 12);
	record.writeUInt32LE(directory.offset, 16);
	return record;
}
