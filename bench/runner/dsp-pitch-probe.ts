/**
 * How exact is the dsp engine's pitch shift, and does it keep the formants? Compares two shifters on the same input:
 *
 * - library: Signalsmith Stretch transposing with its own formant compensation (`AlignedPitchShifter`, what the dsp
 *   engine used before `ExactPitchShifter`, and what the rvc engine still uses for its key shift);
 * - exact: `ExactPitchShifter` (library time-stretch, our resampling and envelope restoration), the dsp engine's.
 *
 * The engine's later stages (brightness, loudness matching, limiter) change neither pitch nor formants, so the
 * shifters are measured alone. Measures, all with code independent of both shifters (test/helpers/signals.ts):
 *
 * 1. pure sines of 55, 82.5 and 110 Hz at ±4 and ±12 semitones, 16 and 44.1 kHz: median pitch error in cents
 *    (pitchy's McLeod tracker; targets under 45 Hz left out, below its range);
 * 2. espeak-ng speech, several voices, pitches and rates: the dsp test's measure, median output pitch over the
 *    frames voiced in source and output against median source pitch × 2^(st/12), at 0, ±4, ±7, ±12;
 * 3. formants of that speech: median F1 and F2 (LPC peaks) over the voiced frames, output against source, in
 *    cents; "resampled" is the source read faster or slower (pitch and formants both moved) for comparison;
 * 4. periodicity: median MPM clarity over the source's voiced frames (source's own in the header line);
 * 5. speed: milliseconds of processing per second of audio, 20 s of a 150 Hz harmonic tone at 44.1 kHz mono, after
 *    a warm-up run (the engine's own stages not included; bench/runner/dsp-rtf.ts times the whole engine).
 *
 *   cd gpu-runner && node --import ./src/resolve-fallback.ts ../bench/runner/dsp-pitch-probe.ts
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeWav } from "../../gpu-runner/src/audio/wav-decoder.ts";
import { ExactPitchShifter } from "../../gpu-runner/src/engines/dsp/exact-pitch-shifter.ts";
import { AlignedPitchShifter } from "../../gpu-runner/src/engines/dsp/signalsmith-stretch.ts";
import {
	cents,
	harmonicTone,
	median,
	medianClarity,
	medianFormants,
	medianPitch,
	sine,
	trackPitch,
} from "../../gpu-runner/test/helpers/signals.ts";
import { bytesOf, collect } from "../../gpu-runner/test/helpers/streams.ts";
import { run } from "../../gpu-runner/test/helpers/tools.ts";

type Shift = (samples: Float32Array, sampleRate: number, semitones: number) => Promise<Float32Array>;

const BLOCK = 4096;

function join32(parts: Float32Array[], length: number): Float32Array {
	const out = new Float32Array(length);
	let offset = 0;
	for (const part of parts) {
		out.set(part.subarray(0, length - offset), offset);
		offset += part.length;
	}
	return out;
}

const library: Shift = async (samples, sampleRate, semitones) => {
	const shifter = await AlignedPitchShifter.create(1, sampleRate, {
		semitones,
		formantSemitones: 0,
		formantBaseHz: 0,
		tonalityLimitHz: 8000,
	});
	const parts: Float32Array[] = [];
	for (let start = 0; start < samples.length; start += BLOCK) {
		for (const out of shifter.push([samples.subarray(start, start + BLOCK)])) parts.push(out[0] as Float32Array);
	}
	for (const out of shifter.flush()) parts.push(out[0] as Float32Array);
	return join32(parts, samples.length);
};

const exact: Shift = async (samples, sampleRate, semitones) => {
	const shifter = await ExactPitchShifter.create(sampleRate, { semitones, formantSemitones: 0, formantBaseHz: 0 });
	const parts: Float32Array[] = [];
	for (let start = 0; start < samples.length; start += BLOCK)
		parts.push(shifter.push(samples.subarray(start, start + BLOCK)));
	parts.push(shifter.flush());
	return join32(parts, samples.length);
};

/** The source read at `ratio` samples per sample (linear interpolation): pitch and formants both × ratio. */
function resampled(samples: Float32Array, ratio: number): Float32Array {
	const out = new Float32Array(Math.floor((samples.length - 1) / ratio));
	for (let i = 0; i < out.length; i++) {
		const position = i * ratio;
		const j = Math.floor(position);
		const frac = position - j;
		out[i] = (samples[j] as number) * (1 - frac) + (samples[j + 1] as number) * frac;
	}
	return out;
}

const fmt = (value: number, width = 6) => (Number.isFinite(value) ? value.toFixed(1) : "-").padStart(width);

console.log("== 1. pure sines: pitch error, cents (library / exact) ==");
for (const sampleRate of [16_000, 44_100]) {
	for (const frequency of [55, 82.5, 110]) {
		const source = sine(frequency, 6, sampleRate);
		const cells: string[] = [];
		for (const semitones of [4, -4, 12, -12]) {
			const target = frequency * 2 ** (semitones / 12);
			if (target < 45) continue;
			const errors = [];
			for (const shift of [library, exact]) {
				errors.push(cents(medianPitch(trackPitch(await shift(source, sampleRate, semitones), sampleRate)), target));
			}
			cells.push(`${semitones > 0 ? "+" : ""}${semitones}: ${fmt(errors[0] as number)} /${fmt(errors[1] as number)}`);
		}
		console.log(`  ${String(sampleRate).padStart(5)} Hz ${String(frequency).padStart(5)} Hz  ${cells.join("   ")}`);
	}
}

