/** Test tones: a few seconds of a sine per channel, as floats in [-1, 1]. Deterministic, so failures reproduce. */
export function sineChannels(frames: number, sampleRate: number, channels: number): Float64Array[] {
	return Array.from({ length: channels }, (_, channel) => {
		const out = new Float64Array(frames);
		const frequency = 220 * (channel + 1);
		for (let i = 0; i < frames; i++) out[i] = 0.5 * Math.sin((2 * Math.PI * frequency * i) / sampleRate);
		return out;
	});
}

export const toInt = (value: number, bits: number) => {
	const max = 2 ** (bits - 1) - 1;
	return Math.max(-max - 1, Math.min(max, Math.round(value * max)));
};

export function concatBytes(parts: Uint8Array[]): Uint8Array {
	const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
	let offset = 0;
	for (const part of parts) {
		out.set(part, offset);
		offset += part.byteLength;
	}
	return out;
}

export const asciiBytes = (text: string) => Uint8Array.from(text, (c) => c.charCodeAt(0));
