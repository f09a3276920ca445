/**
 * Entry point of decoding: looks at the first bytes to learn the real format (the claimed MIME type and
 * even the preprocessing verdict are hints, the bytes are the truth), then streams through the matching
 * decoder (FLAC and MP3 also behind ID3v2 tags). Any decode failure surfaces as a `PermanentJobError` (corrupted or unsupported). Bytes that match no
 * magic number are searched for an MP3 stream, which is refused as corrupted when none starts near the beginning.
 */
import { corruptedSource, unsupportedFormat } from "../job-errors.ts";
import { ByteQueue } from "./byte-queue.ts";
import { decodeFlac, decodeMp3 } from "./compressed-decoders.ts";
import { flacChannelMask, watchFlacChannelMask } from "./flac-channel-mask.ts";
import { skipId3Tags } from "./mp3-stream-start.ts";
import type { AudioBlock } from "./pcm.ts";
import { replayThen } from "./replay.ts";
import { decodeWav } from "./wav-decoder.ts";

export type SourceFormat = "wav" | "flac" | "mp3";

const SNIFF_BYTES = 12;

/** Recognise a container by its magic bytes. */
export function sniffFormat(head: Uint8Array): SourceFormat | { unsupported: string } | undefined {
	const text = String.fromCharCode(...head.subarray(0, 4));
	if (text === "RIFF" || text === "RF64") return "wav";
	if (text === "fLaC") return "flac";
	if (text.startsWith("ID3")) return "mp3";
	// MPEG audio frame sync: 11 set bits, then a layer field that is not "reserved".
	if (head[0] === 0xff && ((head[1] ?? 0) & 0xe0) === 0xe0 && ((head[1] ?? 0) & 0x06) !== 0) return "mp3";
	if (text === "OggS") return { unsupported: "Ogg container" };
	if (text === "FORM") return { unsupported: "AIFF" };
	if (String.fromCharCode(...head.subarray(4, 8)) === "ftyp") return { unsupported: "MP4/M4A container" };
	return undefined;
}

/** The first `count` bytes of a stream (fewer if it is shorter), and the whole stream again from its start. */
async function peek(
	bytes: AsyncIterable<Uint8Array>,
	count: number,
): Promise<{ head: Uint8Array; stream: AsyncIterable<Uint8Array> }> {
	const iterator = bytes[Symbol.asyncIterator]();
	const head = new ByteQueue();
	const taken: Uint8Array[] = [];
	while (head.length < count) {
		const next = await iterator.next();
		if (next.done) break;
		head.push(next.value);
		taken.push(next.value);
	}
	return { head: head.read(Math.min(head.length, count)), stream: replayThen(taken, iterator) };
}

/** Decode a source byte stream into planar float blocks, whatever its format. */
export async function* decodeSource(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	const { head, stream } = await peek(bytes, SNIFF_BYTES);
	if (head.length === 0) throw corruptedSource("the source file is empty");
	const sniffed = sniffFormat(head);
	if (typeof sniffed === "object") throw unsupportedFormat(sniffed.unsupported);

	// Unknown leading bytes may be the tail of a cut MP3 frame or junk before the first one, as preprocessing allows.
	switch (sniffed ?? "mp3") {
		case "wav":
			yield* decodeWav(stream);
			return;
		case "flac":
			yield* decodeFlacWithLayout(stream);
			return;
		case "mp3":
			if (String.fromCharCode(...head.subarray(0, 3)) === "ID3") {
				yield* decodeAfterId3(stream);
				return;
			}
			yield* decodeMp3(stream);
			return;
	}
}

/** What follows ID3v2 tags: a FLAC stream (as preprocessing accepts it, `probe-audio.ts`) or MP3. */
async function* decodeAfterId3(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	const rest = await skipId3Tags(bytes);
	if (rest === undefined) throw corruptedSource("the file ends inside its ID3 tag");
	const { head, stream } = await peek(rest, 4);
	if (String.fromCharCode(...head) === "fLaC") yield* decodeFlacWithLayout(stream);
	else yield* decodeMp3(stream);
}

/** FLAC blocks with the speakers the stream states or its layout stands for (see `AudioBlock.channelMask`). */
async function* decodeFlacWithLayout(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	const { stream, mask } = watchFlacChannelMask(bytes);
	for await (const block of decodeFlac(stream)) {
		const channelMask = flacChannelMask(block.channels.length, mask());
		yield channelMask === undefined ? block : { ...block, channelMask };
	}
}
