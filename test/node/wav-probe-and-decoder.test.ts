/**
 * Preprocessing (the Worker's probe) and the runner's decoder must agree on every WAV: a file preprocessing calls
 * `ready` is one the runner decodes to the length preprocessing stated, and one the runner cannot decode is refused
 * at preprocessing, with its reason, not at each conversion. This test sits at the root because it runs both sides;
 * the runner itself never imports the Worker.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeSource } from "../../gpu-runner/src/audio/decode-source.ts";
import { WavFileWriter } from "../../gpu-runner/src/audio/wav-file-writer.ts";
import { sine } from "../../gpu-runner/test/helpers/signals.ts";
import { bytesOf, collect } from "../../gpu-runner/test/helpers/streams.ts";
import { hasTool } from "../../gpu-runner/test/helpers/tools.ts";
import { memoryByteSource } from "../../src/audio-files/probe/byte-source.ts";
import { probeAudio } from "../../src/audio-files/probe/probe-audio.ts";
import { asciiBytes, concatBytes } from "../support/pcm.ts";
import { makeWav, type WavOptions } from "../support/wav-generator.ts";

const STEREO: WavOptions = { sampleRate: 44_100, channels: 2, frames: 44_100, encoding: "pcm", bits: 16 };

/** The frames preprocessing states and the frames the runner decodes, fed in pieces as from the network. */
async function statedAndDecoded(bytes: Uint8Array) {
	const probe = await probeAudio(memoryByteSource(bytes));
	if (!probe.ok) throw new Error(`preprocessing refused the file: ${probe.message}`);
	const out = await collect(decodeSource(bytesOf(bytes, 4099)));
	return {
		stated: Math.round(probe.durationSeconds * probe.sampleRate),
		decoded: out.channels[0]?.length ?? 0,
		channels: [probe.channels, out.channels.length],
	};
}

/** Both sides refuse the file: preprocessing with its status, and the runner's decoder. */
async function refusedByBoth(bytes: Uint8Array) {
	const probe = await probeAudio(memoryByteSource(bytes));
	const decoded = collect(decodeSource(bytesOf(bytes, 4099))).then(
		() => "decoded",
		(error: Error) => error.message,
	);
	return { probe: probe.ok ? "ready" : probe.code, runner: await decoded };
}

/** A 16-bit stereo WAV with an odd-sized LIST chunk before its data, its pad byte left out as some writers do. */
function withoutPadByte(): Uint8Array {
	const list = { id: "LIST", body: asciiBytes("INFOISFT\x05\x00\x00\x00tool\x00") };
	expect(list.body.byteLength % 2).toBe(1);
	const padded = makeWav({ ...STEREO, extraChunks: [list] });
	const listAt = 12 + 8 + 16;
	const padAt = listAt + 8 + list.body.byteLength;
	expect(padded[padAt]).toBe(0);
	const bytes = concatBytes([padded.subarray(0, padAt), padded.subarray(padAt + 1)]);
	new DataView(bytes.buffer).setUint32(4, bytes.byteLength - 8, true);
	return bytes;
}

describe("WAV frames, stated and decoded", () => {
	const cases: [string, Uint8Array, number][] = [
		["a plain 16-bit stereo file", makeWav(STEREO), 44_100],
		["WAVE_FORMAT_EXTENSIBLE, 24-bit", makeWav({ ...STEREO, bits: 24, extensible: true }), 44_100],
		[
			"32-bit float with an odd LIST chunk and its pad byte",
			makeWav({ ...STEREO, encoding: "float", bits: 32, extraChunks: [{ id: "LIST", body: new Uint8Array(9) }] }),
			44_100,
		],
		[
			"RF64, sizes in its ds64 chunk (what broadcast recorders and ffmpeg -rf64 write)",
			makeWav({ ...STEREO, rf64: true }),
			44_100,
		],
		["RF64, extensible 24-bit", makeWav({ ...STEREO, bits: 24, extensible: true, rf64: true }), 44_100],
		["a streamed file whose data size is 0xFFFFFFFF", makeWav({ ...STEREO, dataSizeField: 0xffffffff }), 44_100],
		["a recorder's file whose data size was left at 0", makeWav({ ...STEREO, dataSizeField: 0 }), 44_100],
		["an odd LIST chunk without its pad byte", withoutPadByte(), 44_100],
		["a LIST chunk after the data", concatBytes([makeWav(STEREO), asciiBytes("LIST\x04\x00\x00\x00INFO")]), 44_100],
	];

	for (const [name, bytes, frames] of cases) {
		it(`${name}: preprocessing states what the runner decodes`, async () => {
			expect(await statedAndDecoded(bytes)).toEqual({ stated: frames, decoded: frames, channels: [2, 2] });
		});
	}

	it("refuses an empty data chunk on both sides, also with other chunks after it", async () => {
		const empty = makeWav({ ...STEREO, frames: 0 });
		expect(await refusedByBoth(empty)).toEqual({ probe: "zero_duration", runner: expect.stringMatching(/no audio/) });
		const emptyThenList = concatBytes([empty, asciiBytes("LIST\x04\x00\x00\x00INFO")]);
		new DataView(emptyThenList.buffer).setUint32(4, emptyThenList.byteLength - 8, true);
		expect((await refusedByBoth(emptyThenList)).probe).toBe("zero_duration");
	});

	it("refuses a file cut inside its data chunk on both sides", async () => {
		const whole = makeWav(STEREO);
		expect(await refusedByBoth(whole.subarray(0, whole.byteLength - 1000))).toEqual({
			probe: "truncated",
			runner: expect.stringMatching(/truncated/),
		});
	});

	it("refuses an RF64 file without its ds64 chunk on both sides", async () => {
		const bytes = makeWav({ ...STEREO, dataSizeField: 0xffffffff });
		bytes.set(asciiBytes("RF64"), 0);
		expect(await refusedByBoth(bytes)).toEqual({ probe: "corrupted", runner: expect.stringMatching(/ds64/) });
	});
});

