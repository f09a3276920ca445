/**
 * What a file holds after its audio, found from its end by `locate` over the bytes there: the tags taggers append
 * (`appendedTagsStart`: ID3v1, APE, ID3v2 with a footer), or those and zero padding (`afterAudioStart`). Looked for
 * in the reader's window at the end first, then as far as the allowance reaches. Shared by the FLAC and MP3 probes.
 */
import { APPENDED_TAGS_MAX_BYTES } from "../../contracts/flac-stream-end.ts";
import type { ProbeReader } from "./probe-reader.ts";

/** The offset where what follows the audio begins (the file's size when nothing does); null past the allowance. */
export async function appendedDataStart(
	reader: ProbeReader,
	audioStart: number,
	locate: (tail: Uint8Array) => number | null,
): Promise<number | null> {
	for (const length of [reader.windowBytes, APPENDED_TAGS_MAX_BYTES + 4096]) {
		const span = Math.min(reader.size - audioStart, length);
		const start = locate(await reader.exactly(reader.size - span, span, "end of the file"));
		if (start !== null) return reader.size - span + start;
		if (span < length) return null;
	}
	return null;
}
