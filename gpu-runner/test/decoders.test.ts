import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeFlac } from "../../test/support/flac-generator.ts";
import { decodeSource, sniffFormat } from "../src/audio/decode-source.ts";
import type { AudioBlock } from "../src/audio/pcm.ts";
import { decodeWav } from "../src/audio/wav-decoder.ts";
import { decodeWideFlac } from "../src/audio/wide-flac-decoder.ts";
import { cents, medianPitch, sine, trackPitch } from "./helpers/signals.ts";
import { bytesOf, collect } from "./helpers/streams.ts";
import { missingToolsMessage, run } from "./helpers/tools.ts";
import { makeWav, type WavEncoding } from "./helpers/wav-files.ts";

const SAMPLE_RATE = 16_000;
const left = sine(440, 0.5, SAMPLE_RATE, 0.5);
const right = sine(660, 0.5, SAMPLE_RATE, 0.25);

async function decode(bytes: Uint8Array, chunkBytes = 4099) {
	return collect(decodeSource(bytesOf(bytes, chunkBytes)));
}

/** The speakers the first decoded block of a file states (`AudioBlock.channelMask`). */
async function firstBlockMask(path: string): Promise<number | undefined> {
	for await (const block of decodeSource(bytesOf(new Uint8Array(readFileSync(path))))) return block.channelMask;
	return undefined;
}

function maxError(actual: Float32Array, expected: Float32Array): number {
	let max = 0;
	for (let i = 0; i < expected.length; i++)
		max = Math.max(max, Math.abs((actual[i] as number) - (expected[i] as number)));
	return max;
}

describe("WAV decoder", () => {
	const encodings: [WavEncoding, number][] = [
		[{ kind: "pcm", bits: 8 }, 1 / 64],
		[{ kind: "pcm", bits: 16 }, 1e-4],
		[{ kind: "pcm", bits: 24 }, 1e-6],
		[{ kind: "pcm", bits: 32 }, 1e-7],
		[{ kind: "float", bits: 32 }, 1e-7],
		[{ kind: "float", bits: 64 }, 1e-7],
	];
	for (const [encoding, tolerance] of encodings) {
		for (const extensible of [false, true]) {
			it(`decodes ${encoding.kind} ${encoding.bits}-bit stereo${extensible ? " (WAVE_FORMAT_EXTENSIBLE)" : ""}`, async () => {
				// Odd chunk sizes split frames and headers across network chunks.
				const out = await decode(makeWav([left, right], SAMPLE_RATE, encoding, { extensible, extraChunk: true }), 997);
				expect(out.sampleRate).toBe(SAMPLE_RATE);
				expect(out.channels).toHaveLength(2);
				expect(out.channels[0]?.length).toBe(left.length);
				expect(maxError(out.channels[0] as Float32Array, left)).toBeLessThanOrEqual(tolerance);
				expect(maxError(out.channels[1] as Float32Array, right)).toBeLessThanOrEqual(tolerance);
			});
		}
	}

	it("reads a streamed WAV whose data size was left at 0", async () => {
		const bytes = makeWav([left], SAMPLE_RATE, { kind: "pcm", bits: 16 });
		new DataView(bytes.buffer).setUint32(40, 0, true);
		expect((await decode(bytes)).channels[0]?.length).toBe(left.length);
	});

	it("fails permanently on a truncated data chunk", async () => {
		const bytes = makeWav([left], SAMPLE_RATE, { kind: "pcm", bits: 16 });
		await expect(decode(bytes.subarray(0, 2000))).rejects.toMatchObject({ reason: "corrupted_source" });
	});

	it("fails permanently on a RIFF file that is not WAVE", async () => {
		const bytes = makeWav([left], SAMPLE_RATE, { kind: "pcm", bits: 16 });
		bytes.set([65, 86, 73, 32], 8); // "AVI "
		await expect(decode(bytes)).rejects.toMatchObject({ reason: "corrupted_source" });
	});

	it("reports compressed WAV (ADPCM) as unsupported", async () => {
		const bytes = makeWav([left], SAMPLE_RATE, { kind: "pcm", bits: 16 });
		new DataView(bytes.buffer).setUint16(20, 2, true);
		await expect(decode(bytes)).rejects.toMatchObject({ reason: "unsupported_format" });
	});

	it.each([
		["a NaN", Number.NaN, /has a NaN sample at 0\.250 s \(frame 4000, channel 2\)/],
		["a +Inf", Number.POSITIVE_INFINITY, /has an infinite \(\+Inf\) sample at 0\.250 s/],
		["a -Inf", Number.NEGATIVE_INFINITY, /has an infinite \(-Inf\) sample at 0\.250 s/],
	])("refuses a float WAV with %s sample as corrupted, saying where it is", async (_name, value, message) => {
		for (const bits of [32, 64] as const) {
			const bytes = makeWav([left, right], SAMPLE_RATE, { kind: "float", bits });
			const at = 44 + (4000 * 2 + 1) * (bits / 8); // frame 4000, second channel
			const view = new DataView(bytes.buffer);
			if (bits === 32) view.setFloat32(at, value, true);
			else view.setFloat64(at, value, true);
			await expect(decode(bytes)).rejects.toMatchObject({ reason: "corrupted_source", message });
		}
	});

	it("fails on a header with no data chunk", async () => {
		const bytes = makeWav([left], SAMPLE_RATE, { kind: "pcm", bits: 16 });
		await expect(decode(bytes.subarray(0, 36))).rejects.toMatchObject({ reason: "corrupted_source" });
	});
});

