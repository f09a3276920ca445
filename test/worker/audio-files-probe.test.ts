/** The pure probe over in-memory bytes: every format variant, every refusal, and how little it reads. */
import { describe, expect, it } from "vitest";
import { MAX_AUDIO_FILE_BYTES } from "../../src/audio-files/limits.ts";
import { type ByteSource, memoryByteSource } from "../../src/audio-files/probe/byte-source.ts";
import { type ProbeStats, probeAudio } from "../../src/audio-files/probe/probe-audio.ts";
import { makeFlac } from "../support/flac-generator.ts";
import { encodeMp3, makeMp3Frames } from "../support/mp3-generator.ts";
import { asciiBytes, concatBytes } from "../support/pcm.ts";
import { makeWav } from "../support/wav-generator.ts";

const probe = (bytes: Uint8Array, stats?: ProbeStats) => probeAudio(memoryByteSource(bytes), stats);
const wav16 = (frames = 44_100) => makeWav({ sampleRate: 44_100, channels: 2, frames, encoding: "pcm", bits: 16 });

describe("probeAudio: formats", () => {
	it.each([
		["PCM 8-bit", { encoding: "pcm", bits: 8 }],
		["PCM 16-bit", { encoding: "pcm", bits: 16 }],
		["PCM 24-bit", { encoding: "pcm", bits: 24 }],
		["PCM 32-bit", { encoding: "pcm", bits: 32 }],
		["IEEE float 32-bit", { encoding: "float", bits: 32 }],
		["IEEE float 64-bit", { encoding: "float", bits: 64 }],
		["PCM 24-bit (extensible)", { encoding: "pcm", bits: 24, extensible: true }],
		["IEEE float 32-bit (extensible)", { encoding: "float", bits: 32, extensible: true }],
	] as const)("reads WAV %s", async (codec, options) => {
		const frames = 22_050 * 2 + 123;
		const result = await probe(makeWav({ sampleRate: 22_050, channels: 2, frames, ...options }));
		expect(result).toEqual({
			ok: true,
			format: "wav",
			sampleRate: 22_050,
			channels: 2,
			durationSeconds: frames / 22_050,
			codec,
		});
	});

	it("skips other chunks, including an odd-sized one with its pad byte", async () => {
		const bytes = makeWav({
			sampleRate: 8000,
			channels: 1,
			frames: 8000,
			encoding: "pcm",
			bits: 16,
			extraChunks: [
				{ id: "LIST", body: new Uint8Array(13) },
				{ id: "fact", body: new Uint8Array(4) },
			],
		});
		expect(await probe(bytes)).toMatchObject({ ok: true, durationSeconds: 1, channels: 1 });
	});

	it("reads RF64 sizes from the ds64 chunk", async () => {
		const bytes = makeWav({ sampleRate: 48_000, channels: 2, frames: 96_000, encoding: "pcm", bits: 16, rf64: true });
		expect(await probe(bytes)).toMatchObject({ ok: true, format: "wav", durationSeconds: 2 });
	});

	it("reads FLAC STREAMINFO, walking past further metadata blocks, and checks the last frame from the tail", async () => {
		const frames = 44_100 * 2 + 77;
		const bytes = makeFlac({ sampleRate: 44_100, channels: 2, bitsPerSample: 16, frames, paddingBytes: 1000 });
		const stats = { reads: 0, bytesFetched: 0 };
		expect(await probe(bytes, stats)).toEqual({
			ok: true,
			format: "flac",
			sampleRate: 44_100,
			channels: 2,
			durationSeconds: frames / 44_100,
			codec: "FLAC 16-bit",
		});
		// STREAMINFO and the metadata, the file's last 4 KiB (tags), its last frame.
		expect(stats.reads).toBe(3);
		expect(stats.bytesFetched).toBeLessThan(bytes.byteLength / 3);
	});

	it("computes a FLAC length STREAMINFO leaves unknown from the last frame, reading only the tail", async () => {
		const frames = 48_000 * 3 + 5;
		const bytes = makeFlac({ sampleRate: 48_000, channels: 1, bitsPerSample: 24, frames, unknownTotal: true });
		const stats = { reads: 0, bytesFetched: 0 };
		expect(await probe(bytes, stats)).toMatchObject({ ok: true, durationSeconds: frames / 48_000 });
		expect(stats.bytesFetched).toBeLessThan(bytes.byteLength / 10);
	});

	it("reads Xing frame counts and removes the LAME tag's encoder delay and padding", async () => {
		const bitrates = Array.from({ length: 150 }, (_, i) => [96, 128, 192, 256][i % 4] as number);
		const bytes = makeMp3Frames({
			version: "1",
			sampleRate: 44_100,
			channels: 2,
			bitrates,
			xing: { id: "Xing", lame: { delay: 576, padding: 1234 } },
			id3v2: { size: 700, footer: true },
		});
		const result = await probe(bytes);
		expect(result).toMatchObject({ ok: true, format: "mp3", sampleRate: 44_100, channels: 2 });
		expect(result.ok && result.durationSeconds).toBe((150 * 1152 - 576 - 1234) / 44_100);
		expect(result.ok && result.codec).toBe("MPEG-1 Layer III, Xing");
	});

	it("reads a VBRI header (MPEG-2)", async () => {
		const bitrates = Array.from({ length: 120 }, (_, i) => [32, 64, 96][i % 3] as number);
		const bytes = makeMp3Frames({ version: "2", sampleRate: 22_050, channels: 1, bitrates, vbri: true });
		expect(await probe(bytes)).toMatchObject({
			ok: true,
			durationSeconds: (120 * 576) / 22_050,
			codec: "MPEG-2 Layer III, VBRI",
		});
	});

	it("counts the frames of a VBR stream without a header (MPEG-2.5, ID3v1 at the end)", async () => {
		const bitrates = Array.from({ length: 90 }, (_, i) => [8, 16, 32, 24][i % 4] as number);
		const bytes = makeMp3Frames({ version: "2.5", sampleRate: 8000, channels: 1, bitrates, id3v1: true });
		expect(await probe(bytes)).toMatchObject({
			ok: true,
			durationSeconds: (90 * 576) / 8000,
			codec: "MPEG-2.5 Layer III, frame scan",
		});
	});

	it("sizes a CBR stream without a header from its length, reading only samples of it", async () => {
		const bytes = makeMp3Frames({
			version: "1",
			sampleRate: 48_000,
			channels: 2,
			bitrates: Array(2000).fill(320),
			crc: true,
		});
		const stats = { reads: 0, bytesFetched: 0 };
		expect(await probe(bytes, stats)).toMatchObject({
			ok: true,
			durationSeconds: (2000 * 1152) / 48_000,
			codec: "MPEG-1 Layer III, CBR",
		});
		expect(stats.bytesFetched).toBeLessThan(bytes.byteLength / 5);
	});

	it("reads an MP3 from a real encoder (lamejs): LAME pads to whole frames after its 1152-sample delay", async () => {
		const frames = 44_100 * 2 + 300;
		const result = await probe(encodeMp3({ sampleRate: 44_100, channels: 2, frames, kbps: 128 }));
		// LAME adds 576 samples of encoder delay and 576 of look-ahead, then fills the last frame (checked against
		// `lame --decode`, which outputs the same frames minus its 529-sample decoder delay).
		expect(result).toMatchObject({
			ok: true,
			format: "mp3",
			durationSeconds: (Math.ceil((frames + 1152) / 1152) * 1152) / 44_100,
		});
	});

	describe("an MP3 cut short, whose header counts more frames than the file holds", () => {
		const bitrates = Array.from({ length: 200 }, (_, i) => [128, 160, 192][i % 3] as number);
		const stream = (options: Partial<Parameters<typeof makeMp3Frames>[0]>, frames = bitrates.length) =>
			makeMp3Frames({ version: "1", sampleRate: 44_100, channels: 2, bitrates: bitrates.slice(0, frames), ...options });
		/** The first `frames` whole frames and half of the next: frames never depend on later ones. */
		const cut = (options: Partial<Parameters<typeof makeMp3Frames>[0]>, frames: number) =>
			stream(options).subarray(0, stream(options, frames).byteLength + 200);

		it("reports what a decoder finds: the whole frames, less the encoder and decoder delay", async () => {
			const result = await probe(cut({ xing: { id: "Xing", lame: { delay: 576, padding: 1500 } } }, 90));
			expect(result).toMatchObject({
				ok: true,
				durationSeconds: (90 * 1152 - 576 - 529) / 44_100,
				codec: "MPEG-1 Layer III, Xing, cut short: frame scan",
			});
		});

		it("keeps the header's count when only the last frame's padding is lost", async () => {
			const result = await probe(cut({ xing: { id: "Xing", lame: { delay: 576, padding: 1500 } } }, 199));
			expect(result).toMatchObject({ ok: true, durationSeconds: (200 * 1152 - 576 - 1500) / 44_100 });
		});

		it("counts whole frames when there is no LAME tag, and for a VBRI header", async () => {
			expect(await probe(cut({ xing: { id: "Xing" } }, 75))).toMatchObject({
				ok: true,
				durationSeconds: (75 * 1152) / 44_100,
			});
			expect(await probe(cut({ vbri: true }, 40))).toMatchObject({ ok: true, durationSeconds: (40 * 1152) / 44_100 });
		});
	});

	it("starts an MP3 cut in the middle of a frame at its first whole frame", async () => {
		const frames = makeMp3Frames({ version: "1", sampleRate: 44_100, channels: 2, bitrates: Array(50).fill(128) });
		for (const offset of [1, 200, 416]) {
			expect(await probe(frames.subarray(offset))).toMatchObject({
				ok: true,
				durationSeconds: (49 * 1152) / 44_100,
				codec: "MPEG-1 Layer III, CBR",
			});
		}
	});

	it("finds the first frame after a little junk", async () => {
		const frames = makeMp3Frames({ version: "1", sampleRate: 44_100, channels: 2, bitrates: Array(50).fill(128) });
		const result = await probe(concatBytes([Uint8Array.from([0xff, 0x00, 0x12, 0x00, 0xff, 0xfb]), frames]));
		expect(result).toMatchObject({ ok: true, durationSeconds: (50 * 1152) / 44_100 });
	});

	it("reads only the header of a large WAV", async () => {
		const bytes = wav16(44_100 * 20);
		const stats = { reads: 0, bytesFetched: 0 };
		expect(await probe(bytes, stats)).toMatchObject({ ok: true, durationSeconds: 20 });
		expect(stats).toEqual({ reads: 1, bytesFetched: 4096 });
	});
});