/**
 * The runner's output WAVs, read again: a client may upload an output as a new source, and other tools must read it
 * too. More than 2 channels are WAVE_FORMAT_EXTENSIBLE with the channel mask given, as Microsoft's WAVE format
 * documentation asks; mono and stereo keep the plain 44-byte header every reader knows.
 */
describe("the runner's output WAVs, read again", () => {
	const rate = 16_000;
	const frames = 4_000;
	const layouts: [channels: number, mask: number][] = [
		[1, 0],
		[2, 0],
		[3, 0],
		[6, 0x3f],
		[8, 0x63f],
	];
	let dir: string;
	beforeAll(() => {
		dir = mkdtempSync(join(tmpdir(), "wav-output-"));
	});
	afterAll(() => rmSync(dir, { recursive: true, force: true }));

	/** A distinct tone per channel, so a reader that mixed up the channels is caught. */
	const tones = (channels: number) =>
		Array.from({ length: channels }, (_, c) => sine(200 + 100 * c, frames / rate, rate, 0.5));

	async function writeOutput(channels: number, channelMask: number): Promise<{ path: string; bytes: Uint8Array }> {
		const path = join(dir, `out-${channels}.wav`);
		const writer = await WavFileWriter.create(path, rate, channels, { channelMask });
		await writer.write({ sampleRate: rate, channels: tones(channels) });
		const info = await writer.finish();
		const bytes = new Uint8Array(readFileSync(path));
		expect(info.sizeBytes).toBe(bytes.byteLength);
		return { path, bytes };
	}

	for (const [channels, mask] of layouts) {
		it(`${channels} channel(s): ${channels > 2 ? `extensible, mask 0x${mask.toString(16)}` : "plain PCM"}, read back by preprocessing and the runner`, async () => {
			const { bytes } = await writeOutput(channels, mask);
			const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
			const fmtSize = view.getUint32(16, true);
			if (channels > 2) {
				expect(fmtSize).toBe(40);
				expect(view.getUint16(20, true)).toBe(0xfffe);
				expect(view.getUint16(36, true)).toBe(22); // cbSize
				expect(view.getUint16(38, true)).toBe(16); // valid bits
				expect(view.getUint32(40, true)).toBe(mask);
				// KSDATAFORMAT_SUBTYPE_PCM
				expect(Array.from(bytes.subarray(44, 60))).toEqual([
					1, 0, 0, 0, 0, 0, 0x10, 0, 0x80, 0, 0, 0xaa, 0, 0x38, 0x9b, 0x71,
				]);
			} else {
				expect(fmtSize).toBe(16);
				expect(view.getUint16(20, true)).toBe(1);
			}
			expect(String.fromCharCode(...bytes.subarray(20 + fmtSize, 24 + fmtSize))).toBe("data");
			expect(view.getUint32(4, true)).toBe(bytes.byteLength - 8);

			const probe = await probeAudio(memoryByteSource(bytes));
			expect(probe).toMatchObject({ ok: true, channels, sampleRate: rate, durationSeconds: frames / rate });
			if (probe.ok) expect(probe.codec).toBe(channels > 2 ? "PCM 16-bit (extensible)" : "PCM 16-bit");
			const decoded = await collect(decodeSource(bytesOf(bytes, 4099)));
			expect(decoded.channels).toHaveLength(channels);
			tones(channels).forEach((tone, c) => {
				const channel = decoded.channels[c] as Float32Array;
				expect(channel).toHaveLength(frames);
				const worst = tone.reduce((m, x, i) => Math.max(m, Math.abs(x - (channel[i] as number))), 0);
				expect(worst, `channel ${c}`).toBeLessThanOrEqual(1 / 32767);
			});
		});
	}

	it.skipIf(!hasTool("sox"))("sox reads every channel count", async () => {
		for (const [channels, mask] of layouts) {
			const { path } = await writeOutput(channels, mask);
			const info = execFileSync("soxi", [path], { encoding: "utf8" });
			expect(info).toMatch(new RegExp(`Channels\\s*: ${channels}\\n`));
			expect(info).toMatch(/Sample Rate\s*: 16000\n/);
			expect(info).toMatch(new RegExp(`Duration\\s*: .* = ${frames} samples`));
			expect(info).toMatch(/Sample Encoding: 16-bit Signed Integer PCM/);
		}
	});

	const scipy = spawnSync("python3", ["-c", "import scipy.io.wavfile"]).status === 0;
	it.skipIf(!scipy)("scipy.io.wavfile reads every channel count", async () => {
		for (const [channels, mask] of layouts) {
			const { path } = await writeOutput(channels, mask);
			const script = "import sys, scipy.io.wavfile as w; r, d = w.read(sys.argv[1]); print(r, d.dtype, d.shape)";
			const shape = execFileSync("python3", ["-c", script, path], { encoding: "utf8" }).trim();
			expect(shape).toBe(channels === 1 ? `16000 int16 (${frames},)` : `16000 int16 (${frames}, ${channels})`);
		}
	});
});
