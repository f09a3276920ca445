import type { ByteSource } from "./probe/byte-source.ts";

/** A `ByteSource` over one R2 object: a HEAD for the size, then one ranged GET per read. Null when there is no object. */
export async function r2ByteSource(bucket: R2Bucket, key: string): Promise<ByteSource | null> {
	const head = await bucket.head(key);
	if (!head) return null;
	return {
		size: head.size,
		async read(offset, length) {
			const object = await bucket.get(key, { range: { offset, length } });
			// The object vanished mid-probe (deleted meanwhile): an I/O error, so the message is retried and then finds the file deleted.
			if (!object) throw new Error(`R2 object ${key} disappeared while it was being read`);
			return new Uint8Array(await object.arrayBuffer());
		},
	};
}
