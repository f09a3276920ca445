/**
 * Where an MP3 stream really begins: past any ID3v2 tags (which may hold megabytes of cover art) and past junk or
 * the tail of a frame cut in half, at the first frame that the next two frames confirm. Preprocessing uses the same
 * rule (`src/contracts/mpeg-frame.ts`), so the decoder starts at the frame the stated duration was measured from,
 * and reads the channel count from a real header rather than from a stray 0xFFE sync in the junk.
 */
import { confirmedFrame, type MpegFrame } from "../../../src/contracts/mpeg-frame.ts";
import { replayThen } from "./replay.ts";

/** How far past the tags the first frame is looked for (as in preprocessing). */
const SYNC_SEARCH_BYTES = 64 * 1024;
/** The largest frame preprocessing allows for; confirming a frame needs the next two. */
const MAX_FRAME_BYTES = 2881;
const MAX_ID3_TAGS = 8;

export interface Mp3Start {
	frame: MpegFrame;
	/** The bytes from that frame to the end of the file. */
	stream: AsyncIterable<Uint8Array>;
}

/** The first confirmed frame and the stream from it, or undefined when the start of the file holds none. */
export async function findMp3Start(bytes: AsyncIterable<Uint8Array>): Promise<Mp3Start | undefined> {
	const iterator = bytes[Symbol.asyncIterator]();
	let buffer = new Uint8Array(0);
	let ended = false;
	const pull = async (): Promise<boolean> => {
		const next = await iterator.next();
		if (next.done) {
			ended = true;
			return false;
		}
		const joined = new Uint8Array(buffer.length + next.value.length);
		joined.set(buffer);
		joined.set(next.value, buffer.length);
		buffer = joined;
		return true;
	};
	const fill = async (length: number) => {
		while (buffer.length < length && (await pull()));
	};

	for (let tag = 0; tag < MAX_ID3_TAGS; tag++) {
		await fill(10);
		if (buffer.length < 10 || buffer[0] !== 0x49 || buffer[1] !== 0x44 || buffer[2] !== 0x33) break;
		const size = [6, 7, 8, 9].reduce((total, i) => total * 128 + ((buffer[i] as number) & 0x7f), 0);
		// Version 4 tags may end with a 10-byte footer (flag bit 4), not counted in the size.
		let skip = 10 + size + (buffer[3] === 4 && (buffer[5] as number) & 0x10 ? 10 : 0);
		while (skip > buffer.length) {
			skip -= buffer.length;
			buffer = new Uint8Array(0);
			if (!(await pull())) return undefined;
		}
		buffer = buffer.subarray(skip);
	}

	await fill(SYNC_SEARCH_BYTES + 3 * MAX_FRAME_BYTES);
	const audioEnd = ended ? buffer.length : Number.POSITIVE_INFINITY;
	for (let at = 0; at < Math.min(buffer.length, SYNC_SEARCH_BYTES); at++) {
		if (buffer[at] !== 0xff) continue;
		const frame = confirmedFrame(buffer, at, audioEnd);
		if (frame) return { frame, stream: replayThen([buffer.subarray(at)], iterator) };
	}
	return undefined;
}
