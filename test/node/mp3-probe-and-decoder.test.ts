/**
 * Preprocessing (the Worker's probe) and the runner's decoder must agree on how many frames an MP3 holds, whatever
 * state it arrives in: the conversion's output is made exactly as long as preprocessing stated. This test sits at
 * the root because it runs both sides; the runner itself never imports the Worker.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeSource } from "../../gpu-runner/src/audio/decode-source.ts";
import { sine } from "../../gpu-runner/test/helpers/signals.ts";
import { bytesOf, collect } from "../../gpu-runner/test/helpers/streams.ts";
import { missingToolsMessage, run } from "../../gpu-runner/test/helpers/tools.ts";
import { makeWav } from "../../gpu-runner/test/helpers/wav-files.ts";
import { memoryByteSource } from "../../src/audio-files/probe/byte-source.ts";
import { probeAudio } from "../../src/audio-files/probe/probe-audio.ts";
import { apeTag, id3v1, id3v2WithFooter } from "../support/appended-tags.ts";
import { concatBytes } from "../support/pcm.ts";

const toolsSkip = missingToolsMessage(["lame"]);

describe.skipIf(toolsSkip !== undefined)(`MP3 frames, stated and decoded${toolsSkip ? ` (${toolsSkip})` : ""}`, () => {
	let dir: string;
	const rate = 44_100;
	const tone = sine(440, 2, rate, 0.5);

	beforeAll(() => {
		dir = mkdtempSync(join(tmpdir(), "mp3-agreement-"));
		writeFileSync(join(dir, "stereo.wav"), makeWav([tone, sine(330, 2, rate, 0.5)], rate, { kind: "pcm", bits: 16 }));
		writeFileSync(join(dir, "mono.wav"), makeWav([tone], rate, { kind: "pcm", bits: 24 }, { extensible: true }));
		run("lame", ["--quiet", "-b", "192", join(dir, "stereo.wav"), join(dir, "tone.mp3")]);
		run("lame", [
			"--quiet",
			"-m",
			"m",
			"-b",
			"64",
			"--resample",
			"22.05",
			join(dir, "mono.wav"),
			join(dir, "mono22k.mp3"),
		]);
		// No Xing/Info frame (-t): its length comes from its size, as the CBR streams of some encoders and cutters.
		run("lame", ["--quiet", "-t", "-b", "128", join(dir, "stereo.wav"), join(dir, "bare-cbr.mp3")]);
		// The same at the MPEG-2 and MPEG-2.5 (LSF) rates, whose frames hold 576 samples. Below about 40 kb/s at
		// 16 kHz lame leaves the Info frame out by itself (it does not fit in one frame), so these are common.
		for (const [rate, kbps] of [
			[24, 64],
			[22.05, 48],
			[16, 32],
			[11.025, 24],
			[8, 16],
		] as const) {
			run("lame", [
				"--quiet",
				"-t",
				"-m",
				"m",
				"-b",
				String(kbps),
				"--resample",
				String(rate),
				join(dir, "mono.wav"),
				join(dir, `bare-cbr-${rate}k.mp3`),
			]);
		}
		// A second take, VBR and 1.5 s long, plain and tagged (ID3v2 in front, ID3v1 behind), for joined files.
		writeFileSync(
			join(dir, "take.wav"),
			makeWav([sine(330, 1.5, rate, 0.5), sine(220, 1.5, rate, 0.5)], rate, { kind: "pcm", bits: 16 }),
		);
		run("lame", ["--quiet", "-V", "2", join(dir, "take.wav"), join(dir, "take.mp3")]);
		for (const [from, to, title] of [
			["stereo.wav", "tone-tagged.mp3", "One"],
			["take.wav", "take-tagged.mp3", "Two"],
		]) {
			run("lame", [
				"--quiet",
				"-b",
				"192",
				"--tt",
				title as string,
				"--add-id3v2",
				join(dir, from as string),
				join(dir, to as string),
			]);
		}
	});
	afterAll(() => rmSync(dir, { recursive: true, force: true }));

	/** Decoded frames of an MP3 and the frames preprocessing says it holds: they must be the same number. */
	async function decodedAndStated(bytes: Uint8Array) {
		const probe = await probeAudio(memoryByteSource(bytes));
		if (!probe.ok) throw new Error(`probe refused the file: ${probe.message}`);
		const out = await collect(decodeSource(bytesOf(bytes, 10_007)));
		return {
			decoded: out.channels[0]?.length ?? 0,
			seconds: (out.channels[0]?.length ?? 0) / out.sampleRate,
			stated: Math.round(probe.durationSeconds * probe.sampleRate),
			channels: [out.channels.length, probe.channels],
		};
	}

	it("decodes an MP3 that starts in the middle of a frame from its first whole frame, as preprocessing measures it", async () => {
		for (const [name, cut] of [
			["tone.mp3", 5001],
			["tone.mp3", 417],
			["mono22k.mp3", 1234],
		] as const) {
			const bytes = new Uint8Array(readFileSync(join(dir, name))).subarray(cut);
			const { decoded, seconds, stated, channels } = await decodedAndStated(bytes);
			expect(decoded, `${name} from byte ${cut}`).toBe(stated);
			expect(seconds).toBeGreaterThan(1.8);
			expect(channels[0]).toBe(channels[1]);
		}
	});

	it("states and decodes the same frames when bytes other than a tag follow the last frame", async () => {
		const junk = Uint8Array.from({ length: 3000 }, (_, i) => (i * 73 + 11) % 256);
		const trailers: [string, Uint8Array][] = [
			["4 KiB of zero bytes", new Uint8Array(4096)],
			["3000 bytes of junk", junk],
			["a cut tag", Uint8Array.from("TAG A title", (c) => c.charCodeAt(0))],
			["an APE tag and an ID3v1 tag", concatBytes([apeTag({ Title: "A title" }), id3v1()])],
			["an ID3v2 tag with a footer", id3v2WithFooter()],
		];
		for (const name of ["bare-cbr.mp3", "tone.mp3"]) {
			const whole = new Uint8Array(readFileSync(join(dir, name)));
			const alone = await decodedAndStated(whole);
			for (const [what, trailer] of trailers) {
				const bytes = new Uint8Array(whole.length + trailer.length);
				bytes.set(whole);
				bytes.set(trailer, whole.length);
				const { decoded, stated } = await decodedAndStated(bytes);
				expect(decoded, `${name} and ${what}`).toBe(stated);
				expect(stated, `${name} and ${what}`).toBe(alone.stated);
			}
		}
	});

	it("states all of two MP3 files joined end to end (cat), whose first header counts the first file only", async () => {
		const read = (name: string) => new Uint8Array(readFileSync(join(dir, name)));
		for (const [first, second] of [
			["tone.mp3", "take.mp3"],
			["take.mp3", "tone.mp3"],
			["tone.mp3", "tone.mp3"],
			["tone-tagged.mp3", "take-tagged.mp3"],
		] as const) {
			const alone = (await decodedAndStated(read(first))).stated + (await decodedAndStated(read(second))).stated;
			const { decoded, stated } = await decodedAndStated(concatBytes([read(first), read(second)]));
			expect(decoded, `${first} then ${second}`).toBe(stated);
			// Both files, and the second's header frame, encoder delay and padding, which a decoder plays too.
			expect(stated - alone, `${first} then ${second}`).toBeGreaterThanOrEqual(0);
			expect(stated - alone, `${first} then ${second}`).toBeLessThan(3 * 1152);
		}
	});

	it("states and decodes every frame of a CBR stream without a Xing/Info frame, MPEG-1, 2 and 2.5 alike", async () => {
		// With no LAME tag nothing says how long the encoder delay and padding are, so preprocessing counts every frame
		// and the decoder plays every frame: the encoder's 576 samples of delay, the decoder's 529 and the padding are
		// part of the stated and decoded audio, at the MPEG-2 and 2.5 rates as at MPEG-1.
		for (const [name, samplesPerFrame, codec] of [
			["bare-cbr.mp3", 1152, "MPEG-1 Layer III, CBR"],
			["bare-cbr-24k.mp3", 576, "MPEG-2 Layer III, CBR"],
			["bare-cbr-22.05k.mp3", 576, "MPEG-2 Layer III, CBR"],
			["bare-cbr-16k.mp3", 576, "MPEG-2 Layer III, CBR"],
			["bare-cbr-11.025k.mp3", 576, "MPEG-2.5 Layer III, CBR"],
			["bare-cbr-8k.mp3", 576, "MPEG-2.5 Layer III, CBR"],
		] as const) {
			const bytes = new Uint8Array(readFileSync(join(dir, name)));
			const probe = await probeAudio(memoryByteSource(bytes));
			expect(probe, name).toMatchObject({ ok: true, codec });
			const { decoded, stated } = await decodedAndStated(bytes);
			expect(decoded, name).toBe(stated);
			expect(stated % samplesPerFrame, name).toBe(0);
			// The encoded 2 s, and the delays and padding: more than 576 + 529 samples, less than that and two frames.
			const encoded = 2 * (probe.ok ? probe.sampleRate : 0);
			expect(stated - encoded, name).toBeGreaterThanOrEqual(576 + 529);
			expect(stated - encoded, name).toBeLessThan(576 + 529 + 2 * samplesPerFrame);
		}
	});

	it("decodes a truncated MP3 to exactly the length preprocessing reports for it", async () => {
		const whole = new Uint8Array(readFileSync(join(dir, "tone.mp3")));
		for (const keep of [0.5, 0.9, 0.999]) {
			const { decoded, stated } = await decodedAndStated(whole.subarray(0, Math.round(whole.length * keep)));
			expect(decoded, `first ${keep * 100}%`).toBe(stated);
			expect(decoded).toBeLessThan(tone.length);
		}
	});
});
