/**
 * What probing reads from: random access to an object of known size. Production reads R2 with range GETs
 * (`r2-byte-source.ts`); tests use bytes in memory. Probing only ever asks for the few ranges it needs.
 */
export interface ByteSource {
	readonly size: number;
	/** Up to `length` bytes starting at `offset`; fewer only where the source ends. */
	read(offset: number, length: number): Promise<Uint8Array>;
}

export function memoryByteSource(bytes: Uint8Array): ByteSource {
	return {
		size: bytes.byteLength,
		read: async (offset, length) => bytes.subarray(offset, Math.min(bytes.byteLength, offset + length)),
	};
}
