/**
 * A corpus of odd and hostile source files, each with what the service must make of it: cut, header-only and empty
 * files, NaN and infinite floats, many channels and extreme rates, a single sample, silence, DC, MP3s cut short or
 * starting mid-frame, 32-bit FLAC, impossible header values, and plain junk. Built in code and with the Debian
 * `flac` and `lame` encoders (the real files clients send), short so that a whole-service run stays quick.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeFlac } from "./flac-generator.ts";
import { encodeMp3, makeMp3Frames } from "./mp3-generator.ts";
import { asciiBytes, concatBytes } from "./pcm.ts";
import { makeWav, type WavOptions } from "./wav-generator.ts";

/** The cause a failed conversion must name (the keys of `FAILURE_MESSAGES`). */
export type ExpectedFailure = "corrupted_source" | "unsupported_format" | "empty_file";

export type CorpusExpectation =
	| {
			status: "completed";
			/** The file's duration the service must state; the output lasts exactly that (or the preview's 10 s). */
			seconds: number;
			/** How far `seconds` may be from the stated duration (encoders pad MP3s to whole frames). */
			tolerance?: number;
			channels: number;
			sampleRate: number;
			/** Whether the source holds sound (not silence, not a bare DC offset), so the output must too. */
			audible: boolean;
	  }
	| {
			status: "failed";
			failure: ExpectedFailure;
			/** The audio file's `preprocessing_error_code` when preprocessing refuses it; absent when the runner does. */
			preprocessing?: string;
	  };

export interface CorpusFile {
	name: string;
	mimeType: string;
	bytes: Uint8Array;
	usePreview?: boolean;
	expect: CorpusExpectation;
}

const wav = (o: Partial<WavOptions> & { seconds?: number }) => {
	const sampleRate = o.sampleRate ?? 16_000;
	return makeWav({
		sampleRate,
		channels: 1,
		frames: Math.round((o.seconds ?? 1) * sampleRate),
		encoding: "pcm",
		bits: 16,
		...o,
	});
};
/** Offset of the first sample in a plain (non-extensible, no extra chunks) WAV from `makeWav`. */
const DATA = 44;

const patched = (bytes: Uint8Array, patch: (view: DataView, bytes: Uint8Array) => void) => {
	const copy = bytes.slice();
	patch(new DataView(copy.buffer), copy);
	return copy;
};

const completed = (
	seconds: number,
	sampleRate: number,
	channels = 1,
	extra: { audible?: boolean; tolerance?: number } = {},
): CorpusExpectation => ({
	status: "completed",
	seconds,
	sampleRate,
	channels,
	audible: extra.audible ?? true,
	...extra,
});
const failed = (failure: ExpectedFailure, preprocessing?: string): CorpusExpectation => ({
	status: "failed",
	failure,
	...(preprocessing ? { preprocessing } : {}),
});