describe("FLAC frames that leave the sample rate to STREAMINFO", () => {
	it("decodes them (the format allows it; the wasm decoder loses sync on them)", async () => {
		const frames = 44_100 + 333;
		for (const [channels, bitsPerSample] of [
			[2, 16],
			[1, 24],
			[1, 8],
		] as const) {
			const bytes = makeFlac({
				sampleRate: 44_100,
				channels,
				bitsPerSample,
				frames,
				blockSize: 1152,
				paddingBytes: 300,
			});
			const out = await decode(bytes, 3001);
			expect(out.sampleRate).toBe(44_100);
			expect(out.channels).toHaveLength(channels);
			expect(out.channels[0]?.length).toBe(frames);
			// The generator writes a 220 Hz sine of amplitude 0.5, rounded to the sample width.
			const expected = Float32Array.from(
				{ length: frames },
				(_, i) => 0.5 * Math.sin((2 * Math.PI * 220 * i) / 44_100),
			);
			expect(maxError(out.channels[0] as Float32Array, expected)).toBeLessThanOrEqual(2 ** (1 - bitsPerSample));
		}
	});
});

describe("FLAC behind ID3v2 tags", () => {
	/** A tag of `size` body bytes; version 4 with `footer` adds the 10-byte footer. */
	const id3 = (size: number, footer: boolean): Uint8Array => {
		const syncsafe = [21, 14, 7, 0].map((shift) => (size >> shift) & 0x7f);
		const header = [0x49, 0x44, 0x33, footer ? 4 : 3, 0, footer ? 0x10 : 0, ...syncsafe];
		const body = new Uint8Array(size).map((_, i) => (i * 31) % 256);
		return new Uint8Array([...header, ...body, ...(footer ? [0x33, 0x44, 0x49, ...header.slice(3)] : [])]);
	};
	const flac = makeFlac({ sampleRate: 22_050, channels: 1, bitsPerSample: 16, frames: 22_050 });

	it("decodes as the same FLAC does alone, past two tags and 300 KB of cover art", async () => {
		const tagged = new Uint8Array([...id3(300_000, true), ...id3(100, false), ...flac]);
		const alone = await decode(flac, 4099);
		const out = await decode(tagged, 4099);
		expect(out.sampleRate).toBe(22_050);
		expect(out.channels[0]?.length).toBe(22_050);
		expect(maxError(out.channels[0] as Float32Array, alone.channels[0] as Float32Array)).toBe(0);
	});

	it("fails a file that ends inside its tag as corrupted", async () => {
		const cut = id3(50_000, false).subarray(0, 20_000);
		await expect(decode(cut)).rejects.toMatchObject({ reason: "corrupted_source" });
	});
});

