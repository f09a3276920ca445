/**
 * MP3 test streams. `encodeMp3` runs a real encoder (lamejs, a JavaScript port of LAME) over a tone. `makeMp3Frames`
 * writes valid Layer III frames of silence (zero side information) at chosen bitrates, so streams with exactly known
 * frame counts can be built for every header variant: Xing/Info with a LAME tag, VBRI, none, ID3v2 with a footer,
 * ID3v1, MPEG-2 and MPEG-2.5.
 */
import { Mp3Encoder } from "@breezystack/lamejs";
import { asciiBytes, concatBytes, sineChannels, toInt } from "./pcm.ts";

export function encodeMp3(o: { sampleRate: number; channels: 1 | 2; frames: number; kbps: number }): Uint8Array {
	const encoder = new Mp3Encoder(o.channels, o.sampleRate, o.kbps);
	const pcm = sineChannels(o.frames, o.sampleRate, o.channels).map((c) => Int16Array.from(c, (x) => toInt(x, 16)));
	const parts: Uint8Array[] = [];
	for (let i = 0; i < o.frames; i += 1152) {
		const left = (pcm[0] as Int16Array).subarray(i, i + 1152);
		const right = (pcm[1] ?? (pcm[0] as Int16Array)).subarray(i, i + 1152);
		parts.push(new Uint8Array(encoder.encodeBuffer(left, right)));
	}
	parts.push(new Uint8Array(encoder.flush()));
	return concatBytes(parts);
}

type Version = "1" | "2" | "2.5";
const VERSION_BITS: Record<Version, number> = { "1": 3, "2": 2, "2.5": 0 };
const RATES: Record<Version, number[]> = {
	"1": [44100, 48000, 32000],
	"2": [22050, 24000, 16000],
	"2.5": [11025, 12000, 8000],
};
const KBPS_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const KBPS_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160];

export const samplesPerFrame = (version: Version) => (version === "1" ? 1152 : 576);

export interface Mp3FramesOptions {
	version: Version;
	sampleRate: number;
	channels: 1 | 2;
	/** Bitrate of each audio frame, in kbps (one entry per frame). */
	bitrates: number[];
	/** Put a Xing ("Xing" for VBR, "Info" for CBR) header frame first; `lame` adds a LAME tag with delay/padding. */
	xing?: { id: "Xing" | "Info"; lame?: { delay: number; padding: number }; frames?: number };
	vbri?: boolean;
	/** Prepend an ID3v2 tag with `size` bytes of body; version 4 with `footer` adds the 10-byte footer. */
	id3v2?: { size: number; footer?: boolean };
	id3v1?: boolean;
	crc?: boolean;
}

class FrameWriter {
	readonly o: Mp3FramesOptions;
	#residue = 0;
	constructor(options: Mp3FramesOptions) {
		this.o = options;
	}

	frame(kbps: number): Uint8Array {
		const { version, sampleRate, channels } = this.o;
		const table = version === "1" ? KBPS_V1 : KBPS_V2;
		const bitrateIndex = table.indexOf(kbps);
		const rateIndex = RATES[version].indexOf(sampleRate);
		if (bitrateIndex < 1 || rateIndex < 0)
			throw new Error(`no MPEG-${version} frame at ${kbps} kbps / ${sampleRate} Hz`);
		const exact = ((version === "1" ? 144_000 : 72_000) * kbps) / sampleRate;
		// Padding slots keep the stream on its nominal bitrate: pad whenever the fractional parts add up to a byte.
		this.#residue += exact - Math.floor(exact);
		const padding = this.#residue >= 1 ? 1 : 0;
		this.#residue -= padding;
		const bytes = new Uint8Array(Math.floor(exact) + padding);
		bytes[0] = 0xff;
		bytes[1] = 0xe0 | (VERSION_BITS[version] << 3) | (0b01 << 1) | (this.o.crc ? 0 : 1);
		bytes[2] = (bitrateIndex << 4) | (rateIndex << 2) | (padding << 1);
		bytes[3] = channels === 1 ? 0xc0 : 0x00;
		return bytes;
	}
}

function id3v2(size: number, footer: boolean): Uint8Array {
	const syncsafe = [21, 14, 7, 0].map((shift) => (size >> shift) & 0x7f);
	const header = Uint8Array.from([...asciiBytes("ID3"), 4, 0, footer ? 0x10 : 0, ...syncsafe]);
	const parts = [header, new Uint8Array(size)];
	if (footer) parts.push(Uint8Array.from([...asciiBytes("3DI"), 4, 0, 0x10, ...syncsafe]));
	return concatBytes(parts);
}

const be32 = (v: number) => [v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff];

export function makeMp3Frames(o: Mp3FramesOptions): Uint8Array {
	const writer = new FrameWriter(o);
	const audio = o.bitrates.map((kbps) => writer.frame(kbps));
	const audioBytes = audio.reduce((n, f) => n + f.byteLength, 0);
	const parts: Uint8Array[] = [];
	if (o.id3v2) parts.push(id3v2(o.id3v2.size, o.id3v2.footer ?? false));
	if (o.xing || o.vbri) {
		const headerFrame = writer.frame(o.version === "1" ? 128 : 64);
		const sideInfo = o.version === "1" ? (o.channels === 1 ? 17 : 32) : o.channels === 1 ? 9 : 17;
		const frames = o.xing?.frames ?? audio.length;
		if (o.xing) {
			const fields = [...asciiBytes(o.xing.id), ...be32(0x0f), ...be32(frames), ...be32(audioBytes)];
			fields.push(...Array.from({ length: 100 }, (_, i) => Math.floor((i * 256) / 100)), ...be32(60));
			if (o.xing.lame) {
				const { delay, padding } = o.xing.lame;
				const lame = new Uint8Array(36);
				lame.set(asciiBytes("LAME3.100"), 0);
				lame.set([delay >> 4, ((delay & 0x0f) << 4) | (padding >> 8), padding & 0xff], 21);
				fields.push(...lame);
			}
			headerFrame.set(fields, 4 + (o.crc ? 2 : 0) + sideInfo);
		} else {
			headerFrame.set([...asciiBytes("VBRI"), 0, 1, 0, 0, 0, 75, ...be32(audioBytes), ...be32(frames)], 36);
		}
		parts.push(headerFrame);
	}
	parts.push(...audio);
	if (o.id3v1) parts.push(concatBytes([asciiBytes("TAG"), new Uint8Array(125)]));
	return concatBytes(parts);
}
