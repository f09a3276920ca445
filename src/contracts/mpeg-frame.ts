/**
 * MPEG audio frame headers (ISO 11172-3 / 13818-3, and the unofficial MPEG 2.5): the tables that size a frame, and
 * what counts as the start of a stream. Shared by preprocessing and the runner's MP3 decoder, so that both begin at
 * the same frame of a file that starts with junk or in the middle of a frame.
 */
export interface MpegFrame {
	version: "1" | "2" | "2.5";
	layer: 1 | 2 | 3;
	bitrateKbps: number;
	sampleRate: number;
	/** Whole frame in bytes, header and padding included. */
	length: number;
	samplesPerFrame: number;
	channels: 1 | 2;
	crcProtected: boolean;
}

const BITRATES_KBPS: Record<string, readonly number[]> = {
	"1-1": [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
	"1-2": [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
	"1-3": [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
	"2-1": [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
	"2-2": [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
	"2-3": [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};
const SAMPLE_RATES: Record<MpegFrame["version"], readonly number[]> = {
	"1": [44100, 48000, 32000],
	"2": [22050, 24000, 16000],
	"2.5": [11025, 12000, 8000],
};

/** The frame whose 4-byte header starts at `at`, or null when those bytes are not a usable header. */
export function parseMpegFrame(b: Uint8Array, at: number): MpegFrame | null {
	const b1 = b[at + 1];
	const b2 = b[at + 2];
	const b3 = b[at + 3];
	if (b[at] !== 0xff || b1 === undefined || b2 === undefined || b3 === undefined || (b1 & 0xe0) !== 0xe0) return null;
	const versionBits = (b1 >> 3) & 0x03;
	const layerBits = (b1 >> 1) & 0x03;
	if (versionBits === 1 || layerBits === 0) return null;
	const version = versionBits === 3 ? "1" : versionBits === 2 ? "2" : "2.5";
	const layer = (4 - layerBits) as 1 | 2 | 3;
	const bitrateIndex = b2 >> 4;
	const rateIndex = (b2 >> 2) & 0x03;
	// Index 0 is "free format" (no stated bitrate, so frames cannot be sized from the header); 15 is forbidden.
	if (bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3) return null;
	const bitrateKbps = BITRATES_KBPS[`${version === "1" ? 1 : 2}-${layer}`]?.[bitrateIndex] as number;
	const sampleRate = SAMPLE_RATES[version][rateIndex] as number;
	const padding = (b2 >> 1) & 0x01;
	let length: number;
	let samplesPerFrame: number;
	if (layer === 1) {
		length = (Math.floor((12_000 * bitrateKbps) / sampleRate) + padding) * 4;
		samplesPerFrame = 384;
	} else if (layer === 2 || version === "1") {
		length = Math.floor((144_000 * bitrateKbps) / sampleRate) + padding;
		samplesPerFrame = 1152;
	} else {
		length = Math.floor((72_000 * bitrateKbps) / sampleRate) + padding;
		samplesPerFrame = 576;
	}
	return {
		version,
		layer,
		bitrateKbps,
		sampleRate,
		length,
		samplesPerFrame,
		channels: b3 >> 6 === 3 ? 1 : 2,
		crcProtected: (b1 & 0x01) === 0,
	};
}

/** Two frames belong to one stream when version, layer and sample rate agree. */
export const sameStream = (a: MpegFrame, b: MpegFrame) =>
	a.version === b.version && a.layer === b.layer && a.sampleRate === b.sampleRate;

/** Mean frame length of a constant-bitrate stream: padding bits make the lengths average to this exactly. */
export const meanFrameLength = (f: MpegFrame) =>
	((f.layer === 3 && f.version !== "1" ? 72_000 : 144_000) * f.bitrateKbps) / f.sampleRate;

/**
 * The frame at `at` when the next two frames follow it in the same stream, or it runs up to `audioEnd` (an index
 * in `b`; pass Infinity while more bytes may follow `b`). A lone 0xFFE sync in junk or audio data passes this
 * only by rare chance, so a stream is never started on a false header.
 */
export function confirmedFrame(b: Uint8Array, at: number, audioEnd: number): MpegFrame | null {
	const first = parseMpegFrame(b, at);
	if (!first) return null;
	let next = at + first.length;
	for (let i = 0; i < 2; i++) {
		if (next >= audioEnd) return first;
		if (next + 4 > b.byteLength) return i > 0 ? first : null;
		const following = parseMpegFrame(b, next);
		if (!following || !sameStream(first, following)) return null;
		next += following.length;
	}
	return first;
}
