/** faiss index files written by tests, larger than the committed fixtures. */
import { closeSync, openSync, writeSync } from "node:fs";

/** A faiss `IxF2` (flat L2) file: header, the size prefix (a float count), then the vectors. */
export function writeFlatIndex(path: string, vectors: Float32Array, dim: number): void {
	const ntotal = vectors.length / dim;
	const header = Buffer.alloc(4 + 4 + 8 + 8 + 8 + 1 + 4 + 8);
	let at = header.write("IxF2", 0, "latin1");
	at = header.writeInt32LE(dim, at);
	at = header.writeBigInt64LE(BigInt(ntotal), at);
	at = header.writeBigInt64LE(1n << 20n, at);
	at = header.writeBigInt64LE(1n << 20n, at);
	at = header.writeUInt8(1, at);
	at = header.writeInt32LE(1, at);
	header.writeBigInt64LE(BigInt(vectors.length), at);
	const fd = openSync(path, "w");
	writeSync(fd, header);
	writeSync(fd, new Uint8Array(vectors.buffer, vectors.byteOffset, vectors.byteLength));
	closeSync(fd);
}