function wavCases(): CorpusFile[] {
	const mime = "audio/wav";
	const float32 = wav({ encoding: "float", bits: 32 });
	const float64 = wav({ encoding: "float", bits: 64, channels: 2 });
	return [
		{ name: "WAV 16-bit mono", mimeType: mime, bytes: wav({}), expect: completed(1, 16_000) },
		{ name: "WAV 8-bit", mimeType: mime, bytes: wav({ bits: 8 }), expect: completed(1, 16_000) },
		{
			name: "WAV 24-bit stereo",
			mimeType: mime,
			bytes: wav({ bits: 24, channels: 2 }),
			expect: completed(1, 16_000, 2),
		},
		{ name: "WAV 32-bit integer", mimeType: mime, bytes: wav({ bits: 32 }), expect: completed(1, 16_000) },
		{ name: "WAV float 32-bit", mimeType: mime, bytes: float32, expect: completed(1, 16_000) },
		{
			name: "WAV float 64-bit extensible stereo",
			mimeType: mime,
			bytes: wav({ encoding: "float", bits: 64, channels: 2, extensible: true }),
			expect: completed(1, 16_000, 2),
		},
		{
			name: "WAV with 8 channels",
			mimeType: mime,
			bytes: wav({ channels: 8, seconds: 0.5, extensible: true }),
			expect: completed(0.5, 16_000, 8),
		},
		{
			name: "WAV at 192 kHz",
			mimeType: mime,
			bytes: wav({ sampleRate: 192_000, seconds: 0.5, bits: 24 }),
			expect: completed(0.5, 192_000),
		},
		{ name: "WAV at 8 kHz", mimeType: mime, bytes: wav({ sampleRate: 8000 }), expect: completed(1, 8000) },
		{
			name: "WAV of one sample",
			mimeType: mime,
			bytes: patched(wav({ seconds: 1 / 16_000 }), (v) => v.setInt16(DATA, 16_000, true)),
			// One sample is far shorter than any period a pitch shifter can carry: its output is not asked to sound.
			expect: completed(1 / 16_000, 16_000, 1, { audible: false }),
		},
		{
			name: "WAV of digital silence",
			mimeType: mime,
			bytes: patched(wav({}), (_v, b) => b.fill(0, DATA)),
			expect: completed(1, 16_000, 1, { audible: false }),
		},
		{
			name: "WAV of a DC offset",
			mimeType: mime,
			bytes: patched(float32, (v) => {
				for (let at = DATA; at < v.byteLength; at += 4) v.setFloat32(at, 0.5, true);
			}),
			expect: completed(1, 16_000, 1, { audible: false }),
		},
		{
			name: "WAV of 15 s converted as a preview",
			mimeType: mime,
			bytes: wav({ seconds: 15, sampleRate: 8000 }),
			usePreview: true,
			expect: completed(15, 8000),
		},
		{
			name: "WAV whose data size is left unknown (streamed)",
			mimeType: mime,
			bytes: wav({ dataSizeField: 0xffffffff }),
			expect: completed(1, 16_000),
		},
		{
			name: "WAV float with a NaN sample",
			mimeType: mime,
			bytes: patched(float32, (v) => v.setFloat32(DATA + 4 * 8000, Number.NaN, true)),
			expect: failed("corrupted_source"),
		},
		{
			name: "WAV float with a +Inf sample",
			mimeType: mime,
			bytes: patched(float32, (v) => v.setFloat32(DATA + 4 * 100, Number.POSITIVE_INFINITY, true)),
			expect: failed("corrupted_source"),
		},
		{
			name: "WAV float 64-bit with a -Inf sample",
			mimeType: mime,
			bytes: patched(float64, (v) => v.setFloat64(v.byteLength - 8, Number.NEGATIVE_INFINITY, true)),
			expect: failed("corrupted_source"),
		},
		{
			name: "WAV cut inside its data",
			mimeType: mime,
			bytes: wav({}).subarray(0, 20_000),
			expect: failed("corrupted_source", "truncated"),
		},
		{
			name: "WAV header only",
			mimeType: mime,
			bytes: wav({}).subarray(0, DATA - 8),
			expect: failed("corrupted_source", "truncated"),
		},
		{
			name: "WAV whose data chunk claims 2 GB",
			mimeType: mime,
			bytes: wav({ dataSizeField: 0x7fffffff }),
			expect: failed("corrupted_source", "truncated"),
		},
		{ name: "zero-length file", mimeType: mime, bytes: new Uint8Array(0), expect: failed("empty_file", "empty_file") },
		{
			name: "WAV declaring 4,000,000,000 Hz",
			mimeType: mime,
			bytes: patched(wav({}), (v) => v.setUint32(24, 4_000_000_000, true)),
			expect: failed("unsupported_format", "unsupported_format"),
		},
		{
			name: "WAV declaring 0 channels",
			mimeType: mime,
			bytes: patched(wav({}), (v) => v.setUint16(22, 0, true)),
			expect: failed("corrupted_source", "corrupted"),
		},
		{
			name: "WAV with an absurd block align",
			mimeType: mime,
			bytes: patched(wav({}), (v) => v.setUint16(32, 65_535, true)),
			expect: failed("corrupted_source", "corrupted"),
		},
		{
			name: "WAV of 1000 channels",
			mimeType: mime,
			bytes: wav({ channels: 1000, seconds: 0.001 }),
			expect: failed("unsupported_format", "unsupported_format"),
		},
		{
			name: "WAV in ADPCM",
			mimeType: mime,
			bytes: patched(wav({}), (v) => v.setUint16(20, 2, true)),
			expect: failed("unsupported_format", "unsupported_format"),
		},
	];
}

