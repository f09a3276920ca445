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

/** A stream read ahead: `buffer` holds its next bytes, `iterator` the rest. */
interface ReadAhead {
	buffer: Uint8Array;
	iterator: AsyncIterator<Uint8Array>;
	ended: boolean;
	/** Reads more into `buffer`; false at the end of the stream. */
	pull(): Promise<boolean>;
	/** Reads until `buffer` holds `length` bytes or the stream ends. */
	fill(length: number): Promise<void>;
}

function readAhead(bytes: AsyncIterable<Uint8Array>): ReadAhead {
	const state: ReadAhead = {
		buffer: new Uint8Array(0),
		iterator: bytes[Symbol.asyncIterator](),
		ended: false,
		async pull() {
			const next = await state.iterator.next();
			if (next.done) {
				state.ended = true;
				return false;
			}
			const joined = new Uint8Array(state.buffer.length + next.value.length);
			joined.set(state.buffer);
			joined.set(next.value, state.buffer.length);
			state.buffer = joined;
			return true;
		},
		async fill(length: number) {
			while (state.buffer.length < length && (await state.pull()));
		},
	};
	return state;
}

/** Drops any ID3v2 tags at the start of `input.buffer` (streaming past large ones); false when a tag is cut off. */
async function dropId3Tags(input: ReadAhead): Promise<boolean> {
	for (let tag = 0; tag < MAX_ID3_TAGS; tag++) {
		await input.fill(10);
		const b = input.buffer;
		if (b.length < 10 || b[0] !== 0x49 || b[1] !== 0x44 || b[2] !== 0x33) break;
		const size = [6, 7, 8, 9].reduce((total, i) => total * 128 + ((b[i] as number) & 0x7f), 0);
		// Version 4 tags may end with a 10-byte footer (flag bit 4), not counted in the size.
		let skip = 10 + size + (b[3] === 4 && (b[5] as number) & 0x10 ? 10 : 0);
		while (skip > input.buffer.length) {
			skip -= input.buffer.length;
			input.buffer = new Uint8Array(0);
			if (!(await input.pull())) return false;
		}
		input.buffer = input.buffer.subarray(skip);
	}
	return true;
}

/**
 * The stream past any ID3v2 tags at its start (taggers put them in front of FLAC files too), or undefined when
 * the file ends inside one.
 */
export async function skipId3Tags(bytes: AsyncIterable<Uint8Array>): Promise<AsyncIterable<Uint8Array> | undefined> {
	const input = readAhead(bytes);
	if (!(await dropId3Tags(input))) return undefined;
	return replayThen([input.buffer], input.iterator);
}

/** The first confirmed frame and the stream from it, or undefined when the start of the file holds none. */
export async function findMp3Start(bytes: AsyncIterable<Uint8Array>): Promise<Mp3Start | undefined> {
	const input = readAhead(bytes);
	if (!(await dropId3Tags(input))) return undefined;

	await input.fill(SYNC_SEARCH_BYTES + 3 * MAX_FRAME_BYTES);
	const { buffer, iterator } = input;
	const audioEnd = input.ended ? buffer.length : Number.POSITIVE_INFINITY;
	for (let at = 0; at < Math.min(buffer.length, SYNC_SEARCH_BYTES); at++) {
		if (buffer[at] !== 0xff) continue;
		const frame = confirmedFrame(buffer, at, audioEnd);
		if (frame) return { frame, stream: replayThen([buffer.subarray(at)], iterator) };
	}
	return undefined;
}
