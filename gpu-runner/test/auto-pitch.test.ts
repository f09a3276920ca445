/**
 * `pitch_shift: "auto"`: the choice among the pitch table's values, the source measurement, and a lease through the
 * real loop and pipeline that reports what it applied.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { decodeWav } from "../src/audio/wav-decoder.ts";
import { chooseAutoPitchShift, measurePitch } from "../src/pipeline/auto-pitch.ts";
import { FakeRunnerApi } from "./helpers/fake-runner-api.ts";
import { startTestRunner, wavJob } from "./helpers/runner-harness.ts";
import { cents, harmonicTone, medianPitch, trackPitch } from "./helpers/signals.ts";
import { blocksOf, bytesOf, collect } from "./helpers/streams.ts";

describe("choosing the shift", () => {
	it.each([
		// A low voice into a high voice's range: an octave up lands inside it (220 Hz in 165..330).
		[110, { low: 165, high: 330 }, 0, "higher_octave"],
		// A high voice into a low one: 220 Hz is 9.5 st above 90..180's centre; a fifth down is the nearest.
		[220, { low: 90, high: 180 }, 0, "fifth_down"],
		// Already in the middle of the range: no shift.
		[200, { low: 150, high: 270 }, 0, "same_octave"],
		// Far above everything in the table: the largest shift down.
		[800, { low: 60, high: 90 }, 0, "lower_octave"],
		// An rvc voice that transposes +12 by itself: the table value is chosen on the pitch that comes out.
		[110, { low: 165, high: 330 }, 12, "same_octave"],
		[110, { low: 330, high: 660 }, 12, "higher_octave"],
	] as const)("%d Hz into %j (voice transposes %d) → %s", (median, range, offset, expected) => {
		expect(chooseAutoPitchShift(median, range, offset)).toBe(expected);
	});

	it("keeps the pitch without a measured pitch or a range", () => {
		expect(chooseAutoPitchShift(null, { low: 100, high: 200 })).toBe("same_octave");
		expect(chooseAutoPitchShift(150, null)).toBe("same_octave");
	});

	it("breaks a tie towards the smaller shift", () => {
		// 100 Hz into a range centred 2 semitones up: +4 lands 2 st above the centre, 0 lands 2 st below.
		const centre = 100 * 2 ** (2 / 12);
		expect(chooseAutoPitchShift(100, { low: centre, high: centre })).toBe("same_octave");
	});
});

describe("measuring the source", () => {
	it("finds a tone's pitch at any input rate and channel count, within 1 %", async () => {
		const left = harmonicTone(180, 3, 44_100);
		const profile = await measurePitch(blocksOf([left, left], 44_100));
		expect(Math.abs(cents(profile?.medianHz ?? 0, 180))).toBeLessThan(17);
	});

	it("measures only the first seconds asked for", async () => {
		const low = harmonicTone(120, 2, 16_000);
		const high = harmonicTone(300, 4, 16_000);
		const both = new Float32Array(low.length + high.length);
		both.set(low);
		both.set(high, low.length);
		const profile = await measurePitch(blocksOf([both], 16_000), 2);
		expect(Math.abs(cents(profile?.medianHz ?? 0, 120))).toBeLessThan(17);
	});

	it("gives the typical range as the 10th to 90th percentile of the voiced frames", async () => {
		// 1 s at each of 110, 165, 220, 275 and 330 Hz: the percentiles fall inside the outer notes' neighbours.
		const notes = [110, 165, 220, 275, 330].map((hz) => harmonicTone(hz, 1, 16_000));
		const melody = new Float32Array(notes.length * 16_000);
		for (const [i, note] of notes.entries()) melody.set(note, i * 16_000);
		const profile = await measurePitch(blocksOf([melody], 16_000));
		expect(Math.abs(cents(profile?.medianHz ?? 0, 220))).toBeLessThan(17);
		expect(profile?.lowHz).toBeGreaterThan(105);
		expect(profile?.lowHz).toBeLessThan(170);
		expect(profile?.highHz).toBeGreaterThan(270);
		expect(profile?.highHz).toBeLessThan(340);
	});

	it("gives null for silence", async () => {
		expect(await measurePitch(blocksOf([new Float32Array(16_000)], 16_000))).toBeNull();
	});
});

describe("auto through the lease loop", () => {
	let api: FakeRunnerApi;
	let runner: ReturnType<typeof startTestRunner> | undefined;
	beforeEach(async () => {
		api = await new FakeRunnerApi().start();
	});
	afterEach(async () => {
		await runner?.dispose();
		runner = undefined;
		await api.close();
	});

	async function run(job: ReturnType<typeof wavJob>) {
		api.enqueue(job);
		runner = startTestRunner(api);
		await api.waitFor(() => api.events.some((e) => e.type === "complete"));
		const report = api.events.find((e) => e.type === "complete");
		const upload = api.uploads.get(job.conversionId);
		const output = await collect(decodeWav(bytesOf(upload?.body ?? new Uint8Array())));
		return {
			body: report?.type === "complete" ? report.body : undefined,
			pitch: medianPitch(trackPitch(output.channels[0] as Float32Array, output.sampleRate)),
		};
	}

	it("measures the source, applies the chosen shift and reports it", async () => {
		// The source is a 180 Hz tone; the voice sits at 300..500 Hz: an octave up (360 Hz) is the nearest.
		const { body, pitch } = await run(
			wavJob(2, { semitones: 0, pitchShift: "auto", voice: { pitch_range_hz: { low: 300, high: 500 } } }),
		);
		expect(body?.pitch_shift_applied).toBe("higher_octave");
		expect(Math.abs(cents(pitch, 360))).toBeLessThan(20);
	});

	it("reports a pitch table value as applied", async () => {
		const named = await run(wavJob(1, { semitones: 4, pitchShift: "third_up" }));
		expect(named.body?.pitch_shift_applied).toBe("third_up");
		expect(Math.abs(cents(named.pitch, 180 * 2 ** (4 / 12)))).toBeLessThan(20);
	});

	it("reports nothing for a lease from a Worker that sends no pitch_shift", async () => {
		const older = await run(wavJob(1, { semitones: 4 }));
		expect(older.body).not.toHaveProperty("pitch_shift_applied");
		expect(Math.abs(cents(older.pitch, 180 * 2 ** (4 / 12)))).toBeLessThan(20);
	});
});
