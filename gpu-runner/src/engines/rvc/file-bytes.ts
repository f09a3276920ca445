import { readFile } from "node:fs/promises";

/**
 * A file's bytes, as a plain Uint8Array over the memory `readFile` filled: `new Uint8Array(buffer)` would copy them,
 * holding a 200 MB model twice. A view, not the Buffer itself, so `slice` copies as a Uint8Array's does; it starts at
 * the Buffer's `byteOffset`, which is not 0 where Node handed out a slice of a shared pool.
 */
export async function readFileBytes(path: string): Promise<Uint8Array> {
	const buffer = await readFile(path);
	return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}