describe("format sniffing", () => {
	it("knows the three formats and names other containers", () => {
		const bytes = (s: string) => new Uint8Array([...s].map((c) => c.charCodeAt(0)));
		expect(sniffFormat(bytes("RIFF\0\0\0\0WAVE"))).toBe("wav");
		expect(sniffFormat(bytes("fLaC\0\0\0\0"))).toBe("flac");
		expect(sniffFormat(bytes("ID3\u0004\0\0"))).toBe("mp3");
		expect(sniffFormat(new Uint8Array([0xff, 0xfb, 0x90, 0x64]))).toBe("mp3");
		expect(sniffFormat(bytes("OggS\0\0\0\0"))).toEqual({ unsupported: "Ogg container" });
		expect(sniffFormat(bytes("hello world!"))).toBeUndefined();
	});

	it("fails random bytes and empty files as corrupted", async () => {
		const noise = new Uint8Array(5000).map((_, i) => (i * 7919) % 251);
		await expect(decode(noise)).rejects.toMatchObject({ reason: "corrupted_source" });
		await expect(decode(new Uint8Array(0))).rejects.toMatchObject({ reason: "corrupted_source" });
	});

	it("reports Ogg as unsupported", async () => {
		const ogg = new Uint8Array(100);
		ogg.set([0x4f, 0x67, 0x67, 0x53]);
		await expect(decode(ogg)).rejects.toMatchObject({ reason: "unsupported_format" });
	});
});

const toolsSkip = missingToolsMessage(["flac", "lame", "sox"]);

