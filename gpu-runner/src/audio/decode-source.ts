/**
 * Entry point of decoding: looks at the first bytes to learn the real format (the claimed MIME type and
 * even the preprocessing verdict are hints, the bytes are the truth), then streams through the matching
 * decoder (FLAC and MP3 also behind ID3v2 tags). Any decode failure surfaces as a `PermanentJobError` (corrupted or unsupported). Bytes that match no
 * magic number are searched for an MP3 stream, which is refused as corrupted when none starts near the beginning.
 */
import { corruptedSource, unsupportedFormat } from "../job-errors.ts";
import { ByteQueue } from "./byte-queue.ts";
import { decodeFlac, decodeMp3 } from "./compressed-decoders.ts";
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

/** Decode a source byte stream into planar float blocks, whatever its format. */
export async function* decodeSource(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	const iterator = bytes[Symbol.asyncIterator]();
	const head = new ByteQueue();
	const buffered: Uint8Array[] = [];
	while (head.length < SNIFF_BYTES) {
		const next = await iterator.next();
		if (next.done) break;
		head.push(next.value);
		buffered.push(next.value);
	}
	if (head.length === 0) throw corruptedSource("the source file is empty");
	const first = head.read(Math.min(head.length, SNIFF_BYTES));
	const sniffed = sniffFormat(first);
	if (typeof sniffed === "object") throw unsupportedFormat(sniffed.unsupported);

	// The sniffed chunks, then the rest of the stream.
	const replay = () => replayThen(buffered, iterator);
	// Unknown leading bytes may be the tail of a cut MP3 frame or junk before the first one, as preprocessing allows.
	switch (sniffed ?? "mp3") {
		case "wav":
			yield* decodeWav(replay());
			return;
		case "flac":
			yield* decodeFlac(replay());
			return;
		case "mp3":
			if (String.fromCharCode(...first.subarray(0, 3)) === "ID3") {
				yield* decodeAfterId3(replay());
				return;
			}
			yield* decodeMp3(replay());
			return;
	}
}

/** What follows ID3v2 tags: a FLAC stream (as preprocessing accepts it, `probe-audio.ts`) or MP3. */
async function* decodeAfterId3(bytes: AsyncIterable<Uint8Array>): AsyncGenerator<AudioBlock> {
	const rest = await skipId3Tags(bytes);
	if (rest === undefined) throw corruptedSource("the file ends inside its ID3 tag");
	const iterator = rest[Symbol.asyncIterator]();
	const head = new ByteQueue();
	const taken: Uint8Array[] = [];
	while (head.length < 4) {
		const next = await iterator.next();
		if (next.done) break;
		head.push(next.value);
		taken.push(next.value);
	}
	const after = replayThen(taken, iterator);
	if (head.length >= 4 && String.fromCharCode(...head.read(4)) === "fLaC") yield* decodeFlac(after);
	else yield* decodeMp3(after);
}
