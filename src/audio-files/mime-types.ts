/**
 * Media types accepted at registration: the WAV, MP3 and FLAC types and the aliases clients commonly send. The type is
 * only a claim: preprocessing identifies the format from the bytes.
 */
export const ACCEPTED_MIME_TYPES: Readonly<Record<string, "wav" | "mp3" | "flac">> = {
	"audio/wav": "wav",
	"audio/x-wav": "wav",
	"audio/wave": "wav",
	"audio/vnd.wave": "wav",
	"audio/x-pn-wav": "wav",
	"audio/mpeg": "mp3",
	"audio/mp3": "mp3",
	"audio/x-mp3": "mp3",
	"audio/mpeg3": "mp3",
	"audio/x-mpeg": "mp3",
	"audio/x-mpeg-3": "mp3",
	"audio/mpg": "mp3",
	"audio/flac": "flac",
	"audio/x-flac": "flac",
};

/** Media types compare case-insensitively (RFC 9110 §8.3.1); the value the client sent is kept as supplied. */
export const isAcceptedMimeType = (value: string) => Object.hasOwn(ACCEPTED_MIME_TYPES, value.toLowerCase());
