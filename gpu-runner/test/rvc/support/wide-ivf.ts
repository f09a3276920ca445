/**
 * A faiss `IVF{nlist},Flat` index file of `dim`-wide vectors laid out as faiss writes one (`faiss-index.ts` has the
 * layout): `nlist` zero centroids in its flat L2 quantizer, list sizes in `full` form, and one vector in list 0. Only
 * the headers and the one vector are written; the zero centroids and list sizes between them are left as holes of a
 * sparse file, so a file of hundreds of MB takes a few kilobytes and milliseconds to make.
 */
import { open } from "node:fs/promises";

export async function writeSparseIvfFlat(path: string, dim: number, nlist: number): Promise<number> {
	const header = (view: DataView, at: number, ntotal: number): number => {
		view.setInt32(at, dim, true);
		view.setBigInt64(at + 4, BigInt(ntotal), true);
		view.setBigInt64(at + 12, 1n << 20n, true);
		view.setBigInt64(at + 20, 1n << 20n, true);
		view.setUint8(at + 28, 1); // trained
		view.setInt32(at + 29, 1, true); // L2
		return at + 33;
	};
	const ascii = (view: DataView, at: number, text: string): number => {
		for (let i = 0; i < text.length; i++) view.setUint8(at + i, text.charCodeAt(i));
		return at + text.length;
	};
	const head = new DataView(new ArrayBuffer(256));
	let at = ascii(head, 0, "IwFl");
	at = header(head, at, 1);
	head.setBigInt64(at, BigInt(nlist), true); // nlist
	head.setBigInt64(at + 8, 1n, true); // nprobe
	at = ascii(head, at + 16, "IxF2");
	at = header(head, at, nlist);
	head.setBigInt64(at, BigInt(nlist * dim), true);
	at += 8;
	const centroidsAt = at;
	at += nlist * dim * 4; // zero centroids: a hole
	const lists = new DataView(new ArrayBuffer(256));
	let l = 0;
	lists.setUint8(l, 0); // no direct map
	lists.setBigInt64(l + 1, 0n, true);
	l = ascii(lists, l + 9, "ilar");
	lists.setBigInt64(l, BigInt(nlist), true);
	lists.setBigInt64(l + 8, BigInt(dim * 4), true);
	l = ascii(lists, l + 16, "full");
	lists.setBigInt64(l, BigInt(nlist), true);
	l += 8;
	lists.setBigInt64(l, 1n, true); // list 0 holds the one vector; the other sizes are zeros: a hole
	const sizesAt = at + l;
	const tailAt = sizesAt + nlist * 8;
	const tail = new DataView(new ArrayBuffer(dim * 4 + 8));
	tail.setFloat32(0, 0.5, true); // the vector's first value; its id is 0
	const file = await open(path, "w");
	try {
		await file.write(new Uint8Array(head.buffer, 0, centroidsAt), 0, centroidsAt, 0);
		await file.write(new Uint8Array(lists.buffer, 0, l + 8), 0, l + 8, at);
		await file.write(new Uint8Array(tail.buffer), 0, tail.byteLength, tailAt);
	} finally {
		await file.close();
	}
	return tailAt + tail.byteLength;
}
