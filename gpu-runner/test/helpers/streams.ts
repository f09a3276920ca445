import type { AudioBlock } from "../../src/engines/engine.ts";

/** Split planar samples into blocks of `blockFrames`, as a decoder would yield them. */
export async function* blocksOf(
	channels: Float32Array[],
	sampleRate: number,
	blockFrames = 4096,
): AsyncGenerator<AudioBlock> {
	const total = channels[0]?.length ?? 0;
	for (let start = 0; start < total; start += blockFrames) {
		yield { sampleRate, channels: channels.map((c) => c.subarray(start, Math.min(total, start + blockFrames))) };
	}
}

export async function* bytesOf(bytes: Uint8Array, chunkBytes = 65_536): AsyncGenerator<Uint8Array> {
	for (let start = 0; start < bytes.length; start += chunkBytes) yield bytes.subarray(start, start + chunkBytes);
}

export { joinSamples } from "../../src/audio/pcm.ts";

/** Join a block stream back into whole channels (tests only: small signals). */
export async function collect(
	blocks: AsyncIterable<AudioBlock>,
): Promise<{ sampleRate: number; channels: Float32Array[] }> {
	const parts: AudioBlock[] = [];
	for await (const block of blocks) parts.push(block);
	const first = parts[0];
	if (!first) return { sampleRate: 0, channels: [] };
	const total = parts.reduce((n, b) => n + (b.channels[0]?.length ?? 0), 0);
	const channels = first.channels.map(() => new Float32Array(total));
	let offset = 0;
	for (const block of parts) {
		block.channels.forEach((c, i) => {
			(channels[i] as Float32Array).set(c, offset);
		});
		offset += block.channels[0]?.length ?? 0;
	}
	return { sampleRate: first.sampleRate, channels };
}
