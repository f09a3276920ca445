// A voice file recognised from its first bytes, never from its name: the page's copy of
// `src/contracts/voice-file-kinds.ts` (plain JavaScript, no build step), so that a wrong file is refused before the
// voice is registered, in the SDK's and the API's words. The API's check on upload stays the authority; this one
// spares a registration that would only be deleted again. `test/node/playground-voice-file-kinds.test.ts` holds both
// to the same answers on the same bytes. So for each role's largest file (`VOICE_LIMITS.maxBytes` in
// `src/contracts/voices.ts`), which the API checks when the voice is registered.

/** Bytes enough for every check here. */
export const VOICE_FILE_HEAD_BYTES = 64;

/** What each role accepts, as recognised from the bytes. */
export const VOICE_FILE_KINDS = {
	model: ["rvc_checkpoint", "onnx"],
	index: ["faiss_index"],
	image: ["png", "jpeg", "webp"],
	sample: ["wav", "mp3", "flac"],
};

export const VOICE_FILE_DESCRIPTIONS = {
	model: "an RVC checkpoint (.pth) or an RVC synthesizer exported to ONNX",
	index: "a faiss feature index (.index) as RVC's training writes it",
	image: "a PNG, JPEG or WebP image",
	sample: "a WAV, MP3 or FLAC recording",
};

/** The four-character codes faiss files start with: `IwFl` for RVC's `IVF…,Flat`, `IxF2` / `IxFI` for `Flat`. */
const FAISS_INDEX_CODES = new Set(["IwFl", "IxF2", "IxFI"]);

const ascii = (bytes, start, end) => String.fromCharCode(...bytes.subarray(start, Math.min(end, bytes.length)));

const hasZipSignature = (bytes) =>
	bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 0x03 && bytes[3] === 0x04;

/** A protobuf varint at `offset`; null when it runs past the end or is longer than 10 bytes. */
function protobufVarint(bytes, offset) {
	let value = 0;
	for (let i = 0; i < 10 && offset + i < bytes.length; i++) {
		const byte = bytes[offset + i];
		value += (byte & 0x7f) * 2 ** (7 * i);
		if ((byte & 0x80) === 0) return { value, next: offset + i + 1 };
	}
	return null;
}

/** The start of an ONNX `ModelProto`: `ir_version` first, then top-level fields for as far as the head reaches. */
function looksLikeOnnxHead(bytes) {
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
function isMpegFrameHeader(bytes, offset) {
	const [a, b, c] = [bytes[offset], bytes[offset + 1], bytes[offset + 2]];
	if (a !== 0xff || b === undefined || c === undefined || (b & 0xe0) !== 0xe0) return false;
	return ((b >> 3) & 3) !== 1 && ((b >> 1) & 3) !== 0 && c >> 4 !== 0xf && ((c >> 2) & 3) !== 3;
}

/** What the bytes (a Uint8Array) are, among every kind any role accepts; null when none. */
export function recogniseVoiceFile(head) {
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
export function voiceFileKindFor(role, head) {
	const kind = recogniseVoiceFile(head);
	return kind !== null && VOICE_FILE_KINDS[role].includes(kind) ? kind : null;
}

/**
 * The files (by role) whose first bytes are not what their role takes, each as the SDK says it: a `message` for the
 * whole and a field problem (`files.<role>`) to show beside the file. An empty file is refused by its size
 * (`voiceFileSizeProblems`), as the API refuses it.
 */
export async function voiceFileProblems(files) {
	const problems = [];
	for (const [role, file] of Object.entries(files)) {
		const head = new Uint8Array(await file.slice(0, VOICE_FILE_HEAD_BYTES).arrayBuffer());
		if (head.length === 0 || voiceFileKindFor(role, head)) continue;
		problems.push({
			role,
			message: `The ${role} file is not ${VOICE_FILE_DESCRIPTIONS[role]} (recognised by its bytes, not its name): ${file.name}`,
			field: { field: `files.${role}`, message: `must be ${VOICE_FILE_DESCRIPTIONS[role]}` },
		});
	}
	return problems;
}

const MB = 1_000_000;

/** The largest file of each role, in bytes: the API refuses to register a voice declaring a larger one. */
export const VOICE_FILE_MAX_BYTES = { model: 200 * MB, index: 1000 * MB, image: 10 * MB, sample: 50 * MB };

/**
 * The API's words for a file of `role` that is empty or over its limit (its field problem for
 * `files.<role>.size_bytes`), or undefined for a size it takes.
 */
const voiceFileSizeRefusal = (role, size) => {
	if (size === 0) return `must be at least 1 byte: the ${role} file is empty`;
	if (size > VOICE_FILE_MAX_BYTES[role]) {
		return `must be at most ${VOICE_FILE_MAX_BYTES[role]} bytes (${VOICE_FILE_MAX_BYTES[role] / MB} MB) for the ${role} file`;
	}
	return undefined;
};

/**
 * The files (by role) empty or larger than their role takes, each as the API refuses it when the voice is registered:
 * a `message` for the whole (the API's, with the file's name and size) and its field problem
 * (`files.<role>.size_bytes`).
 */
export function voiceFileSizeProblems(files) {
	const problems = [];
	for (const [role, file] of Object.entries(files)) {
		const refusal = voiceFileSizeRefusal(role, file.size);
		if (refusal === undefined) continue;
		const field = { field: `files.${role}.size_bytes`, message: refusal };
		problems.push({
			role,
			message: `Invalid ${field.field}: ${field.message} (${file.name} is ${file.size} bytes)`,
			field,
		});
	}
	return problems;
}
