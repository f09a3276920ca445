/**
 * Recognises the model files an operator hands the admin tool by their bytes, never by their names:
 * - `rvc_checkpoint`: RVC's `.pth`, a PyTorch zip archive (local file header `PK\x03\x04`);
 * - `onnx`: an ONNX model, a protobuf `ModelProto` whose top-level fields parse and include a graph (field 7);
 * - `faiss_index`: a faiss index file, which starts with its type's four-character code (`IwFl` for RVC's
 *   `IVF…,Flat`, `IxF2` for `Flat`).
 * The runner reads each file fully before use; this only keeps an obviously wrong file out of the bucket.
 */
export type ModelFileKind = "rvc_checkpoint" | "onnx" | "faiss_index";

const FAISS_INDEX_CODES = new Set(["IwFl", "IxF2", "IxFI"]);

/** Reads a protobuf varint at `offset`; null when it runs past the end or is longer than 10 bytes. */
function varint(bytes: Uint8Array, offset: number): { value: number; next: number } | null {
	let value = 0;
	for (let i = 0; i < 10 && offset + i < bytes.length; i++) {
		const byte = bytes[offset + i] as number;
		value += (byte & 0x7f) * 2 ** (7 * i);
		if ((byte & 0x80) === 0) return { value, next: offset + i + 1 };
	}
	return null;
}

/** Walks the top-level fields of a protobuf message: true when they all parse and field 7 (`graph`) is present. */
function looksLikeOnnxModel(bytes: Uint8Array): boolean {
	let offset = 0;
	let hasGraph = false;
	while (offset < bytes.length) {
		const tag = varint(bytes, offset);
		if (!tag || tag.value < 8) return false;
		const field = Math.floor(tag.value / 8);
		const wireType = tag.value % 8;
		offset = tag.next;
		if (wireType === 0) {
			const value = varint(bytes, offset);
			if (!value) return false;
			offset = value.next;
		} else if (wireType === 2) {
			const length = varint(bytes, offset);
			if (!length || length.next + length.value > bytes.length) return false;
			offset = length.next + length.value;
			if (field === 7) hasGraph = true;
		} else if (wireType === 1 || wireType === 5) {
			offset += wireType === 1 ? 8 : 4;
		} else {
			return false;
		}
	}
	return hasGraph && offset === bytes.length;
}

export function recogniseModelFile(bytes: Uint8Array): ModelFileKind | null {
	const code = String.fromCharCode(...bytes.subarray(0, 4));
	if (code === "PK\x03\x04") return "rvc_checkpoint";
	if (FAISS_INDEX_CODES.has(code)) return "faiss_index";
	if (looksLikeOnnxModel(bytes)) return "onnx";
	return null;
}
