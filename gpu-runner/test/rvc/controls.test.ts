/**
 * RVC's controls on their own: feature retrieval weighted from faiss's own search results (fixtures written by
 * faiss, see fixtures/make-index-fixtures.py), `protect`, `rms_mix_rate`, the YIN f0 tracker, and the checks on
 * a job's voice settings. The engine-level wiring is in engine.test.ts.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Lease } from "../../../src/contracts/runner.ts";
import { makeChunkPlan } from "../../src/engines/rvc/chunker.ts";
import { readFaissIndex } from "../../src/engines/rvc/faiss-index.ts";
import { protectUnvoiced, retrieveFeatures } from "../../src/engines/rvc/feature-retrieval.ts";
import { IndexSearcher } from "../../src/engines/rvc/index-search.ts";
import { StreamingLoudnessMix } from "../../src/engines/rvc/loudness-mix.ts";
import { applyVoiceSettings, parseRvcParams } from "../../src/engines/rvc/params.ts";
import { trackPitchYin } from "../../src/engines/rvc/yin-pitch.ts";
import { PermanentJobError } from "../../src/job-errors.ts";
import { harmonicTone, sine } from "../helpers/signals.ts";
import { joinSamples } from "../helpers/streams.ts";
import { changeRms } from "./support/rvc-change-rms.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "index");
const reference = JSON.parse(readFileSync(join(FIXTURES, "reference.json"), "utf8")) as {
	queries: number[][];
	indexes: Record<string, { distances: number[][]; ids: number[][] }>;
};
const DIM = 16;
const queries = Float32Array.from(reference.queries.flat());
const frames = reference.queries.length;

describe("feature retrieval", () => {
	let searcher: IndexSearcher;
	beforeAll(async () => {
		searcher = await IndexSearcher.create({ intraOpNumThreads: 1 });
	});
	afterAll(async () => {
		await searcher.release();
	});

	it("index_rate 1 replaces each frame by RVC's (1/distance)² mean of faiss's 8 neighbours", async () => {
		// A flat index's ids are its rows, so faiss's ids and distances give the expected mean directly.
		const index = await readFaissIndex(join(FIXTURES, "flat-l2.index"));
		const faiss = reference.indexes["flat-l2.index"] as { distances: number[][]; ids: number[][] };
		const replaced = await retrieveFeatures(queries, frames, index, searcher, 1);
		for (let f = 0; f < frames; f++) {
			const distances = faiss.distances[f] as number[];
			const ids = faiss.ids[f] as number[];
			const expected = new Float64Array(DIM);
			if (distances[0] === 0) {
				// The query is stored vector ids[0]: the frame becomes that vector (see feature-retrieval.ts).
				expected.set(index.vectors.subarray((ids[0] as number) * DIM, ((ids[0] as number) + 1) * DIM));
			} else {
				const weights = distances.map((d) => (1 / d) ** 2);
				const total = weights.reduce((a, b) => a + b, 0);
				ids.forEach((id, j) => {
					for (let i = 0; i < DIM; i++)
						expected[i] =
							(expected[i] as number) + ((weights[j] as number) / total) * (index.vectors[id * DIM + i] as number);
				});
			}
			for (let i = 0; i < DIM; i++) {
				expect(Math.abs((replaced[f * DIM + i] as number) - (expected[i] as number)), `frame ${f}`).toBeLessThan(1e-4);
			}
		}
		// Query 22 is a copy of stored vector 3 (distance 0): exactly that vector, not RVC's NaN.
		expect([...replaced.subarray(22 * DIM, 23 * DIM)]).toEqual([...index.vectors.subarray(3 * DIM, 4 * DIM)]);
	});

	it("index_rate 0 leaves the features untouched, and a rate in between blends linearly", async () => {
		const index = await readFaissIndex(join(FIXTURES, "added_IVF20_Flat_nprobe_1_tiny_v2.index"));
		expect(await retrieveFeatures(queries, frames, index, searcher, 0)).toEqual(queries);
		const full = await retrieveFeatures(queries, frames, index, searcher, 1);
		const part = await retrieveFeatures(queries, frames, index, searcher, 0.75);
		for (let i = 0; i < queries.length; i++) {
			const expected = 0.75 * (full[i] as number) + 0.25 * (queries[i] as number);
			expect(Math.abs((part[i] as number) - expected)).toBeLessThan(1e-5);
		}
	});

	it("protect keeps the original features on unvoiced frames by 1 - protect and leaves voiced frames", () => {
		const blended = Float32Array.from({ length: 4 * 3 }, () => 1);
		const original = Float32Array.from({ length: 4 * 3 }, () => -1);
		// pitchf: voiced, unvoiced, below 1 Hz (RVC counts it unvoiced), voiced.
		protectUnvoiced(blended, original, Float32Array.of(220, 0, 0.5, 110), 0.33);
		const rows = [0, 1, 2, 3].map((f) => [...blended.subarray(f * 3, f * 3 + 3)].map((v) => Number(v.toFixed(6))));
		expect(rows).toEqual([[1, 1, 1], Array(3).fill(-0.34), Array(3).fill(-0.34), [1, 1, 1]]);
	});
});

describe("rms_mix_rate", () => {
	/** RMS of `x` over [from, to) seconds. */
	const rms = (x: Float32Array, rate: number, from: number, to: number): number => {
		const part = x.subarray(Math.round(from * rate), Math.round(to * rate));
		return Math.sqrt(part.reduce((s, v) => s + v * v, 0) / part.length);
	};
	// Source: a tone whose level steps from 0.05 to 0.4 halfway; output: a steady tone at 0.3.
	const source = Float32Array.from(sine(200, 6, 16_000, 1), (v, i) => v * (i < 3 * 16_000 ? 0.05 : 0.4));
	const synthesized = () => sine(330, 6, 40_000, 0.3);

	/**
	 * Streams `output` through a StreamingLoudnessMix in uneven blocks, the source running ahead of the output by
	 * `lead` seconds as the chunker's context makes it; returns the mixed output and what was held back at most.
	 */
	const streamed = (rate: number, expectedSourceLength: number | undefined, lead = 1.5) => {
		const output = synthesized();
		const mix = new StreamingLoudnessMix({
			sourceRate: 16_000,
			outputRate: 40_000,
			rate,
			...(expectedSourceLength !== undefined ? { expectedSourceLength } : {}),
		});
		const parts: Float32Array[] = [];
		let sourceFed = 0;
		let outputFed = 0;
		let returned = 0;
		let mostHeld = 0;
		for (let step = 0; outputFed < output.length; step++) {
			const take = 997 + ((step * 7919) % 30_011);
			const next = Math.min(output.length, outputFed + take);
			const sourceTarget = Math.min(source.length, Math.ceil(next / 2.5 + lead * 16_000));
			if (sourceTarget > sourceFed) mix.addSource(source.subarray(sourceFed, sourceTarget));
			sourceFed = Math.max(sourceFed, sourceTarget);
			const ready = mix.mix(output.slice(outputFed, next));
			parts.push(ready);
			returned += ready.length;
			outputFed = next;
			mostHeld = Math.max(mostHeld, outputFed - returned);
		}
		if (sourceFed < source.length) mix.addSource(source.subarray(sourceFed));
		parts.push(mix.end());
		return { joined: joinSamples(parts), mostHeld };
	};

	it("1 leaves the output as it is", () => {
		const { joined } = streamed(1, source.length);
		const original = synthesized();
		expect(joined.length).toBe(original.length);
		expect(joined.every((v, i) => v === original[i])).toBe(true);
	});

	it("0 imposes the source's loudness envelope", () => {
		const { joined: output } = streamed(0, source.length);
		// Away from the step (the envelope has 1 s frames), the output's level is the source's.
		expect(rms(output, 40_000, 0.5, 2) / rms(source, 16_000, 0.5, 2)).toBeCloseTo(1, 2);
		expect(rms(output, 40_000, 4, 5.5) / rms(source, 16_000, 4, 5.5)).toBeCloseTo(1, 2);
	});

	it("0.25 moves the level a quarter of the way in log terms (rms_src^0.75 · rms_out^0.25)", () => {
		const { joined: output } = streamed(0.25, source.length);
		const src = rms(source, 16_000, 4, 5.5);
		const own = rms(synthesized(), 40_000, 4, 5.5);
		expect(rms(output, 40_000, 4, 5.5) / (src ** 0.75 * own ** 0.25)).toBeCloseTo(1, 2);
	});

	it("streamed over the whole file equals RVC's whole-file mix when the length is known", () => {
		for (const rate of [0, 0.25, 0.6]) {
			const whole = synthesized();
			changeRms(source, 16_000, whole, 40_000, rate);
			const { joined, mostHeld } = streamed(rate, source.length);
			expect(joined.length).toBe(whole.length);
			const worst = joined.reduce((m, v, i) => Math.max(m, Math.abs(v - (whole[i] as number))), 0);
			expect(worst).toBeLessThan(1e-6);
			// About a second of output waits for the envelope frames after it, not the whole file.
			expect(mostHeld).toBeLessThan(1.6 * 40_000);
		}
	});

	it("streamed without a known length puts frame t at t · hop and keeps the source's level away from the step", () => {
		const { joined } = streamed(0, undefined);
		expect(joined.length).toBe(6 * 40_000);
		expect(rms(joined, 40_000, 0.5, 2) / rms(source, 16_000, 0.5, 2)).toBeCloseTo(1, 2);
		expect(rms(joined, 40_000, 4, 5.5) / rms(source, 16_000, 4, 5.5)).toBeCloseTo(1, 2);
		// The step's midpoint (3 s) is where the gain is halfway in log terms.
		const level = (t: number) => rms(joined, 40_000, t - 0.05, t + 0.05);
		expect(Math.log(level(3) / 0.05 / Math.SQRT1_2) / Math.log(8)).toBeGreaterThan(0.3);
		expect(Math.log(level(3) / 0.05 / Math.SQRT1_2) / Math.log(8)).toBeLessThan(0.7);
	});

	it("rate 1 passes every block through at once", () => {
		const mix = new StreamingLoudnessMix({ sourceRate: 16_000, outputRate: 40_000, rate: 1 });
		const block = synthesized().subarray(0, 5000);
		expect(mix.mix(block)).toBe(block);
		expect(mix.end().length).toBe(0);
	});
});

