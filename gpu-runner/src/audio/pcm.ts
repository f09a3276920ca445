/** Planar float PCM helpers shared by the decoders, the format conversion and the encoder. */
import type { AudioBlock, PcmFormat } from "../engines/engine.ts";

export type { AudioBlock, PcmFormat };

export function blockFrames(block: AudioBlock): number {
	return block.channels[0]?.length ?? 0;
}

/** The pieces one after another, as one array (the piece itself where there is one). */
export function joinSamples(parts: readonly Float32Array[]): Float32Array {
	if (parts.length === 1) return parts[0] as Float32Array;
	const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
	let offset = 0;
	for (const p of parts) {
		out.set(p, offset);
		offset += p.length;
	}
	return out;
}

/** Frames that last `seconds` at `sampleRate`, rounded to the nearest frame. */
export function framesFor(seconds: number, sampleRate: number): number {
	return Math.round(seconds * sampleRate);
}

/** Keep only the first `maxFrames` frames of a stream; stops pulling from upstream once reached. */
export async function* takeFrames(blocks: AsyncIterable<AudioBlock>, maxFrames: number): AsyncGenerator<AudioBlock> {
	let remaining = maxFrames;
	if (remaining <= 0) return;
	for await (const block of blocks) {
		const frames = blockFrames(block);
		if (frames <= remaining) {
			remaining -= frames;
			yield block;
		} else {
			yield { sampleRate: block.sampleRate, channels: block.channels.map((c) => c.subarray(0, remaining)) };
			remaining = 0;
		}
		// Returning closes the upstream generators, which stops the download of the rest of the source.
		if (remaining === 0) return;
	}
}

/** Calls `onFrames` with the frame count of every block that passes through. */
export async function* countFrames(
	blocks: AsyncIterable<AudioBlock>,
	onFrames: (frames: number, block: AudioBlock) => void,
): AsyncGenerator<AudioBlock> {
	for await (const block of blocks) {
		onFrames(blockFrames(block), block);
		yield block;
	}
}

/**
 * Change the channel count: N→1 averages the channels, 1→N copies, N→M (other) keeps the first M channels
 * and fills missing ones with the average. Engines only ask for mono or the source's own layout.
 */
export function remapChannels(block: AudioBlock, channels: number): AudioBlock {
	const source = block.channels;
	if (source.length === channels) return block;
	const frames = blockFrames(block);
	const mean = new Float32Array(frames);
	const scale = 1 / source.length;
	for (const channel of source) {
		for (let i = 0; i < frames; i++) mean[i] = (mean[i] as number) + (channel[i] as number) * scale;
	}
	if (channels === 1) return { sampleRate: block.sampleRate, channels: [mean] };
	const out: Float32Array[] = [];
	for (let c = 0; c < channels; c++)
		out.push(source.length === 1 ? (c === 0 ? mean : mean.slice()) : (source[c] ?? mean.slice()));
	return { sampleRate: block.sampleRate, channels: out };
}
