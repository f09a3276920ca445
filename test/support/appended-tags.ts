/**
 * Tags that taggers append after the audio of FLAC and MP3 files, written as they write them: ID3v1, APEv2 (header,
 * items, footer), ID3v2.4 with a footer. For the probes' and decoders' tests of where the audio ends.
 */
import { asciiBytes, concatBytes } from "./pcm.ts";

const u32le = (value: number) => new Uint8Array(new Uint32Array([value]).buffer);

/** An ID3v1 tag: "TAG" and 125 bytes of fields. */
export const id3v1 = () => concatBytes([asciiBytes("TAG"), asciiBytes("A title".padEnd(125, "\0"))]);

/** An APEv2 tag as taggers write it: header, items, footer (the footer's size counts the items and itself). */
export function apeTag(items: Record<string, string>): Uint8Array {
	const body = concatBytes(
		Object.entries(items).map(([key, value]) =>
			concatBytes([u32le(value.length), u32le(0), asciiBytes(`${key}\0`), asciiBytes(value)]),
		),
	);
	const edge = (isHeader: boolean) =>
		concatBytes([
			asciiBytes("APETAGEX"),
			u32le(2000),
			u32le(body.byteLength + 32),
			u32le(Object.keys(items).length),
			u32le(0x80000000 | (isHeader ? 0x20000000 : 0)),
			new Uint8Array(8),
		]);
	return concatBytes([edge(true), body, edge(false)]);
}

/** An ID3v2.4 tag with a footer ("3DI"), the only kind that may follow the audio. */
export function id3v2WithFooter(): Uint8Array {
	const frame = concatBytes([asciiBytes("TIT2"), new Uint8Array([0, 0, 0, 8, 0, 0, 3]), asciiBytes("A title")]);
	const size = new Uint8Array([0, 0, (frame.byteLength >> 7) & 0x7f, frame.byteLength & 0x7f]);
	return concatBytes([
		asciiBytes("ID3"),
		new Uint8Array([4, 0, 0x10]),
		size,
		frame,
		asciiBytes("3DI"),
		new Uint8Array([4, 0, 0x10]),
		size,
	]);
}
