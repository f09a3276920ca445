import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { VoiceDescriptor } from "../../src/contracts/runner.ts";
import { decodeWav } from "../src/audio/wav-decoder.ts";
import { DspEngine } from "../src/engines/dsp/dsp-engine.ts";
import { cents, harmonicTone, median, medianPitch, peak, sine, trackPitch, voicedRmsDb } from "./helpers/signals.ts";
import { blocksOf, bytesOf, collect } from "./helpers/streams.ts";
import { missingToolsMessage, run } from "./helpers/tools.ts";

const SEMITONES = [0, 4, -4, 7, -7, 12, -12];

function voice(params: Record<string, unknown> = {}): VoiceDescriptor {
	return { id: "00000000-0000-4000-8000-000000000001", name: "test", engine: "dsp", params, artifacts: [] };
}

async function convert(
	samples: Float32Array,
	sampleRate: number,
	semitones: number,
	params = {},
	voiceSettings?: Record<string, unknown>,
): Promise<Float32Array> {
	const engine = new DspEngine();
	const job = {
		voice: voice(params),
		semitones,
		artifactPaths: new Map(),
		input: { sampleRate, channels: 1 },
		...(voiceSettings ? { voiceSettings } : {}),
	};
	const out = await collect(engine.convert(blocksOf([samples], sampleRate), job, new AbortController().signal));
	expect(out.sampleRate).toBe(sampleRate);
	return out.channels[0] as Float32Array;
}

/** Assert pitch (independent tracker), loudness over voiced parts, length and peak for one shift. */
function expectFaithfulShift(
	source: Float32Array,
	output: Float32Array,
	sampleRate: number,
	semitones: number,
	clarity = 0.9,
) {
	expect(output.length).toBe(source.length);
	const sourceTrack = trackPitch(source, sampleRate, clarity);
	const outputTrack = trackPitch(output, sampleRate, clarity);
	// Median over the frames voiced in both tracks: speech pitch varies, so both medians must see the same frames.
	const both = sourceTrack.frequencies.flatMap((f, i) => (f > 0 && (outputTrack.frequencies[i] ?? 0) > 0 ? [i] : []));
	expect(both.length, "frames voiced in source and output").toBeGreaterThan(50);
	const expected = median(both.map((i) => sourceTrack.frequencies[i] as number)) * 2 ** (semitones / 12);
	const error = cents(median(both.map((i) => outputTrack.frequencies[i] as number)), expected);
	expect(Math.abs(error), `pitch error ${error.toFixed(2)} cents at ${semitones} st`).toBeLessThanOrEqual(10);
	// Loudness over the source's voiced frames, the same time span in both (the engine adds no delay).
	const loudnessDelta = voicedRmsDb(output, sourceTrack) - voicedRmsDb(source, sourceTrack);
	expect(Math.abs(loudnessDelta), `loudness changed by ${loudnessDelta.toFixed(2)} dB`).toBeLessThanOrEqual(1);
	expect(peak(output)).toBeLessThanOrEqual(1);
}