function otherCases(): CorpusFile[] {
	return [
		{
			name: "random bytes",
			mimeType: "audio/mpeg",
			bytes: Uint8Array.from({ length: 20_000 }, (_, i) => (i * 7919 + 13) % 251),
			expect: failed("unsupported_format", "unsupported_format"),
		},
		{
			name: "plain text",
			mimeType: "audio/wav",
			bytes: asciiBytes("Take 3, verse two. Not a recording, a note about one.\n"),
			expect: failed("unsupported_format", "unsupported_format"),
		},
		{
			name: "Ogg under an MP3 type",
			mimeType: "audio/mpeg",
			bytes: concatBytes([asciiBytes("OggS\0\x02"), new Uint8Array(4000)]),
			expect: failed("unsupported_format", "unsupported_format"),
		},
	];
}

function flacCases(): CorpusFile[] {
	const mime = "audio/flac";
	const stereo = makeFlac({ sampleRate: 44_100, channels: 2, bitsPerSample: 16, frames: 44_100 });
	return [
		{ name: "FLAC 16-bit stereo", mimeType: mime, bytes: stereo, expect: completed(1, 44_100, 2) },
		{
			// Taggers put ID3v2 in front of FLAC too; here a v4 tag with a footer and 40 KB of "cover art".
			name: "FLAC behind an ID3 tag",
			mimeType: mime,
			bytes: concatBytes([
				asciiBytes("ID3\x04\0\x10\0\x02\x38\x40"),
				new Uint8Array(40_000).map((_, i) => (i * 7) % 251),
				asciiBytes("3DI\x04\0\x10\0\x02\x38\x40"),
				stereo,
			]),
			expect: completed(1, 44_100, 2),
		},
		{
			name: "FLAC 24-bit mono with an unknown total",
			mimeType: mime,
			bytes: makeFlac({ sampleRate: 48_000, channels: 1, bitsPerSample: 24, frames: 48_000, unknownTotal: true }),
			expect: completed(1, 48_000),
		},
		{
			name: "FLAC of digital silence",
			mimeType: mime,
			bytes: makeFlac({ sampleRate: 16_000, channels: 1, bitsPerSample: 16, frames: 16_000, silent: true }),
			expect: completed(1, 16_000, 1, { audible: false }),
		},
		{
			name: "FLAC cut in half",
			mimeType: mime,
			bytes: stereo.subarray(0, Math.floor(stereo.length / 2)),
			// STREAMINFO states a second; its last frame is cut, so preprocessing refuses it.
			expect: failed("corrupted_source", "truncated"),
		},
		{
			// Taggers append ID3v1 (after an APE tag, some of them); libFLAC would lose the last frame to it, 0.256 s.
			name: "FLAC at 16 kHz followed by APE and ID3v1 tags",
			mimeType: mime,
			bytes: concatBytes([
				makeFlac({ sampleRate: 16_000, channels: 1, bitsPerSample: 16, frames: 16_000 }),
				// An APEv1 tag: a footer alone (32 bytes, no items).
				asciiBytes("APETAGEX\xe8\x03\0\0\x20\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"),
				asciiBytes(`TAG${"A title".padEnd(125, "\0")}`),
			]),
			expect: completed(1, 16_000),
		},
		{
			name: "FLAC declaring 1,000,000 Hz",
			mimeType: mime,
			bytes: makeFlac({ sampleRate: 1_000_000, channels: 1, bitsPerSample: 16, frames: 4096 }),
			expect: failed("unsupported_format", "unsupported_format"),
		},
		{
			name: "FLAC metadata only",
			mimeType: mime,
			bytes: stereo.subarray(0, 42),
			expect: failed("corrupted_source", "truncated"),
		},
	];
}

