/**
 * Recognises a voice file from its first bytes, never from its name, so that a wrong file is refused the moment it
 * is uploaded. Shared by the Worker (upload hooks), the SDK and CLI (a check before sending) and the admin tool.
 * The runner reads every file in full during validation; this is the quick first look.
 */
import { VOICE_FILE_KINDS, type VoiceFileRoleName } from "./voices.ts";
import { hasZipSignature } from "./zip-directory.ts";

/** Bytes enough for every check here. */
export const VOICE_FILE_HEAD_BYTES = 64;

/** The four-character codes faiss files start with: `IwFl` for RVC's `IVF…,Flat`, `IxF2` / `IxFI` for `Flat`. */
const FAISS_INDEX_CODES = new Set(["IwFl", "IxF2", "IxFI"]);

const ascii = (bytes: Uint8Array, start: number, end: number) =>
	String.fromCharCode(...bytes.subarray(start, Math.min(end, bytes.length)));

/** A protobuf varint at `offset`; null when it runs past the end or is longer than 10 bytes. */
function protobufVarint(bytes: Uint8Array, offset: number): { value: number; next: number } | null {
	let value = 0;
	for (let i = 0; i < 10 && offset + i < bytes.length; i++) {
		const byte = bytes[offset + i] as number;
		value += (byte & 0x7f) * 2 ** (7 * i);
		if ((byte & 0x80) === 0) return { value, next: offset + i + 1 };
	}
	return null;
}

/**
 * The start of an ONNX `ModelProto`: `ir_version` (field 1, varint) first, as every ONNX writer puts it, then
 * top-level fields of ModelProto's numbers and wire types for as far as the head reaches.
 */
function looksLikeOnnxHead(bytes: Uint8Array): boolean {
	const first = protobufVarint(bytes, 0);
	if (first?.value !== 8) return false;
	const version = protobufVarint(bytes, first.next);
	if (!version || version.value < 1 || version.value > 100) return false;
	let offset = version.next;
	while (offset < bytes.length) {
		const tag = protobufVarint(bytes, offset);
		if (!tag) return true;
		const field = Math.floor(tag.value / 8);
		const wireType = tag.value % 8;
		if (field < 1 || field > 25 || (wireType !== 0 && wireType !== 2)) return false;
		const value = protobufVarint(bytes, tag.next);
		if (!value) return true;
		offset = wireType === 0 ? value.next : value.next + value.value;
	}
	return true;
}

/** An MPEG audio frame header: sync, a defined version and layer, a bitrate and sample rate that exist. */
function isMpegFrameHeader(bytes: Uint8Array, offset: number): boolean {
	const [a, b, c] = [bytes[offset], bytes[offset + 1], bytes[offset + 2]];
	if (a !== 0xff || b === undefined || c === undefined || (b & 0xe0) !== 0xe0) return false;
	return ((b >> 3) & 3) !== 1 && ((b >> 1) & 3) !== 0 && c >> 4 !== 0xf && ((c >> 2) & 3) !== 3;
}

/** What the bytes are, among every kind any role accepts; null when none. */
export function recogniseVoiceFile(head: Uint8Array): string | null {
	if (hasZipSignature(head)) return "rvc_checkpoint";
	if (FAISS_INDEX_CODES.has(ascii(head, 0, 4))) return "faiss_index";
	if (ascii(head, 0, 8) === "\x89PNG\r\n\x1a\n") return "png";
	if (head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return "jpeg";
	if (ascii(head, 0, 4) === "RIFF" && ascii(head, 8, 12) === "WEBP") return "webp";
	if ((ascii(head, 0, 4) === "RIFF" || ascii(head, 0, 4) === "RF64") && ascii(head, 8, 12) === "WAVE") return "wav";
	if (ascii(head, 0, 4) === "fLaC") return "flac";
	if (ascii(head, 0, 3) === "ID3" || isMpegFrameHeader(head, 0)) return "mp3";
	if (looksLikeOnnxHead(head)) return "onnx";
	return null;
}

/** The kind for `role`, or null when the bytes are not something that role accepts. */
export function voiceFileKindFor(role: VoiceFileRoleName, head: Uint8Array): string | null {
	const kind = recogniseVoiceFile(head);
	return kind !== null && (VOICE_FILE_KINDS[role] as readonly string[]).includes(kind) ? kind : null;
}
