/**
 * The two CRCs FLAC frames carry: CRC-8 (poly 0x07) over the frame header, CRC-16 (poly 0x8005) over the frame.
 * Shared by preprocessing (which finds the last frame by them) and the runner's FLAC decoder (which checks every frame).
 */
function table(width: 8 | 16, poly: number): Uint16Array {
	const top = 1 << (width - 1);
	const mask = (1 << width) - 1;
	const out = new Uint16Array(256);
	for (let n = 0; n < 256; n++) {
		let crc = n << (width - 8);
		for (let bit = 0; bit < 8; bit++) crc = crc & top ? ((crc << 1) ^ poly) & mask : (crc << 1) & mask;
		out[n] = crc;
	}
	return out;
}

const CRC8 = table(8, 0x07);
const CRC16 = table(16, 0x8005);

export function crc8(bytes: Uint8Array): number {
	let crc = 0;
	for (const byte of bytes) crc = CRC8[crc ^ byte] as number;
	return crc;
}

export function crc16(bytes: Uint8Array): number {
	let crc = 0;
	for (const byte of bytes) crc = crc16Step(crc, byte);
	return crc;
}

/** The CRC-16 of what `crc` was taken over, followed by `byte`. */
export const crc16Step = (crc: number, byte: number) => ((crc << 8) & 0xffff) ^ (CRC16[(crc >> 8) ^ byte] as number);