function mp3Cases(): CorpusFile[] {
	const mime = "audio/mpeg";
	const lamejs = encodeMp3({ sampleRate: 22_050, channels: 1, frames: 22_050, kbps: 64 });
	const silentFrames = (bitrates: number[], options: Partial<Parameters<typeof makeMp3Frames>[0]> = {}) =>
		makeMp3Frames({ version: "1", sampleRate: 44_100, channels: 2, bitrates, ...options });
	return [
		{
			name: "MP3 from lamejs, mono 22.05 kHz",
			mimeType: mime,
			bytes: lamejs,
			// LAME's 1152 samples of delay and look-ahead, padded to whole frames (no LAME tag to remove them).
			expect: completed((Math.ceil((22_050 + 576 + 576) / 576) * 576) / 22_050, 22_050),
		},
		{
			name: "MP3 from lamejs starting mid-frame",
			mimeType: mime,
			bytes: lamejs.subarray(101),
			expect: completed(1, 22_050, 1, { tolerance: 0.08 }),
		},
		{
			name: "MP3 of silent frames at 8 kHz (MPEG-2.5)",
			mimeType: mime,
			bytes: makeMp3Frames({ version: "2.5", sampleRate: 8000, channels: 1, bitrates: Array(20).fill(16) }),
			expect: completed((20 * 576) / 8000, 8000, 1, { audible: false }),
		},
		{
			name: "MP3 holding only an ID3 tag",
			mimeType: mime,
			bytes: concatBytes([asciiBytes("ID3\x04\0\0\0\0\x01\0"), new Uint8Array(128)]),
			expect: failed("corrupted_source", "truncated"),
		},
		{
			name: "MP3 whose Xing header counts no frames",
			mimeType: mime,
			bytes: silentFrames([], { xing: { id: "Info", frames: 0 } }),
			expect: failed("corrupted_source", "zero_duration"),
		},
		{
			name: "MPEG Layer II under an MP3 type",
			mimeType: mime,
			bytes: Uint8Array.from({ length: 8 * 418 }, (_, i) => [0xff, 0xfd, 0x90, 0x00][i % 418] ?? 0),
			expect: failed("unsupported_format", "unsupported_format"),
		},
	];
}