describe("YIN f0 tracker", () => {
	const frameCount = (samples: Float32Array) => samples.length / 160;
	const cents = (a: number, b: number) => 1200 * Math.log2(a / b);

	it.each([
		[80, "sine"],
		[220, "sine"],
		[440, "sine"],
		[900, "sine"],
		[110, "harmonic"],
		[196, "harmonic"],
	])("finds %d Hz in a %s tone", (f0, kind) => {
		const tone = kind === "sine" ? sine(f0, 1, 16_000, 0.3) : harmonicTone(f0, 1, 16_000, 0.2);
		const track = trackPitchYin(tone, frameCount(tone));
		// Away from the edges, where the window runs past the signal.
		const inner = [...track.subarray(5, -5)];
		expect(inner.every((hz) => Math.abs(cents(hz, f0)) < 10)).toBe(true);
	});

	it("follows a gliding voice-like tone and leaves silence and noise unvoiced", () => {
		const rate = 16_000;
		const samples = new Float32Array(3 * rate);
		let phase = 0;
		const truth: number[] = [];
		let seed = 3;
		for (let i = 0; i < samples.length; i++) {
			const t = i / rate;
			const f0 = 140 + 40 * Math.sin(2 * Math.PI * 0.5 * t);
			phase += (2 * Math.PI * f0) / rate;
			seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
			if (t < 1) {
				let voice = 0;
				for (let h = 1; h <= 10; h++) voice += Math.sin(h * phase) / h;
				samples[i] = 0.15 * voice;
			} else if (t >= 2) samples[i] = 0.2 * (seed / 2 ** 32 - 0.5);
			if (i % 160 === 0) truth.push(f0);
		}
		const track = trackPitchYin(samples, samples.length / 160);
		for (let f = 5; f < 95; f++)
			expect(Math.abs(cents(track[f] as number, truth[f] as number)), `frame ${f}`).toBeLessThan(20);
		expect(track.subarray(110, 195).every((hz) => hz === 0)).toBe(true);
		const noiseVoiced = track.subarray(210, 295).filter((hz) => hz > 0).length;
		expect(noiseVoiced).toBeLessThan(10);
	});
});

