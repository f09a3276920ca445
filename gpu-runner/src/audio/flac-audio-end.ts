/**
 * A FLAC byte stream cut where its audio ends. Tags or other bytes after the last frame make libFLAC read them as
 * part of that frame and silently drop it, and the wide decoder refuse the file; zero padding stops the wide decoder
 * too. So the last `holdBytes` are held back until the stream ends and searched for the last frame (`lastFlacFrame`,
 * the same search preprocessing measured the length by), and only the audio is passed on. Where no frame ends there
 * (its last frame cut or damaged), everything is passed on for the decoder to report.
 */
import { lastFlacFrame } from "../../../src/contracts/flac-stream-end.ts";

export async function* upToFlacAudioEnd(
	bytes: AsyncIterable<Uint8Array>,
	holdBytes: number,
): AsyncGenerator<Uint8Array> {
	const held: Uint8Array[] = [];
	let heldBytes = 0;
	for await (const chunk of bytes) {
		held.push(chunk);
		heldBytes += chunk.byteLength;
		for (let first = held[0]; first && held.length > 1 && heldBytes - first.byteLength >= holdBytes; first = held[0]) {
			held.shift();
			heldBytes -= first.byteLength;
			yield first;
		}
	}
	const tail = new Uint8Array(heldBytes);
	let at = 0;
	for (const chunk of held) {
		tail.set(chunk, at);
		at += chunk.byteLength;
	}
	const last = lastFlacFrame(tail);
	yield last ? tail.subarray(0, last.end) : tail;
}