/** Files made by the Debian encoders: `lame` (Xing/Info and LAME tags) and `flac` 1.4 (32-bit samples). */
function encodedCases(dir: string): CorpusFile[] {
	const path = (name: string) => join(dir, name);
	const encode = (tool: string, args: string[], output: string) => {
		execFileSync(tool, args, { stdio: ["ignore", "ignore", "pipe"] });
		return new Uint8Array(readFileSync(path(output)));
	};
	writeFileSync(
		path("tone.wav"),
		makeWav({ sampleRate: 44_100, channels: 2, frames: 4 * 44_100, encoding: "pcm", bits: 16 }),
	);
	writeFileSync(
		path("mono8k.wav"),
		makeWav({ sampleRate: 8000, channels: 1, frames: 8000, encoding: "pcm", bits: 16 }),
	);
	writeFileSync(
		path("tone32.wav"),
		makeWav({ sampleRate: 44_100, channels: 2, frames: 44_100, encoding: "pcm", bits: 32 }),
	);
	writeFileSync(
		path("mono32.wav"),
		makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 32 }),
	);
	const cbr = encode("lame", ["--quiet", "-b", "128", path("tone.wav"), path("cbr.mp3")], "cbr.mp3");
	const vbr = encode("lame", ["--quiet", "-V", "4", path("tone.wav"), path("vbr.mp3")], "vbr.mp3");
	const mono8k = encode("lame", ["--quiet", "-b", "16", path("mono8k.wav"), path("mono8k.mp3")], "mono8k.mp3");
	const flac32 = encode("flac", ["-s", "-f", "-8", "-o", path("tone32.flac"), path("tone32.wav")], "tone32.flac");
	const mono32 = encode("flac", ["-s", "-f", "-0", "-o", path("mono32.flac"), path("mono32.wav")], "mono32.flac");
	const mime = "audio/mpeg";
	return [
		{ name: "MP3 from lame, CBR with an Info tag", mimeType: mime, bytes: cbr, expect: completed(4, 44_100, 2) },
		{ name: "MP3 from lame, VBR with a Xing tag", mimeType: mime, bytes: vbr, expect: completed(4, 44_100, 2) },
		{
			name: "MP3 from lame at 8 kHz mono (MPEG-2.5)",
			mimeType: mime,
			bytes: mono8k,
			expect: completed(1, 8000, 1, { tolerance: 0.2 }),
		},
		{
			name: "MP3 from lame cut in half",
			mimeType: mime,
			bytes: cbr.subarray(0, Math.floor(cbr.length / 2)),
			// Its Info tag still says 4 s; the service must state, and deliver, the 2 s the file holds.
			expect: completed(2, 44_100, 2, { tolerance: 0.05 }),
		},
		{
			name: "MP3 from lame, VBR cut at 70%",
			mimeType: mime,
			bytes: vbr.subarray(0, Math.floor(vbr.length * 0.7)),
			expect: completed(2.8, 44_100, 2, { tolerance: 0.4 }),
		},
		{
			name: "MP3 from lame starting mid-frame",
			mimeType: mime,
			bytes: cbr.subarray(5001),
			// Without its Info tag no encoder delay and padding (0.05 s together) are removed any more.
			expect: completed(4 - 5001 / 16_000, 44_100, 2, { tolerance: 0.1 }),
		},
		{
			name: "MP3 from lame after an ID3 tag and junk",
			mimeType: mime,
			bytes: concatBytes([asciiBytes("ID3\x03\0\0\0\0\0\x20"), new Uint8Array(32), cbr.subarray(777)]),
			expect: completed(4 - 777 / 16_000, 44_100, 2, { tolerance: 0.1 }),
		},
		{
			name: "MP3 from lame, preview of a cut file",
			mimeType: mime,
			bytes: vbr.subarray(0, Math.floor(vbr.length * 0.5)),
			usePreview: true,
			expect: completed(2, 44_100, 2, { tolerance: 0.3 }),
		},
		{ name: "FLAC 32-bit stereo from flac -8", mimeType: "audio/flac", bytes: flac32, expect: completed(1, 44_100, 2) },
		{ name: "FLAC 32-bit mono from flac -0", mimeType: "audio/flac", bytes: mono32, expect: completed(1, 16_000) },
		{
			name: "FLAC 32-bit cut short",
			mimeType: "audio/flac",
			bytes: flac32.subarray(0, Math.floor(flac32.length * 0.6)),
			expect: failed("corrupted_source", "truncated"),
		},
	];
}

/** The whole corpus; the encoded files are made in a temporary folder that is removed again. */
export function hostileAudioCorpus(): CorpusFile[] {
	const dir = mkdtempSync(join(tmpdir(), "hostile-audio-"));
	try {
		return [...wavCases(), ...otherCases(), ...flacCases(), ...mp3Cases(), ...encodedCases(dir)];
	} finally {
		rmSync(dir, { recursive: true, force: true });
	}
}
