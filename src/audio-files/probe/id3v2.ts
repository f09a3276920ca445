/** ID3v2 tags, which taggers put in front of MP3 and FLAC audio (and joined files carry between their streams). */
import { ascii } from "./probe-reader.ts";

/**
 * The whole length of the ID3v2 tag whose 10-byte header is `header` (header, body and a version 4 footer), or
 * null where there is none: not "ID3", shorter than a header, or a size that is not the format's 7-bit bytes.
 */
export function id3v2TagLength(header: Uint8Array): number | null {
	if (header.byteLength < 10 || ascii(header, 0, 3) !== "ID3") return null;
	const sizeBytes = header.subarray(6, 10);
	if (sizeBytes.some((byte) => byte & 0x80)) return null;
	const size = sizeBytes.reduce((total, byte) => total * 128 + byte, 0);
	// Version 4 tags may end with a 10-byte footer (flag bit 4), not counted in the size.
	const footer = header[3] === 4 && ((header[5] as number) & 0x10) !== 0 ? 10 : 0;
	return 10 + size + footer;
}