describe("voice settings", () => {
	const params = parseRvcParams({ sample_rate: 40_000 });

	it("has RVC's defaults", () => {
		expect(params).toMatchObject({ indexRate: 0.75, protect: 0.33, rmsMixRate: 0.25, f0Method: "rmvpe" });
	});

	it("lets a job override index_rate, protect, rms_mix_rate and f0_method", () => {
		expect(
			applyVoiceSettings(params, { index_rate: 0, protect: 0.5, rms_mix_rate: 1, f0_method: "yin", formant_shift: 0 }),
		).toEqual({ ...params, indexRate: 0, protect: 0.5, rmsMixRate: 1, f0Method: "yin" });
		expect(applyVoiceSettings(params, undefined)).toBe(params);
	});

	it("fails the job permanently on anything out of range, naming each field", () => {
		const attempt = () =>
			applyVoiceSettings(params, { index_rate: 1.5, protect: 0.6, f0_method: "crepe", formant_shift: 2, pitch: 1 });
		expect(attempt).toThrow(PermanentJobError);
		expect(attempt).toThrow(
			/voice_settings.index_rate must be a number in 0..1, got 1.5; voice_settings.protect must be a number in 0..0.5, got 0.6; voice_settings.f0_method must be one of rmvpe, yin, got "crepe"; voice_settings.formant_shift must be 0 for rvc voices, got 2: .*RVC has no formant control.*; voice_settings.pitch is not a voice setting/,
		);
	});

	it("refuses the same in voice params, as invalid params", () => {
		expect(() => parseRvcParams({ sample_rate: 40_000, rms_mix_rate: -1, f0_method: 3 })).toThrow(
			/rms_mix_rate must be a number in 0..1, got -1; f0_method must be one of rmvpe, yin, got 3/,
		);
	});

	it("refuses a cut search that leaves the chunk less than one cut step, which the engine's chunk plan cannot cut", () => {
		const plan = (chunk: number, search: number) =>
			makeChunkPlan({
				inputRate: 16_000,
				outputRate: 40_000,
				hop: 160,
				cutStep: 320,
				chunkSeconds: chunk,
				searchSeconds: search,
				contextSeconds: 1,
				crossfadeSeconds: 0.04,
			});
		// Shorter than the chunk, as the rule before asked, but by under 20 ms: every job of the voice threw here.
		expect(() => plan(5, 4.99)).toThrow(/chunks must be at least one cut step long/);
		expect(() => parseRvcParams({ sample_rate: 40_000, chunk_seconds: 5, chunk_search_seconds: 4.99 })).toThrow(
			/invalid rvc voice params: chunk_search_seconds must be at least 0.02 s \(one cut step\) shorter than chunk_seconds, got 4.99 and 5/,
		);
		// One cut step under the chunk is the longest search both take.
		expect(parseRvcParams({ sample_rate: 40_000, chunk_seconds: 5, chunk_search_seconds: 4.98 })).toMatchObject({
			chunkSearchSeconds: 4.98,
		});
		expect(plan(5, 4.98).targetSamples - plan(5, 4.98).searchSamples).toBe(320);
	});

	it("reaches the runner in a lease's voice_settings", () => {
		const lease = {
			lease_id: "l1",
			conversion_id: "6f1c1f44-3a0e-4d6b-9a53-2f5d2d7e9b10",
			attempt: 1,
			lease_expires_at: "2026-01-01T00:00:00.000Z",
			heartbeat_interval_seconds: 10,
			voice: { id: "6f1c1f44-3a0e-4d6b-9a53-2f5d2d7e9b11", name: "v", engine: "rvc", params: {}, artifacts: [] },
			source: {
				url: "https://example.com/s",
				mime_type: "audio/wav",
				format: "wav",
				sample_rate: 16000,
				channels: 1,
				duration_seconds: 1,
				size_bytes: 10,
			},
			output: { url: "https://example.com/o", content_type: "audio/wav" },
			semitones: 0,
			use_preview: false,
			preview_seconds: 10,
		};
		expect(Lease.parse({ ...lease, voice_settings: { index_rate: 0.5 } }).voice_settings).toEqual({
			index_rate: 0.5,
		});
		expect(Lease.parse(lease).voice_settings).toBeUndefined();
		expect(Lease.parse({ ...lease, voice_settings: null }).voice_settings).toBeNull();
		expect(Lease.safeParse({ ...lease, voice_settings: 3 }).success).toBe(false);
	});
});