describe("probeAudio: refusals", () => {
	const cases: [string, Uint8Array, string, RegExp][] = [
		["an empty file", new Uint8Array(0), "empty_file", /empty/],
		["a WAV cut inside its fmt chunk", wav16().subarray(0, 30), "truncated", /ends inside the fmt chunk/],
		["a WAV whose data chunk is cut short", wav16().subarray(0, 10_000), "truncated", /declares 176400 bytes/],
		["a WAV with a RIFF header only", asciiBytes("RIFF\0\0\0\0WAVE"), "truncated", /no fmt chunk/],
		[
			"a WAV whose block align is wrong",
			(() => {
				const b = wav16();
				b[32] = 3;
				return b;
			})(),
			"corrupted",
			/block align/,
		],
		[
			"an ADPCM WAV",
			(() => {
				const b = wav16();
				b[20] = 2;
				return b;
			})(),
			"unsupported_format",
			/Microsoft ADPCM/,
		],
		[
			"a WAV without samples",
			makeWav({ sampleRate: 8000, channels: 1, frames: 0, encoding: "pcm", bits: 16 }),
			"zero_duration",
			/no audio samples/,
		],
		["OGG bytes", concatBytes([asciiBytes("OggS"), new Uint8Array(200)]), "unsupported_format", /Ogg/],
		["plain text", asciiBytes("hello, this is not audio\nreally not\n"), "unsupported_format", /plain text/],
		["an AIFF file", asciiBytes("FORM\0\0\0\x20AIFFCOMM"), "unsupported_format", /AIFF/],
		["a RIFF AVI", asciiBytes("RIFF\0\0\0\0AVI LIST"), "unsupported_format", /"AVI "/],
		[
			"random bytes",
			Uint8Array.from({ length: 3000 }, (_, i) => (i * 7919 + 13) % 251),
			"unsupported_format",
			/not WAV, MP3 or FLAC/,
		],
		[
			"an ID3 tag with no audio",
			concatBytes([asciiBytes("ID3\x04\0\0\0\0\0\x10"), new Uint8Array(16)]),
			"truncated",
			/ID3 tag but no audio/,
		],
		[
			"an ID3 tag cut short",
			concatBytes([asciiBytes("ID3\x04\0\0\0\0\x10\0"), new Uint8Array(16)]),
			"truncated",
			/inside its ID3 tag/,
		],
		[
			"MPEG Layer II audio",
			Uint8Array.from({ length: 4 * 418 }, (_, i) => [0xff, 0xfd, 0x90, 0x00][i % 418] ?? 0),
			"unsupported_format",
			/Layer II audio, not MP3/,
		],
		[
			"an MP3 whose Xing header counts no frames",
			makeMp3Frames({ version: "1", sampleRate: 44_100, channels: 2, bitrates: [], xing: { id: "Info", frames: 0 } }),
			"zero_duration",
			/no audio frames/,
		],
		[
			"a FLAC cut inside STREAMINFO",
			makeFlac({ sampleRate: 8000, channels: 1, bitsPerSample: 16, frames: 8000 }).subarray(0, 20),
			"truncated",
			/STREAMINFO/,
		],
		[
			"a FLAC with metadata only",
			makeFlac({ sampleRate: 8000, channels: 1, bitsPerSample: 16, frames: 8000 }).subarray(0, 42),
			"truncated",
			/before its first audio frame/,
		],
		[
			"a FLAC not starting with STREAMINFO",
			(() => {
				const b = makeFlac({ sampleRate: 8000, channels: 1, bitsPerSample: 16, frames: 8000 });
				b[4] = 0x04;
				return b;
			})(),
			"corrupted",
			/STREAMINFO/,
		],
	];

	const header = (o: Partial<Parameters<typeof makeWav>[0]>, patch?: (view: DataView) => void) => {
		const b = makeWav({ sampleRate: 16_000, channels: 1, frames: 1000, encoding: "pcm", bits: 16, ...o });
		patch?.(new DataView(b.buffer));
		return b;
	};
	cases.push(
		[
			"a WAV declaring 4,000,000,000 Hz",
			header({}, (v) => v.setUint32(24, 4_000_000_000, true)),
			"unsupported_format",
			/WAV header declares a sample rate of 4000000000 Hz; rates from 4000 to 768000 Hz are supported/,
		],
		["a WAV at 2 kHz", header({ sampleRate: 2000 }), "unsupported_format", /2000 Hz/],
		[
			"a WAV of 1000 channels",
			header({ channels: 1000, frames: 4 }),
			"unsupported_format",
			/declares 1000 channels; at most 32 are supported/,
		],
		["a WAV declaring 0 channels", header({}, (v) => v.setUint16(22, 0, true)), "corrupted", /0 channels/],
		[
			"a WAV whose block align is absurd",
			header({}, (v) => v.setUint16(32, 65_535, true)),
			"corrupted",
			/block align \(65535\)/,
		],
		[
			"a FLAC at 1,000,000 Hz",
			makeFlac({ sampleRate: 1_000_000, channels: 1, bitsPerSample: 16, frames: 5000 }),
			"unsupported_format",
			/FLAC header declares a sample rate of 1000000 Hz/,
		],
	);

	it.each(cases)("refuses %s", async (_name, bytes, code, message) => {
		const result = await probe(bytes);
		expect(result).toMatchObject({ ok: false, code });
		expect(result.ok ? "" : result.message).toMatch(message);
	});

	it("refuses a file of 100 MB or more without reading it", async () => {
		let reads = 0;
		const huge: ByteSource = {
			size: MAX_AUDIO_FILE_BYTES,
			read: async () => {
				reads++;
				return new Uint8Array(0);
			},
		};
		expect(await probeAudio(huge)).toMatchObject({ ok: false, code: "too_large" });
		expect(reads).toBe(0);
	});
});