describe("dsp engine on a harmonic tone", () => {
	const sampleRate = 44_100;
	const tone = harmonicTone(150, 3, sampleRate);

	for (const semitones of SEMITONES) {
		it(`shifts by ${semitones} semitones`, async () => {
			expectFaithfulShift(tone, await convert(tone, sampleRate, semitones), sampleRate, semitones);
		});
	}

	it("keeps a full-scale source below clipping", async () => {
		const loud = harmonicTone(220, 2, sampleRate, 0.6); // peaks near 1.0
		const out = await convert(loud, sampleRate, 12);
		expect(peak(loud)).toBeGreaterThan(0.9);
		expect(peak(out)).toBeLessThanOrEqual(1);
	});

	it("formant_shift changes the timbre but not the pitch", async () => {
		const plain = await convert(tone, sampleRate, 4);
		const shifted = await convert(tone, sampleRate, 4, { formant_shift: 5 });
		const expected = 150 * 2 ** (4 / 12);
		expect(Math.abs(cents(medianPitch(trackPitch(shifted, sampleRate)), expected))).toBeLessThanOrEqual(10);
		// A different spectral envelope: the waveforms differ substantially at equal pitch.
		let difference = 0;
		let energy = 0;
		for (let i = sampleRate; i < 2 * sampleRate; i++) {
			difference += ((shifted[i] as number) - (plain[i] as number)) ** 2;
			energy += (plain[i] as number) ** 2;
		}
		expect(difference / energy).toBeGreaterThan(0.1);
	});

	it("takes a job's voice_settings.formant_shift over the voice's, and refuses settings it cannot honour", async () => {
		const voiceOwn = await convert(tone, sampleRate, 4, { formant_shift: 5 });
		const overridden = await convert(tone, sampleRate, 4, { formant_shift: 0 }, { formant_shift: 5 });
		expect(overridden).toEqual(voiceOwn);
		const plain = await convert(tone, sampleRate, 4, { formant_shift: 5 }, { formant_shift: 0 });
		expect(plain).toEqual(await convert(tone, sampleRate, 4, { formant_shift: 0 }));
		await expect(convert(tone, sampleRate, 0, {}, { index_rate: 0.5, formant_shift: 20 })).rejects.toMatchObject({
			name: "PermanentJobError",
			reason: "internal",
			message: expect.stringMatching(
				/voice_settings.index_rate is not honoured by the dsp engine; voice_settings.formant_shift must be a number in -12..12, got 20/,
			),
		});
	});

	it('with pitch_method "exact", shifts pure low tones exactly, and each channel on its own', async () => {
		// The library transposing by itself is up to 26 cents off on these (README, dsp section).
		const errors: string[] = [];
		for (const rate of [16_000, 44_100]) {
			for (const frequency of [55, 110]) {
				const source = sine(frequency, 3, rate);
				for (const semitones of [4, -4, 12]) {
					const out = await convert(source, rate, semitones, { pitch_method: "exact" });
					expect(out.length).toBe(source.length);
					const error = cents(medianPitch(trackPitch(out, rate)), frequency * 2 ** (semitones / 12));
					if (!(Math.abs(error) <= 1))
						errors.push(`${frequency} Hz at ${rate} Hz, ${semitones} st: ${error.toFixed(2)}`);
				}
			}
		}
		expect(errors).toEqual([]);
		// Speech-like harmonics keep the test's bounds on pitch, loudness, length and peak at a fourth and a fifth.
		for (const semitones of [4, -7]) {
			const out = await convert(tone, sampleRate, semitones, { pitch_method: "exact" });
			expectFaithfulShift(tone, out, sampleRate, semitones);
		}
		const engine = new DspEngine();
		const job = {
			voice: voice({ pitch_method: "exact" }),
			semitones: 4,
			artifactPaths: new Map(),
			input: { sampleRate: 48_000, channels: 2 },
		};
		const out = await collect(
			engine.convert(
				blocksOf([sine(440, 1.5, 48_000), sine(660, 1.5, 48_000)], 48_000, 1001),
				job,
				new AbortController().signal,
			),
		);
		for (const [channel, f0] of [
			[0, 440],
			[1, 660],
		] as const) {
			const error = cents(medianPitch(trackPitch(out.channels[channel] as Float32Array, 48_000)), f0 * 2 ** (4 / 12));
			expect(Math.abs(error), `channel ${channel}`).toBeLessThanOrEqual(1);
		}
	});

	it("rejects invalid voice params as a permanent failure", async () => {
		await expect(convert(tone, sampleRate, 0, { formant_shift: 40 })).rejects.toMatchObject({
			name: "PermanentJobError",
			reason: "internal",
		});
		await expect(convert(tone, sampleRate, 0, { pitch_method: "perfect" })).rejects.toMatchObject({
			name: "PermanentJobError",
			message: expect.stringContaining("pitch_method"),
		});
	});

	it("keeps stereo and the exact length for odd block sizes", async () => {
		const engine = new DspEngine();
		const left = harmonicTone(200, 1.2345, 32_000);
		const right = harmonicTone(300, 1.2345, 32_000);
		const job = { voice: voice(), semitones: -7, artifactPaths: new Map(), input: { sampleRate: 32_000, channels: 2 } };
		const out = await collect(engine.convert(blocksOf([left, right], 32_000, 1001), job, new AbortController().signal));
		expect(out.channels).toHaveLength(2);
		expect(out.channels[0]?.length).toBe(left.length);
	});

	it("shifts each channel of a source whose channels differ by the job's semitones", async () => {
		const engine = new DspEngine();
		// Signalsmith Stretch shifting both channels in one instance mixed them: left came out near 440 Hz, right near 610.
		const left = sine(440, 2, 48_000);
		const right = sine(660, 2, 48_000);
		for (const semitones of [4, -7]) {
			const job = { voice: voice(), semitones, artifactPaths: new Map(), input: { sampleRate: 48_000, channels: 2 } };
			const out = await collect(engine.convert(blocksOf([left, right], 48_000), job, new AbortController().signal));
			for (const [channel, f0] of [
				[0, 440],
				[1, 660],
			] as const) {
				const measured = medianPitch(trackPitch(out.channels[channel] as Float32Array, 48_000));
				const error = cents(measured, f0 * 2 ** (semitones / 12));
				expect(Math.abs(error), `channel ${channel} at ${semitones} st: ${measured.toFixed(1)} Hz`).toBeLessThanOrEqual(
					10,
				);
			}
		}
	});
});

const speechSkip = missingToolsMessage(["espeak-ng"]);

describe.skipIf(speechSkip !== undefined)(
	`dsp engine on generated speech${speechSkip ? ` (${speechSkip})` : ""}`,
	() => {
		let dir: string;
		let speech: Float32Array;
		let sampleRate: number;

		beforeAll(async () => {
			dir = mkdtempSync(join(tmpdir(), "dsp-speech-"));
			const path = join(dir, "speech.wav");
			// A fixed voice and speed, so the test input is the same on every run.
			// espeak's formant synthesis is buzzy (MPM clarity rarely above 0.9), hence clarity 0.8 below.
			run("espeak-ng", [
				"-v",
				"en-us+f3",
				"-s",
				"150",
				"-p",
				"50",
				"-w",
				path,
				"The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore.",
			]);
			const decoded = await collect(decodeWav(bytesOf(new Uint8Array(readFileSync(path)))));
			sampleRate = decoded.sampleRate;
			speech = decoded.channels[0] as Float32Array;
		});
		afterAll(() => rmSync(dir, { recursive: true, force: true }));

		for (const semitones of SEMITONES) {
			it(`shifts by ${semitones} semitones`, async () => {
				expectFaithfulShift(speech, await convert(speech, sampleRate, semitones), sampleRate, semitones, 0.8);
			});
		}
	},
);