const VOICES: [string, number, number][] = [
	["en-us+m3", 40, 140],
	["en-us+f2", 60, 170],
	["de", 35, 130],
	["fr", 55, 160],
	["es", 50, 150],
	["en-gb+m1", 25, 120],
	["en-us+f4", 75, 180],
	["it", 45, 145],
	["nl+m2", 30, 175],
	["en-us+f3", 50, 150],
];
const TEXT = "The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore.";
const SEMITONES = [0, 4, -4, 7, -7, 12, -12];

const dir = mkdtempSync(join(tmpdir(), "dsp-pitch-probe-"));
try {
	const rows: Record<string, { library: number[]; exact: number[] }> = {};
	const formantRows: string[] = [];
	const clarityRows: string[] = [];
	console.log("\n== 2. espeak-ng speech: median pitch error, cents (library / exact) ==");
	for (const [voice, pitch, speed] of VOICES) {
		const path = join(dir, "speech.wav");
		run("espeak-ng", ["-v", voice, "-p", String(pitch), "-s", String(speed), "-w", path, TEXT]);
		const decoded = await collect(decodeWav(bytesOf(new Uint8Array(readFileSync(path)))));
		const sampleRate = decoded.sampleRate;
		const source = decoded.channels[0] as Float32Array;
		const sourceTrack = trackPitch(source, sampleRate, 0.8);
		const voiced = (frame: number) => (sourceTrack.frequencies[frame] ?? 0) > 0;
		const sourceFormants = medianFormants(source, sampleRate, voiced);
		const label = `${voice} -p ${pitch} -s ${speed}`;
		const cells: string[] = [];
		const formantCells: string[] = [];
		const clarityCells: string[] = [];
		for (const semitones of SEMITONES) {
			const errors: number[] = [];
			const formants: string[] = [];
			const clarities: number[] = [];
			for (const shift of [library, exact]) {
				const output = await shift(source, sampleRate, semitones);
				const outputTrack = trackPitch(output, sampleRate, 0.8);
				const both = sourceTrack.frequencies.flatMap((f, i) =>
					f > 0 && (outputTrack.frequencies[i] ?? 0) > 0 ? [i] : [],
				);
				const expected = median(both.map((i) => sourceTrack.frequencies[i] as number)) * 2 ** (semitones / 12);
				errors.push(cents(median(both.map((i) => outputTrack.frequencies[i] as number)), expected));
				const f = medianFormants(output, sampleRate, voiced);
				formants.push(`${fmt(cents(f.f1, sourceFormants.f1), 5)}/${fmt(cents(f.f2, sourceFormants.f2), 5)}`);
				clarities.push(medianClarity(output, sampleRate, voiced));
			}
			const key = `${semitones}`;
			rows[key] ??= { library: [], exact: [] };
			rows[key].library.push(Math.abs(errors[0] as number));
			rows[key].exact.push(Math.abs(errors[1] as number));
			cells.push(`${fmt(errors[0] as number, 5)} /${fmt(errors[1] as number, 5)}`);
			if (semitones !== 0) {
				const moved = resampled(source, 2 ** (semitones / 12));
				const movedTrack = trackPitch(moved, sampleRate, 0.8);
				const m = medianFormants(moved, sampleRate, (frame) => (movedTrack.frequencies[frame] ?? 0) > 0);
				formantCells.push(
					`${semitones > 0 ? "+" : ""}${semitones}: ${formants.join(" | ")} | ${fmt(cents(m.f1, sourceFormants.f1), 5)}/${fmt(cents(m.f2, sourceFormants.f2), 5)}`,
				);
			}
			clarityCells.push(`${(clarities[0] as number).toFixed(3)}/${(clarities[1] as number).toFixed(3)}`);
		}
		console.log(`  ${label.padEnd(26)} ${cells.join("  ")}`);
		formantRows.push(
			`  ${label} (source F1 ${sourceFormants.f1.toFixed(0)} Hz, F2 ${sourceFormants.f2.toFixed(0)} Hz)`,
		);
		for (const cell of formantCells) formantRows.push(`    ${cell}`);
		clarityRows.push(
			`  ${label.padEnd(26)} source ${medianClarity(source, sampleRate, voiced).toFixed(3)}  ${clarityCells.join("  ")}`,
		);
	}
	console.log(`  ${"columns:".padEnd(26)} ${SEMITONES.map((s) => `${s > 0 ? "+" : ""}${s}`.padStart(12)).join("  ")}`);
	console.log("  worst |error| per shift (library / exact):");
	for (const semitones of SEMITONES) {
		const row = rows[`${semitones}`] as { library: number[]; exact: number[] };
		console.log(
			`    ${String(semitones).padStart(3)} st: ${fmt(Math.max(...row.library))} /${fmt(Math.max(...row.exact))}`,
		);
	}
	console.log("\n== 3. formants: F1/F2 shift against the source, cents (library | exact | resampled) ==");
	for (const row of formantRows) console.log(row);
	console.log("\n== 4. periodicity: median MPM clarity over source-voiced frames (library/exact), columns as in 2 ==");
	for (const row of clarityRows) console.log(row);
} finally {
	rmSync(dir, { recursive: true, force: true });
}

console.log("\n== 5. speed: ms per audio second, 44.1 kHz mono (library / exact) ==");
{
	const tone = harmonicTone(150, 20, 44_100);
	const cells: string[] = [];
	for (const semitones of [4, -4, 12, -12]) {
		const times: number[] = [];
		for (const shift of [library, exact]) {
			await shift(tone.subarray(0, 5 * 44_100), 44_100, semitones); // warm-up
			const started = performance.now();
			await shift(tone, 44_100, semitones);
			times.push((performance.now() - started) / 20);
		}
		cells.push(`${semitones > 0 ? "+" : ""}${semitones}: ${fmt(times[0] as number)} /${fmt(times[1] as number)}`);
	}
	console.log(`  ${cells.join("   ")}`);
}
