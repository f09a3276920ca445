/** What preprocessing learns about a source file. */
export interface AudioFacts {
	format: "wav" | "flac" | "mp3";
	sampleRate: number;
	channels: number;
	durationSeconds: number;
	/** A human description of the encoding, e.g. `PCM 24-bit`, `MPEG-1 Layer III, VBR (Xing)`; for logs and tests. */
	codec: string;
}
