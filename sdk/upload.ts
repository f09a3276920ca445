/**
 * Request bodies for uploads, with progress. `fetch` has no upload progress events, so the bytes are fed through a
 * stream that counts them as the transport pulls them; with back-pressure that tracks what was sent closely. The
 * length is always known up front and sent as `Content-Length` (the storage address refuses bodies without one).
 */

/** Bytes in memory, a `Blob` (in Node, `fs.openAsBlob(path)` reads a file lazily), or a stream of known size. */
export type UploadSource = Blob | ArrayBuffer | ArrayBufferView | { stream: ReadableStream<Uint8Array>; size: number };

export interface UploadProgress {
	loaded: number;
	total: number;
}

export type ProgressListener = (progress: UploadProgress) => void;

const CHUNK_BYTES = 256 * 1024;

export function sizeOf(source: UploadSource): number {
	if (source instanceof Blob) return source.size;
	if (source instanceof ArrayBuffer) return source.byteLength;
	if (ArrayBuffer.isView(source)) return source.byteLength;
	return source.size;
}

function bytesOf(source: ArrayBuffer | ArrayBufferView): Uint8Array {
	return source instanceof ArrayBuffer
		? new Uint8Array(source)
		: new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
}

/** A stream of the source's bytes in chunks of at most 256 KiB, so progress moves in small steps. */
function streamOf(source: UploadSource): ReadableStream<Uint8Array> {
	if (source instanceof Blob) return source.stream();
	if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
		const bytes = bytesOf(source);
		let offset = 0;
		return new ReadableStream<Uint8Array>({
			pull(controller) {
				if (offset >= bytes.length) return controller.close();
				controller.enqueue(bytes.subarray(offset, offset + CHUNK_BYTES));
				offset += CHUNK_BYTES;
			},
		});
	}
	return source.stream;
}

export interface PreparedBody {
	body: BodyInit;
	/** Extra `fetch` init: Node needs `duplex: "half"` for a streamed request body. */
	init: Record<string, unknown>;
}

/**
 * The body to send. Without a listener the source goes as it is (a Blob or bytes: the fastest path). With one, it
 * goes through a counting stream; in Workers the stream is given its length with `FixedLengthStream`, elsewhere the
 * explicit `Content-Length` header does that.
 */
export function prepareBody(source: UploadSource, onProgress?: ProgressListener): PreparedBody {
	const total = sizeOf(source);
	// Browsers stream request bodies only over HTTP/2, and not all of them at all: there a Blob goes as it is, and
	// progress is reported when the upload ends (use XMLHttpRequest's upload events for a live bar in a page).
	const inBrowser = typeof (globalThis as { document?: unknown }).document !== "undefined";
	if ((!onProgress || inBrowser) && source instanceof Blob) return { body: source, init: {} };
	if ((!onProgress || inBrowser) && (source instanceof ArrayBuffer || ArrayBuffer.isView(source))) {
		return { body: bytesOf(source) as Uint8Array<ArrayBuffer>, init: {} };
	}
	let loaded = 0;
	const counted = streamOf(source).pipeThrough(
		new TransformStream<Uint8Array, Uint8Array>({
			transform(chunk, controller) {
				for (let offset = 0; offset < chunk.length; offset += CHUNK_BYTES) {
					const piece = chunk.subarray(offset, offset + CHUNK_BYTES);
					controller.enqueue(piece);
					loaded += piece.length;
					onProgress?.({ loaded, total });
				}
			},
		}),
	);
	const FixedLength = (globalThis as { FixedLengthStream?: new (length: number) => TransformStream }).FixedLengthStream;
	const body = FixedLength ? counted.pipeThrough(new FixedLength(total)) : counted;
	return { body, init: { duplex: "half" } };
}

/** The first `length` bytes of a source (to recognise a file before sending it); empty for a stream. */
export async function headOf(source: UploadSource, length: number): Promise<Uint8Array> {
	if (source instanceof Blob) return new Uint8Array(await source.slice(0, length).arrayBuffer());
	if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) return bytesOf(source).slice(0, length);
	return new Uint8Array(0);
}

/**
 * Bytes `start` to `end` of a source, for a part of a multipart upload. Blobs and bytes are sliced in place; a stream
 * is read on from where the previous part stopped, so its parts must be asked for in order.
 */
export function partReader(source: UploadSource): (start: number, end: number) => Promise<UploadSource> {
	if (source instanceof Blob) return async (start, end) => source.slice(start, end);
	if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
		const bytes = bytesOf(source);
		return async (start, end) => bytes.subarray(start, end);
	}
	const reader = source.stream.getReader();
	let pending: Uint8Array = new Uint8Array(0);
	return async (start, end) => {
		const part = new Uint8Array(end - start);
		let filled = 0;
		while (filled < part.length) {
			if (pending.length === 0) {
				const { done, value } = await reader.read();
				if (done) break;
				pending = value;
			}
			const take = Math.min(pending.length, part.length - filled);
			part.set(pending.subarray(0, take), filled);
			pending = pending.subarray(take);
			filled += take;
		}
		return part.subarray(0, filled);
	};
}