describe.skipIf(toolsSkip !== undefined)(`FLAC and MP3 decoders${toolsSkip ? ` (${toolsSkip})` : ""}`, () => {
	let dir: string;
	const rate = 44_100;
	const tone = sine(440, 2, rate, 0.5);
	const toneRight = sine(330, 2, rate, 0.5);

	beforeAll(() => {
		dir = mkdtempSync(join(tmpdir(), "decoders-"));
		writeFileSync(join(dir, "tone16.wav"), makeWav([tone, toneRight], rate, { kind: "pcm", bits: 16 }));
		writeFileSync(join(dir, "tone24.wav"), makeWav([tone], rate, { kind: "pcm", bits: 24 }, { extensible: true }));
		run("flac", ["-s", "-f", "-o", join(dir, "tone16.flac"), join(dir, "tone16.wav")]);
		run("flac", ["-s", "-f", "-o", join(dir, "tone24.flac"), join(dir, "tone24.wav")]);
		run("lame", ["--quiet", "-b", "192", join(dir, "tone16.wav"), join(dir, "tone.mp3")]);
		run("lame", [
			"--quiet",
			"-m",
			"m",
			"-b",
			"64",
			"--resample",
			"22.05",
			join(dir, "tone24.wav"),
			join(dir, "mono22k.mp3"),
		]);
	});
	afterAll(() => rmSync(dir, { recursive: true, force: true }));

	it("decodes 16-bit stereo FLAC losslessly", async () => {
		const out = await decode(new Uint8Array(readFileSync(join(dir, "tone16.flac"))), 8191);
		expect(out.sampleRate).toBe(rate);
		expect(out.channels).toHaveLength(2);
		expect(out.channels[0]?.length).toBe(tone.length);
		expect(maxError(out.channels[0] as Float32Array, tone)).toBeLessThanOrEqual(1e-4);
		expect(maxError(out.channels[1] as Float32Array, toneRight)).toBeLessThanOrEqual(1e-4);
	});

	it("decodes 24-bit mono FLAC made from an extensible WAV", async () => {
		const out = await decode(new Uint8Array(readFileSync(join(dir, "tone24.flac"))));
		expect(out.channels).toHaveLength(1);
		expect(maxError(out.channels[0] as Float32Array, tone)).toBeLessThanOrEqual(1e-6);
	});

	it("decodes stereo MP3 gaplessly at the right pitch and length", async () => {
		const out = await decode(new Uint8Array(readFileSync(join(dir, "tone.mp3"))), 16_384);
		expect(out.sampleRate).toBe(rate);
		expect(out.channels).toHaveLength(2);
		expect(Math.abs((out.channels[0]?.length ?? 0) - tone.length)).toBeLessThanOrEqual(Math.round(rate * 0.01));
		const pitch = medianPitch(trackPitch(out.channels[0] as Float32Array, rate));
		expect(Math.abs(cents(pitch, 440))).toBeLessThan(5);
	});

	it("decodes an MP3 with zeros or junk after its last frame to its full length, as other decoders do", async () => {
		const mp3 = new Uint8Array(readFileSync(join(dir, "tone.mp3")));
		const clean = await decode(mp3);
		const junk = new Uint8Array(20_000).map((_, i) => (i * 7919) & 255);
		for (const tail of [new Uint8Array(4096), junk]) {
			const out = await decode(new Uint8Array([...mp3, ...tail]), 16_384);
			expect(out.channels).toHaveLength(2);
			expect(out.channels[0]?.length).toBe(clean.channels[0]?.length);
		}
	});

	it("decodes mono 22.05 kHz MP3", async () => {
		const out = await decode(new Uint8Array(readFileSync(join(dir, "mono22k.mp3"))));
		expect(out.sampleRate).toBe(22_050);
		expect(out.channels).toHaveLength(1);
		expect(Math.abs((out.channels[0]?.length ?? 0) / 22_050 - 2)).toBeLessThanOrEqual(0.01);
	});

	it("takes a FLAC's speakers from its WAVEFORMATEXTENSIBLE_CHANNEL_MASK tag, as flac writes it, in chunks of any size", async () => {
		// Quad with side speakers (FL FR SL SR): not FLAC's own 4-channel layout (FL FR BL BR), so flac tags it.
		const quad = [0, 1, 2, 3].map((c) => sine(200 + 70 * c, 0.3, 16_000, 0.3));
		writeFileSync(
			join(dir, "quad.wav"),
			makeWav(quad, 16_000, { kind: "pcm", bits: 16 }, { extensible: true, channelMask: 0x603 }),
		);
		const flac = join(dir, "quad.flac");
		run("flac", ["-s", "-f", "-o", flac, join(dir, "quad.wav")]);
		// The tag after a comment too long to be it (skipped as it streams by) and in lower case.
		run("metaflac", ["--remove-all-tags", `--set-tag=LYRICS=${"la ".repeat(3000)}`, flac]);
		run("metaflac", ["--set-tag=waveformatextensible_channel_mask=0x0603", flac]);
		const bytes = new Uint8Array(readFileSync(flac));
		for (const chunkBytes of [1, 7, 4099]) {
			const blocks: AudioBlock[] = [];
			for await (const block of decodeSource(bytesOf(bytes, chunkBytes))) blocks.push(block);
			expect(blocks[0]?.channels.length).toBe(4);
			expect(
				blocks.map((block) => block.channelMask),
				`chunks of ${chunkBytes} bytes`,
			).toEqual(blocks.map(() => 0x603));
		}
		// A tag naming another number of speakers than the stream has, or none: FLAC's own layout.
		run("metaflac", ["--remove-all-tags", "--set-tag=WAVEFORMATEXTENSIBLE_CHANNEL_MASK=0x7", flac]);
		expect(await firstBlockMask(flac)).toBe(0x33);
		run("metaflac", ["--remove-all-tags", flac]);
		expect(await firstBlockMask(flac)).toBe(0x33);
	});

	it("decodes 32-bit FLAC (as flac 1.4 writes it) sample for sample, stereo and mono, at every compression level", async () => {
		const stereo = makeWav([tone, toneRight], rate, { kind: "pcm", bits: 32 });
		const mono = makeWav([toneRight], rate, { kind: "pcm", bits: 32 }, { extensible: true });
		for (const [name, wav] of [
			["stereo32", stereo],
			["mono32", mono],
		] as const) {
			writeFileSync(join(dir, `${name}.wav`), wav);
			const expected = await collect(decodeWav(bytesOf(wav)));
			for (const level of ["-0", "-5", "-8"]) {
				run("flac", ["-s", "-f", level, "-o", join(dir, `${name}.flac`), join(dir, `${name}.wav`)]);
				const out = await decode(new Uint8Array(readFileSync(join(dir, `${name}.flac`))), 7001);
				expect(out.sampleRate).toBe(rate);
				expect(out.channels).toHaveLength(expected.channels.length);
				expected.channels.forEach((channel, c) => {
					expect(out.channels[c]?.length).toBe(channel.length);
					expect(maxError(out.channels[c] as Float32Array, channel)).toBe(0);
				});
			}
		}
	});

	it("reads 16- and 24-bit FLAC with the 32-bit decoder exactly as libFLAC does", async () => {
		for (const name of ["tone16", "tone24"]) {
			const flac = new Uint8Array(readFileSync(join(dir, `${name}.flac`)));
			const ours = await collect(decodeWideFlac(bytesOf(flac, 5003)));
			const wav = await collect(decodeWav(bytesOf(new Uint8Array(readFileSync(join(dir, `${name}.wav`))))));
			expect(ours.channels).toHaveLength(wav.channels.length);
			wav.channels.forEach((channel, c) => {
				expect(maxError(ours.channels[c] as Float32Array, channel)).toBe(0);
			});
		}
	});

	it("fails a 32-bit FLAC with a damaged frame as corrupted", async () => {
		run("flac", ["-s", "-f", "-o", join(dir, "stereo32.flac"), join(dir, "stereo32.wav")]);
		const bytes = new Uint8Array(readFileSync(join(dir, "stereo32.flac")));
		bytes[bytes.length - 5000] = (bytes[bytes.length - 5000] as number) ^ 0x10;
		await expect(decode(bytes)).rejects.toMatchObject({ reason: "corrupted_source", message: /CRC|FLAC/ });
	});

	it("fails a FLAC file with damaged frames as corrupted", async () => {
		const bytes = new Uint8Array(readFileSync(join(dir, "tone16.flac")));
		for (let i = 2000; i < bytes.length - 1000; i += 1500) bytes[i] = (bytes[i] as number) ^ 0x5a;
		await expect(decode(bytes)).rejects.toMatchObject({ reason: "corrupted_source" });
	});

	it("fails a FLAC header followed by garbage as corrupted", async () => {
		const bytes = new Uint8Array(readFileSync(join(dir, "tone16.flac")));
		const garbage = new Uint8Array(20_000).map((_, i) => (i * 31) % 256);
		const head = bytes.subarray(0, 8192 - 4096);
		await expect(decode(new Uint8Array([...head.subarray(0, 42), ...garbage]))).rejects.toMatchObject({
			reason: "corrupted_source",
		});
	});

	it("fails an ID3 tag followed by garbage as corrupted", async () => {
		const id3 = new Uint8Array([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 0]);
		const garbage = new Uint8Array(20_000).map((_, i) => (i * 13) % 200);
		await expect(decode(new Uint8Array([...id3, ...garbage]))).rejects.toMatchObject({ reason: "corrupted_source" });
	});
});
