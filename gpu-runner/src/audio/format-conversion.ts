/** Bring a decoded stream to the format an engine asked for: channel layout first (cheaper to resample mono), then rate. */
import { type AudioBlock, type PcmFormat, remapChannels } from "./pcm.ts";
import { resampleStream } from "./resampler.ts";

export function convertToFormat(blocks: AsyncIterable<AudioBlock>, target: PcmFormat): AsyncIterable<AudioBlock> {
	async function* remapped(): AsyncGenerator<AudioBlock> {
		for await (const block of blocks) yield remapChannels(block, target.channels);
	}
	return resampleStream(remapped(), target.sampleRate);
}
