/** Write WAV bytes of any supported encoding in code, independently of the runner's own encoder. */
export type WavEncoding = { kind: "pcm"; bits: 8 | 16 | 24 | 32 } | { kind: "float"; bits: 32 | 64 };

export function makeWav(
	channels: Float32Array[],
	sampleRate: number,
	encoding: WavEncoding,
	options: { extensible?: boolean; extraChunk?: boolean; channelMask?: number } = {},
): Uint8Array {
	const frames = channels[0]?.length ?? 0;
	const bytesPerSample = encoding.bits / 8;
	const blockAlign = bytesPerSample * channels.length;
	const fmtSize = options.extensible ? 40 : 16;
	const extra = options.extraChunk ? 8 + 5 + 1 : 0; // odd-sized LIST chunk with its pad byte
	const dataBytes = frames * blockAlign;
	const buffer = new Uint8Array(12 + 8 + fmtSize + extra + 8 + dataBytes);
	const view = new DataView(buffer.buffer);
	let o = 0;
	const text = (s: string) => {
		for (const ch of s) buffer[o++] = ch.charCodeAt(0);
	};
	const u16 = (v: number) => {
		view.setUint16(o, v, true);
		o += 2;
	};
	const u32 = (v: number) => {
		view.setUint32(o, v, true);
		o += 4;
	};
	text("RIFF");
	u32(buffer.length - 8);
	text("WAVE");
	text("fmt ");
	u32(fmtSize);
	const tag = encoding.kind === "pcm" ? 1 : 3;
	u16(options.extensible ? 0xfffe : tag);
	u16(channels.length);
	u32(sampleRate);
	u32(sampleRate * blockAlign);
	u16(blockAlign);
	u16(encoding.bits);
	if (options.extensible) {
		u16(22);
		u16(encoding.bits);
		u32(options.channelMask ?? (channels.length === 2 ? 3 : 4));
		u16(tag);
		// rest of the KSDATAFORMAT GUID {xxxxxxxx-0000-0010-8000-00aa00389b71}
		for (const b of [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71])
			buffer[o++] = b;
	}
	if (options.extraChunk) {
		text("LIST");
		u32(5);
		text("abcde");
		o += 1;
	}
	text("data");
	u32(dataBytes);
	for (let i = 0; i < frames; i++) {
		for (const channel of channels) {
			const s = Math.max(-1, Math.min(1, channel[i] as number));
			if (encoding.kind === "float") {
				if (encoding.bits === 32) view.setFloat32(o, s, true);
				else view.setFloat64(o, s, true);
			} else if (encoding.bits === 8) view.setUint8(o, Math.round(s * 127) + 128);
			else if (encoding.bits === 16) view.setInt16(o, Math.round(s * 32767), true);
			else if (encoding.bits === 24) {
				const v = Math.round(s * 8388607);
				view.setUint8(o, v & 0xff);
				view.setUint8(o + 1, (v >> 8) & 0xff);
				view.setInt8(o + 2, v >> 16);
			} else view.setInt32(o, Math.round(s * 2147483647), true);
			o += bytesPerSample;
		}
	}
	return buffer;
}
