/**
 * The rvc engine end to end on tiny ONNX models built here with RVC's tensor names, types and shapes
 * (see support/tiny-models.ts), and its error messages for wrong inputs, params and models.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { VoiceDescriptor } from "../../../src/contracts/runner.ts";
import { AlignedPitchShifter } from "../../src/engines/dsp/signalsmith-stretch.ts";
import type { AudioBlock, Engine, EngineJob } from "../../src/engines/engine.ts";
import { ButterworthHighPass } from "../../src/engines/rvc/high-pass.ts";
import { createRvcEngine, type RvcChunkStats } from "../../src/engines/rvc/index.ts";
import { PermanentJobError } from "../../src/job-errors.ts";
import { scratchDir } from "../helpers/scratch.ts";
import { buildTinyContentVec, buildTinyRmvpe, buildTinySynthesizer, writeModels } from "./support/tiny-models.ts";
import { writeSparseIvfFlat } from "./support/wide-ivf.ts";

const IN_RATE = 16000;
const OUT_RATE = 40000;
/** The tiny RMVPE's salience peaks on this bin: 1997.379 + 20 x 168 cents above 10 Hz = 220.78 Hz. */
const PITCH_BIN = 168;
const MODEL_F0 = 10 * 2 ** ((1997.3794084376191 + 20 * PITCH_BIN) / 1200);

function voice(params: Record<string, unknown> = {}): VoiceDescriptor {
	return {
		id: "6f1c1f44-3a0e-4d6b-9a53-2f5d2d7e9b10",
		name: "tiny",
		engine: "rvc",
		params: {
			sample_rate: OUT_RATE,
			chunk_seconds: 2,
			chunk_search_seconds: 0.5,
			context_seconds: 0.3,
			crossfade_seconds: 0.02,
			// The synthesizer's own loudness, so outputs can be compared with the tiny models' formulas; RVC's
			// default 0.25 is tested in controls.test.ts.
			rms_mix_rate: 1,
			...params,
		},
		artifacts: [],
	};
}

/** A 150 Hz harmonic tone, silent where `silent` says, streamed in 100 ms blocks; counts blocks taken. */
function speechLike(
	seconds: number,
	silent: (t: number) => boolean = () => false,
	counter = { taken: 0, done: false },
): AsyncIterable<AudioBlock> {
	return (async function* () {
		const total = Math.round(seconds * IN_RATE);
		for (let start = 0; start < total; start += 1600) {
			const block = Float32Array.from({ length: Math.min(1600, total - start) }, (_, i) => {
				const t = (start + i) / IN_RATE;
				if (silent(t)) return 0;
				return (
					0.3 * Math.sin(2 * Math.PI * 150 * t) +
					0.15 * Math.sin(2 * Math.PI * 300 * t) +
					0.05 * Math.sin(2 * Math.PI * 450 * t)
				);
			});
			counter.taken++;
			yield { sampleRate: IN_RATE, channels: [block] };
		}
		counter.done = true;
	})();
}

async function collect(
	blocks: AsyncIterable<AudioBlock>,
	onFirst?: () => void,
): Promise<{ samples: Float32Array; blocks: AudioBlock[] }> {
	const all: AudioBlock[] = [];
	for await (const b of blocks) {
		if (all.length === 0) onFirst?.();
		all.push(b);
	}
	const samples = new Float32Array(all.reduce((n, b) => n + (b.channels[0]?.length ?? 0), 0));
	let offset = 0;
	for (const b of all) {
		samples.set(b.channels[0] as Float32Array, offset);
		offset += b.channels[0]?.length ?? 0;
	}
	return { samples, blocks: all };
}

/** Frequency from the mean spacing of upward zero crossings, with linear interpolation of each crossing. */
function zeroCrossingFrequency(x: Float32Array, rate: number, from: number, to: number): number {
	const crossings: number[] = [];
	for (let i = from; i < to - 1; i++) {
		const a = x[i] as number;
		const b = x[i + 1] as number;
		if (a < 0 && b >= 0) crossings.push(i + a / (a - b));
	}
	const first = crossings[0] as number;
	const last = crossings.at(-1) as number;
	return ((crossings.length - 1) * rate) / (last - first);
}

const cents = (a: number, b: number) => 1200 * Math.log2(a / b);

describe("rvc engine with tiny models", () => {
	let engine: Engine;
	let artifactPaths: Map<string, string>;
	const stats: RvcChunkStats[] = [];

	const job = (overrides: Partial<EngineJob> = {}): EngineJob => ({
		voice: voice(),
		semitones: 0,
		artifactPaths,
		input: { sampleRate: IN_RATE, channels: 1 },
		...overrides,
	});
	const run = (input: AsyncIterable<AudioBlock>, j: EngineJob) =>
		engine.convert(input, j, new AbortController().signal);

	beforeAll(async () => {
		artifactPaths = writeModels({
			contentvec: buildTinyContentVec(),
			rmvpe: buildTinyRmvpe({ pitchBin: PITCH_BIN }),
			synthesizer: buildTinySynthesizer({ sampleRate: OUT_RATE }),
		});
		engine = createRvcEngine({
			noiseSeed: 1234,
			onChunk: (s) => stats.push(s),
		});
		const info = await engine.init();
		expect(info.executionProvider).toBe("cpu");
	});

	afterAll(async () => {
		await engine.dispose();
	});

	it("declares 16 kHz mono in and the synthesizer's rate out", () => {
		expect(engine.inputFormat({ sampleRate: 44100, channels: 2 }, voice())).toEqual({ sampleRate: 16000, channels: 1 });
		expect(engine.outputFormat({ sampleRate: 44100, channels: 2 }, voice({ sample_rate: 48000 }))).toEqual({
			sampleRate: 48000,
			channels: 1,
		});
	});

	for (const semitones of [5, -7]) {
		it(`converts a stream in chunks: pitch x 2^(${semitones}/12), duration kept, no clicks at joins`, async () => {
			stats.length = 0;
			const counter = { taken: 0, done: false };
			let doneAtFirstOutput = true;
			const seconds = 7.31;
			const { samples, blocks } = await collect(
				run(speechLike(seconds, undefined, counter), job({ semitones })),
				() => {
					doneAtFirstOutput = counter.done;
				},
			);

			expect(blocks.every((b) => b.sampleRate === OUT_RATE && b.channels.length === 1)).toBe(true);
			expect(Math.abs(samples.length / OUT_RATE - seconds)).toBeLessThan(0.01);
			expect(stats.length).toBeGreaterThanOrEqual(3);
			expect(doneAtFirstOutput).toBe(false);
			expect(stats.every((s) => s.voicedFrames === s.frames)).toBe(true);

			const expected = MODEL_F0 * 2 ** (semitones / 12);
			const measured = zeroCrossingFrequency(samples, OUT_RATE, 0.2 * OUT_RATE, (seconds - 0.2) * OUT_RATE);
			expect(Math.abs(cents(measured, expected))).toBeLessThan(2);

			// A sine of amplitude 0.5 moves at most 0.5 x 2 sin(pi f / rate) per sample; joins must not jump more.
			const smoothest = 0.5 * 2 * Math.sin((Math.PI * expected) / OUT_RATE);
			let maxJump = 0;
			for (let i = 1; i < samples.length; i++)
				maxJump = Math.max(maxJump, Math.abs((samples[i] as number) - (samples[i - 1] as number)));
			expect(maxJump).toBeLessThan(smoothest * 1.2);
		});
	}

	it("leaves unvoiced (silent) input unvoiced and cuts there", async () => {
		stats.length = 0;
		const silent = (t: number) => t >= 1.9 && t < 2.4;
		const { samples } = await collect(run(speechLike(5, silent), job()));
		expect(samples.length).toBe(5 * OUT_RATE);
		const rms = (from: number, to: number) =>
			Math.sqrt(
				samples.slice(from * OUT_RATE, to * OUT_RATE).reduce((s, v) => s + v * v, 0) / ((to - from) * OUT_RATE),
			);
		expect(rms(2.0, 2.3)).toBeLessThan(0.01);
		expect(rms(0.5, 1.5)).toBeGreaterThan(0.3);
		expect(stats[0]?.segmentSamples).toBeGreaterThanOrEqual(1.9 * IN_RATE);
		expect(stats[0]?.segmentSamples).toBeLessThan(2.4 * IN_RATE);
	});

	it("uses 5 s chunks by default on the CPU provider", async () => {
		stats.length = 0;
		const params = { sample_rate: OUT_RATE };
		const { samples } = await collect(run(speechLike(23), job({ voice: { ...voice(), params } })));
		expect(samples.length).toBe(23 * OUT_RATE);
		expect(stats.length).toBeGreaterThanOrEqual(4);
		// 5 s aimed for, cut at the quietest point within 0.75 s of it; 1 s of context either side.
		for (const chunk of stats.slice(0, -1)) {
			expect(chunk.segmentSamples).toBeGreaterThanOrEqual(4.25 * IN_RATE);
			expect(chunk.segmentSamples).toBeLessThanOrEqual(5.75 * IN_RATE);
			expect(chunk.windowSamples).toBe(chunk.segmentSamples + 2 * IN_RATE);
		}
	});

	it("caps a voice's chunk_seconds at 20 s on the CPU provider, so no window grows the arena or delays an abort for long", async () => {
		stats.length = 0;
		const params = { sample_rate: OUT_RATE, chunk_seconds: 60, chunk_search_seconds: 10 };
		const { samples } = await collect(run(speechLike(50), job({ voice: { ...voice(), params } })));
		expect(samples.length).toBe(50 * OUT_RATE);
		expect(stats.length).toBeGreaterThanOrEqual(3);
		for (const chunk of stats.slice(0, -1)) {
			expect(chunk.segmentSamples).toBeGreaterThanOrEqual(15 * IN_RATE);
			expect(chunk.segmentSamples).toBeLessThanOrEqual(25 * IN_RATE);
		}
	});

	it("feeds the synthesizer ContentVec frames repeated twice, aligned with the output", async () => {
		const paths = writeModels({
			contentvec: buildTinyContentVec({ meanFeatures: true }),
			synthesizer: buildTinySynthesizer({
				sampleRate: OUT_RATE,
				echoPhone: true,
			}),
		});
		const echo = new Map(artifactPaths)
			.set("contentvec", paths.get("contentvec") as string)
			.set("synthesizer", paths.get("synthesizer") as string);
		const seconds = 3;
		const input: Float32Array[] = [];
		// A chirp, so that every ContentVec frame differs (a steady tone repeats every 320 samples).
		const source = (async function* () {
			for (let start = 0; start < seconds * IN_RATE; start += 1600) {
				const block = Float32Array.from({ length: 1600 }, (_, i) => {
					const t = (start + i) / IN_RATE;
					return 0.3 * Math.sin(2 * Math.PI * (80 * t + 40 * t * t));
				});
				input.push(block);
				yield { sampleRate: IN_RATE, channels: [block] };
			}
		})();
		const { samples } = await collect(run(source, job({ artifactPaths: echo })));

		// Expected: one chunk (3 s < 10 s) with 1 s of reflected context either side of the high-passed input;
		// ContentVec frame j = mean of window samples 320j .. 320j + 399; frame f of 10 ms uses ContentVec
		// frame min(floor(f / 2), last); output sample k belongs to window frame floor(k / 400) + 100.
		const filtered = new ButterworthHighPass(48, IN_RATE).process(Float32Array.from(input.flatMap((b) => [...b])));
		const n = filtered.length;
		const context = IN_RATE;
		const windowLength = Math.ceil((n + context) / 160) * 160 + context;
		const at = (i: number) => filtered[i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i] as number;
		const contentFrames = Math.floor((windowLength - 400) / 320) + 1;
		const feature = Array.from({ length: contentFrames }, (_, j) => {
			let sum = 0;
			for (let i = 0; i < 400; i++) sum += at(320 * j + i - context);
			return sum / 400;
		});
		expect(samples.length).toBe(seconds * OUT_RATE);
		let worst = 0;
		for (let k = 0; k < samples.length; k++) {
			const frame = Math.floor(k / 400) + context / 160;
			const expected = feature[Math.min(frame >> 1, contentFrames - 1)] as number;
			worst = Math.max(worst, Math.abs((samples[k] as number) - expected));
		}
		expect(worst).toBeLessThan(1e-5);
	});

	it("feeds v2 ContentVec models with either audio input layout", async () => {
		const paths = writeModels({
			contentvec: buildTinyContentVec({ inputRank: 2 }),
		});
		const other = new Map(artifactPaths).set("contentvec", paths.get("contentvec") as string);
		const { samples } = await collect(run(speechLike(1), job({ artifactPaths: other })));
		expect(samples.length).toBe(OUT_RATE);
	});

	describe("RVC's controls", () => {
		const INDEXES = join(import.meta.dirname, "fixtures", "index");
		let echo: Map<string, string>;
		beforeAll(() => {
			// 16-wide features (the fixtures' width): each the mean of the frame's samples; the synthesizer outputs
			// phone[:, frame, 0], so every output sample shows the feature the synthesizer was given.
			const paths = writeModels({
				contentvec: buildTinyContentVec({ meanFeatures: true, featureDim: 16 }),
				synthesizer: buildTinySynthesizer({ sampleRate: OUT_RATE, echoPhone: true, featureDim: 16 }),
			});
			echo = new Map(artifactPaths)
				.set("contentvec", paths.get("contentvec") as string)
				.set("synthesizer", paths.get("synthesizer") as string);
		});
		/** Voiced 0-1 s and 1.6-3 s, silent (unvoiced) in between. */
		const withPause = () => speechLike(3, (t) => t >= 1 && t < 1.6);
		const span = (x: Float32Array, from: number, to: number) => x.subarray(from * OUT_RATE, to * OUT_RATE);

		it("index_rate 1 replaces every feature by the index's; protect 0.5 leaves unvoiced frames replaced too", async () => {
			// Every vector of constant-flat.index is 0.25 in every dimension.
			const paths = new Map(echo).set("index", join(INDEXES, "constant-flat.index"));
			const { samples } = await collect(
				run(withPause(), job({ artifactPaths: paths, voiceSettings: { index_rate: 1, protect: 0.5 } })),
			);
			expect(samples.length).toBe(3 * OUT_RATE);
			expect(samples.every((v) => Math.abs(v - 0.25) < 1e-5)).toBe(true);
		});

		it("index_rate 0 leaves the features as without an index", async () => {
			const paths = new Map(echo).set("index", join(INDEXES, "constant-flat.index"));
			const without = await collect(run(withPause(), job({ artifactPaths: echo })));
			const zero = await collect(run(withPause(), job({ artifactPaths: paths, voiceSettings: { index_rate: 0 } })));
			expect(zero.samples.every((v, i) => v === without.samples[i])).toBe(true);
			expect(without.samples.some((v) => Math.abs(v - 0.25) > 0.1)).toBe(true);
		});

		it("protect keeps the original features on unvoiced frames only", async () => {
			const paths = new Map(echo).set("index", join(INDEXES, "constant-flat.index"));
			const original = (await collect(run(withPause(), job({ artifactPaths: echo })))).samples;
			for (const protect of [0, 0.33]) {
				const { samples } = await collect(
					run(withPause(), job({ artifactPaths: paths, voiceSettings: { index_rate: 1, protect } })),
				);
				// Voiced: the index's vector. Unvoiced (the pause, away from its edges): protect x index + (1 - protect) x original.
				expect(span(samples, 0.2, 0.8).every((v) => Math.abs(v - 0.25) < 1e-5)).toBe(true);
				expect(span(samples, 2, 2.8).every((v) => Math.abs(v - 0.25) < 1e-5)).toBe(true);
				const pause = span(samples, 1.15, 1.45);
				const before = span(original, 1.15, 1.45);
				expect(
					pause.every((v, i) => Math.abs(v - (protect * 0.25 + (1 - protect) * (before[i] as number))) < 1e-5),
				).toBe(true);
			}
		});

		it("prepare reads the voice's feature index ahead of its first job, and reports a damaged one then", async () => {
			await engine.prepare?.(voice(), new Map(echo).set("index", join(INDEXES, "constant-flat.index")));
			await expect(
				engine.prepare?.(voice(), new Map(echo).set("index", join(INDEXES, "truncated.index"))),
			).rejects.toMatchObject({ code: "invalid_index", message: expect.stringContaining("truncated.index") });
			// Not when the voice's own settings leave the index unused.
			await engine.prepare?.(voice({ index_rate: 0 }), new Map(echo).set("index", join(INDEXES, "truncated.index")));
		});

		it("removes a cached index damaged on disk that no longer reads, failing the job for another attempt to download it again", async () => {
			const bytes = readFileSync(join(INDEXES, "constant-flat.index"));
			const path = join(scratchDir("rvc-index"), `${createHash("sha256").update(bytes).digest("hex")}.bin`);
			const damaged = Buffer.from(bytes);
			damaged[0] = (damaged[0] as number) ^ 0xff; // same size: its index type no longer reads
			writeFileSync(path, damaged);
			const paths = new Map(echo).set("index", path);
			const error = await collect(run(withPause(), job({ artifactPaths: paths }))).catch((e: unknown) => e);
			expect((error as Error).message).toMatch(/feature index .* \(damaged on disk\): removed, to be downloaded again/);
			expect(error).not.toBeInstanceOf(PermanentJobError);
			expect(existsSync(path)).toBe(false);
			// The same bytes under a name that is not their checksum (not from the cache): refused for what they are.
			const named = join(scratchDir("rvc-index"), "voice.index");
			writeFileSync(named, damaged);
			await expect(
				collect(run(withPause(), job({ artifactPaths: new Map(echo).set("index", named) }))),
			).rejects.toMatchObject({ code: "invalid_index" });
			expect(existsSync(named)).toBe(true);
		});

		it("refuses an index whose width does not fit the voice", async () => {
			const paths = new Map(artifactPaths).set("index", join(INDEXES, "flat-l2.index"));
			await expect(collect(run(speechLike(1), job({ artifactPaths: paths })))).rejects.toMatchObject({
				code: "invalid_index",
				message: expect.stringMatching(/holds 16-wide vectors but the voice's models use 768-wide features/),
			});
		});

		it("refuses an index of another width from its header, before reading its 20 million lists", async () => {
			// 240 MB of IVF index of width 1, as faiss lays one out: reading its lists took 4-7 s. Cut after its
			// quantizer's header, it is refused for its width, not as truncated: nothing past the header was read.
			const path = join(scratchDir("rvc-index"), "wide.index");
			await writeSparseIvfFlat(path, 1, 20_000_000);
			truncateSync(path, 4096);
			const paths = new Map(artifactPaths).set("index", path);
			await expect(collect(run(speechLike(1), job({ artifactPaths: paths })))).rejects.toMatchObject({
				code: "invalid_index",
				message: expect.stringMatching(/holds 1-wide vectors but the voice's models use 768-wide features/),
			});
		});

		it("removes a cached index whose width was damaged on disk, rather than refusing the voice for good", async () => {
			const bytes = readFileSync(join(INDEXES, "constant-flat.index"));
			const path = join(scratchDir("rvc-index"), `${createHash("sha256").update(bytes).digest("hex")}.bin`);
			const damaged = Buffer.from(bytes);
			damaged.writeInt32LE(17, 4); // the header's width: 17, where the voice's models use 16
			writeFileSync(path, damaged);
			const error = await collect(run(withPause(), job({ artifactPaths: new Map(echo).set("index", path) }))).catch(
				(e: unknown) => e,
			);
			expect((error as Error).message).toMatch(/feature index .* \(damaged on disk\): removed, to be downloaded again/);
			expect(error).not.toBeInstanceOf(PermanentJobError);
			expect(existsSync(path)).toBe(false);
		});

		it("tracks f0 with YIN when f0_method is yin, with no rmvpe artifact", async () => {
			const noRmvpe = new Map(artifactPaths);
			noRmvpe.delete("rmvpe");
			const { samples } = await collect(
				run(speechLike(3), job({ artifactPaths: noRmvpe, semitones: 5, voice: voice({ f0_method: "yin" }) })),
			);
			// speechLike is a 150 Hz harmonic tone; the tiny synthesizer sings pitchf.
			const measured = zeroCrossingFrequency(samples, OUT_RATE, 0.2 * OUT_RATE, 2.8 * OUT_RATE);
			expect(Math.abs(cents(measured, 150 * 2 ** (5 / 12)))).toBeLessThan(5);
			await expect(collect(run(speechLike(1), job({ artifactPaths: noRmvpe })))).rejects.toMatchObject({
				code: "missing_artifact",
				message: expect.stringMatching(
					/lacks artifact\(s\) rmvpe .*f0_method is "rmvpe"; add the rmvpe ONNX file or use f0_method "yin"/,
				),
			});
		});

		it("runs a model without f0 with no pitch inputs and no rmvpe, and shifts its key after synthesis", async () => {
			const paths = writeModels({ synthesizer: buildTinySynthesizer({ sampleRate: OUT_RATE, pitchInputs: false }) });
			const noF0 = new Map([
				["contentvec", artifactPaths.get("contentvec") as string],
				["synthesizer", paths.get("synthesizer") as string],
			]);
			stats.length = 0;
			const shifted = await collect(run(speechLike(2.5), job({ artifactPaths: noF0, semitones: 7 })));
			expect(shifted.samples.length).toBe(2.5 * OUT_RATE);
			expect(stats.every((s) => s.voicedFrames === 0 && s.milliseconds.rmvpe === 0)).toBe(true);
			const plain = await collect(run(speechLike(2.5), job({ artifactPaths: noF0, semitones: 0 })));
			expect(plain.samples.some((v) => v !== 0)).toBe(true);
			// The synthesizer's own output, as unshifted, through the dsp engine's shifter block by block.
			const shifter = await AlignedPitchShifter.create(1, OUT_RATE, {
				semitones: 7,
				formantSemitones: 0,
				formantBaseHz: 0,
				tonalityLimitHz: 8000,
			});
			const expected = [...plain.blocks.flatMap((b) => [...shifter.push(b.channels)]), ...shifter.flush()].flatMap(
				([channel]) => [...(channel as Float32Array)],
			);
			expect(expected.length).toBe(shifted.samples.length);
			expect(shifted.samples.every((v, i) => v === expected[i])).toBe(true);
			expect(shifted.samples.some((v, i) => v !== plain.samples[i])).toBe(true);
			// The voice's own transpose_semitones counts too, as it does for a model with f0.
			const transposed = await collect(
				run(speechLike(2.5), job({ artifactPaths: noF0, semitones: 0, voice: voice({ transpose_semitones: 7 }) })),
			);
			expect(transposed.samples.every((v, i) => v === shifted.samples[i])).toBe(true);
		});

		it("fails a job permanently on voice settings it cannot honour", async () => {
			const refuse = (voiceSettings: Record<string, unknown>, message: RegExp) =>
				expect(collect(run(speechLike(1), job({ voiceSettings })))).rejects.toSatisfy(
					(error: Error) => error instanceof PermanentJobError && message.test(error.message),
				);
			await refuse({ protect: 0.7 }, /voice_settings.protect must be a number in 0..0.5, got 0.7/);
			await refuse({ formant_shift: -3 }, /voice_settings.formant_shift must be 0 for rvc voices/);
			await refuse({ index_rate: 0.5 }, /voice_settings.index_rate needs a voice with a feature index/);
		});
	});

	it("prepares a voice ahead of its first job, and converts with int8 ContentVec close to float", async () => {
		await engine.prepare?.(voice(), artifactPaths);
		const float = await collect(run(speechLike(3), job()));
		const int8Engine = createRvcEngine({ noiseSeed: 1234, contentvecInt8: true });
		await int8Engine.init();
		try {
			await int8Engine.prepare?.(voice(), artifactPaths);
			const int8 = await collect(int8Engine.convert(speechLike(3), job(), new AbortController().signal));
			expect(int8.samples.length).toBe(float.samples.length);
			let signal = 0;
			let error = 0;
			for (let i = 0; i < float.samples.length; i++) {
				signal += (float.samples[i] as number) ** 2;
				error += ((float.samples[i] as number) - (int8.samples[i] as number)) ** 2;
			}
			expect(10 * Math.log10(signal / error)).toBeGreaterThan(20);
		} finally {
			await int8Engine.dispose();
		}
		await expect(engine.prepare?.(voice(), new Map())).rejects.toMatchObject({ code: "missing_artifact" });
	});

	it("with feature arenas (RUNNER_RVC_FEATURE_ARENAS) converts exactly as without: only memory is kept", async () => {
		const signal = new AbortController().signal;
		const plain = createRvcEngine({ noiseSeed: 7, intraOpNumThreads: 1 });
		const arenas = createRvcEngine({ noiseSeed: 7, intraOpNumThreads: 1, featureArenas: true });
		// Shared by two model threads they keep arenas by default (next test), and an explicit off still holds.
		const sharedOff = createRvcEngine({ noiseSeed: 7, intraOpNumThreads: 1, capacity: 2, featureArenas: false });
		try {
			const infos = await Promise.all([plain.init(), arenas.init(), sharedOff.init()]);
			expect(infos.map((info) => info.details?.feature_arenas)).toEqual([false, true, false]);
			expect(infos[2]?.details?.shared_feature_models).toBe(true);
			// Twice each: the second run of a session with an arena reuses the first run's memory.
			for (let i = 0; i < 2; i++) {
				const [a, b] = [
					await collect(plain.convert(speechLike(3), job({ semitones: 2 }), signal)),
					await collect(arenas.convert(speechLike(3), job({ semitones: 2 }), signal)),
				];
				expect(b.samples).toEqual(a.samples);
			}
		} finally {
			await Promise.all([plain.dispose(), arenas.dispose(), sharedOff.dispose()]);
		}
	});

	it("keeps nothing a transient job (a voice's validation) loaded, and evicts nothing for it", async () => {
		const files = writeModels({
			contentvec: buildTinyContentVec(),
			rmvpe: buildTinyRmvpe({ pitchBin: PITCH_BIN }),
			synthesizer: buildTinySynthesizer({ sampleRate: OUT_RATE }),
			validated: buildTinySynthesizer({ sampleRate: OUT_RATE }),
		});
		const kept = new Map([...files].filter(([name]) => name !== "validated"));
		const validated = new Map(kept).set("synthesizer", files.get("validated") as string);
		// One voice kept per model thread (the CPU's default).
		const own = createRvcEngine({ noiseSeed: 5 });
		expect((await own.init()).details).toMatchObject({ cached_voices: 1 });
		const signal = new AbortController().signal;
		const convert = (paths: Map<string, string>, transient?: boolean) =>
			collect(own.convert(speechLike(1), job({ artifactPaths: paths, ...(transient ? { transient } : {}) }), signal));
		try {
			const first = await convert(kept);
			await convert(validated, true);
			// Both files now unreadable as models: the kept voice converts from the session it still has, and the
			// validated one must load again, and fails.
			for (const paths of [kept, validated]) writeFileSync(paths.get("synthesizer") as string, "not a model");
			expect((await convert(kept)).samples).toEqual(first.samples);
			await expect(convert(validated)).rejects.toMatchObject({ code: "invalid_model" });
		} finally {
			await own.dispose();
		}
	});

	/**
	 * An engine of its own and a voice whose files it may overwrite: 16-wide features, each the mean of its frame's
	 * samples, echoed by the synthesizer, and an index of 0.25 everywhere; with index_rate 1 every output sample is
	 * 0.25, so the output shows that the index was used.
	 */
	const voiceWithIndex = async () => {
		const files = writeModels({
			contentvec: buildTinyContentVec({ meanFeatures: true, featureDim: 16 }),
			rmvpe: buildTinyRmvpe({ pitchBin: PITCH_BIN }),
			synthesizer: buildTinySynthesizer({ sampleRate: OUT_RATE, echoPhone: true, featureDim: 16 }),
		});
		const index = join(scratchDir("rvc-forget"), "voice.index");
		writeFileSync(index, readFileSync(join(import.meta.dirname, "fixtures", "index", "constant-flat.index")));
		const paths = new Map(files).set("index", index);
		const engine = createRvcEngine({ noiseSeed: 7 });
		await engine.init();
		const signal = new AbortController().signal;
		return {
			own: engine,
			paths,
			synthesizer: files.get("synthesizer") as string,
			index,
			convert: (input = speechLike(1)) =>
				engine.convert(input, job({ artifactPaths: paths, voiceSettings: { index_rate: 1 } }), signal),
		};
	};

	it("forgets a deleted voice's loaded synthesizer and index, after the job in flight that uses them", async () => {
		const { own, paths, synthesizer, index, convert } = await voiceWithIndex();
		try {
			await own.prepare?.(voice(), paths);
			// A job of two windows is under way, with the voice's synthesizer and index, when the voice is deleted.
			const running = convert(speechLike(3))[Symbol.asyncIterator]();
			const first = await running.next();
			await own.forget?.([synthesizer, index]);
			// Its files go too (the runner removes them): only what is loaded can serve from now on.
			writeFileSync(synthesizer, "not a model");
			writeFileSync(index, "not an index");
			const samples = [...((first.value as AudioBlock).channels[0] ?? [])];
			for (let next = await running.next(); !next.done; next = await running.next())
				samples.push(...(next.value.channels[0] ?? []));
			// The job finished from what it held, as it would have.
			expect(samples.length).toBe(3 * OUT_RATE);
			expect(samples.every((v) => Math.abs(v - 0.25) < 1e-5)).toBe(true);
			// Once it was done, both went: the next job must read the files again.
			await expect(collect(convert())).rejects.toMatchObject({ code: "invalid_model" });
			writeFileSync(synthesizer, buildTinySynthesizer({ sampleRate: OUT_RATE, echoPhone: true, featureDim: 16 }));
			await expect(collect(convert())).rejects.toMatchObject({ code: "invalid_index" });
		} finally {
			await own.dispose();
		}
	});

	it("forgets an idle voice's synthesizer and index at once, and keeps the voices not named", async () => {
		const { own, index, convert: stream } = await voiceWithIndex();
		const convert = () => collect(stream());
		try {
			const before = await convert();
			// Another voice's files named: nothing of this one goes.
			await own.forget?.([join(scratchDir("rvc-forget"), "other.onnx")]);
			writeFileSync(index, "not an index");
			expect((await convert()).samples).toEqual(before.samples);
			await own.forget?.([index]);
			await expect(convert()).rejects.toMatchObject({ code: "invalid_index" });
		} finally {
			await own.dispose();
		}
	});

	it("with capacity 2 converts jobs side by side on two model threads, each as it converts alone", async () => {
		const signal = new AbortController().signal;
		const jobs = [job(), job({ semitones: 4 }), job({ semitones: -3 })];
		const inputs = () => [speechLike(3), speechLike(2, (t) => t > 1.2), speechLike(2.5)];
		const alone = createRvcEngine({ noiseSeed: 99, intraOpNumThreads: 1 });
		const together = createRvcEngine({ noiseSeed: 99, intraOpNumThreads: 1, capacity: 2 });
		// RUNNER_RVC_MODEL_THREADS=1: one copy of the models, the jobs take turns on its thread.
		const oneThread = createRvcEngine({ noiseSeed: 99, intraOpNumThreads: 1, capacity: 2, modelThreads: 1 });
		try {
			const infos = await Promise.all([alone.init(), together.init(), oneThread.init()]);
			expect(infos.map((info) => info.details?.model_threads)).toEqual([1, 2, 1]);
			// Two model threads share one copy of ContentVec and RMVPE, on a thread of their own.
			expect(infos.map((info) => info.details?.shared_feature_models)).toEqual([false, true, false]);
			// Shared, they keep arenas unless told not to.
			expect(infos.map((info) => info.details?.feature_arenas)).toEqual([false, true, false]);
			await together.prepare?.(voice(), artifactPaths);
			const expected: Float32Array[] = [];
			for (const [i, input] of inputs().entries()) {
				expected.push((await collect(alone.convert(input, jobs[i] as EngineJob, signal))).samples);
			}
			for (const engine of [together, oneThread]) {
				// Three at once: on two threads two run and the third waits for one; on one thread they take turns.
				const got = await Promise.all(
					inputs().map((input, i) => collect(engine.convert(input, jobs[i] as EngineJob, signal))),
				);
				for (const [i, result] of got.entries()) expect(result.samples).toEqual(expected[i]);
			}
		} finally {
			await Promise.all([alone.dispose(), together.dispose(), oneThread.dispose()]);
		}
	});

	describe("clear errors", () => {
		const convertOnce = (j: EngineJob, input = speechLike(1)) => collect(run(input, j));

		it("names missing artifacts", async () => {
			const partial = new Map([["synthesizer", artifactPaths.get("synthesizer") as string]]);
			await expect(convertOnce(job({ artifactPaths: partial }))).rejects.toMatchObject({
				code: "missing_artifact",
				message: expect.stringMatching(/lacks artifact\(s\) contentvec, rmvpe \(has: synthesizer\)/),
			});
		});

		it("names a synthesizer input that is not RVC's", async () => {
			const paths = writeModels({
				synthesizer: buildTinySynthesizer({
					sampleRate: OUT_RATE,
					rename: { pitchf: "f0" },
				}),
			});
			const wrong = new Map(artifactPaths).set("synthesizer", paths.get("synthesizer") as string);
			await expect(convertOnce(job({ artifactPaths: wrong }))).rejects.toMatchObject({
				code: "invalid_model",
				message: expect.stringMatching(
					/synthesizer model .* is missing input\(s\) pitchf; found \[phone, phone_lengths, pitch, f0, ds, rnd\]/,
				),
			});
		});

		it("refuses a synthesizer whose graph loops or branches before running any of it, permanently", async () => {
			// A voice made ready before validation held synthesizers to the graph rules (make-hostile-onnx.py): the
			// Loop runs 1000 x frames^3 times, 10^9 on this second's window, for the model thread's every job.
			const cases: [string, string][] = [
				["loop-frames.onnx", 'control-flow operator "Loop"'],
				["if-input.onnx", 'control-flow operator "If"'],
				["contrib-op.onnx", 'operator "FastGelu" (node "gelu") of domain "com.microsoft"'],
			];
			for (const [name, op] of cases) {
				const hostile = join(import.meta.dirname, "fixtures/hostile", name);
				const started = performance.now();
				const error = await convertOnce(
					job({ artifactPaths: new Map(artifactPaths).set("synthesizer", hostile) }),
				).catch((e: unknown) => e);
				expect(error, name).toMatchObject({
					code: "invalid_model",
					permanent: true,
					message: expect.stringContaining(`synthesizer model ${hostile}: the ONNX graph holds the ${op}`),
				});
				expect(performance.now() - started, name).toBeLessThan(10_000);
			}
		});

		it("refuses a synthesizer that would read a tensor from a file beside it in the artifact folder", async () => {
			// make-hostile-onnx.py: an initializer whose data is `neighbour.bin`, which onnxruntime resolves beside the
			// model it loads by path; a runner's artifact folder holds every voice's files.
			const dir = scratchDir("external-data");
			const model = join(dir, "model.onnx");
			writeFileSync(model, readFileSync(join(import.meta.dirname, "fixtures/hostile/external-data.onnx")));
			writeFileSync(join(dir, "neighbour.bin"), "SECRETS!");
			await expect(
				convertOnce(job({ artifactPaths: new Map(artifactPaths).set("synthesizer", model) })),
			).rejects.toMatchObject({
				code: "invalid_model",
				message: expect.stringContaining('the ONNX model keeps tensor "secret" in an external file ("neighbour.bin")'),
			});
		});

		it("names w-okada's voice changer export and asks for the .pth", async () => {
			// Its inputs (export2onnx.py): feats, p_len, pitch, pitchf, sid; the noise is drawn inside, so no rnd.
			const paths = writeModels({
				synthesizer: buildTinySynthesizer({
					sampleRate: OUT_RATE,
					rename: { phone: "feats", phone_lengths: "p_len", ds: "sid", rnd: "noise_drawn_inside" },
				}),
			});
			const okada = new Map(artifactPaths).set("synthesizer", paths.get("synthesizer") as string);
			await expect(convertOnce(job({ artifactPaths: okada }))).rejects.toMatchObject({
				code: "invalid_model",
				message: expect.stringMatching(
					/is missing input\(s\) phone, phone_lengths, ds, rnd; .*; this is w-okada's voice changer export, .*: upload the RVC \.pth it was exported from/,
				),
			});
		});

		it("rejects an RMVPE model with the wrong number of pitch bins", async () => {
			const paths = writeModels({
				rmvpe: buildTinyRmvpe({ pitchBin: 100, bins: 300 }),
			});
			const wrong = new Map(artifactPaths).set("rmvpe", paths.get("rmvpe") as string);
			await expect(convertOnce(job({ artifactPaths: wrong }))).rejects.toThrow(
				/rmvpe model .*output "salience" has shape \[1, frames, 300\], expected \[1, frames, 360\]/,
			);
		});

		it("rejects ContentVec features that do not fit the synthesizer", async () => {
			const paths = writeModels({
				contentvec: buildTinyContentVec({ featureDim: 256 }),
			});
			const wrong = new Map(artifactPaths).set("contentvec", paths.get("contentvec") as string);
			await expect(convertOnce(job({ artifactPaths: wrong }))).rejects.toThrow(
				/gives 256-d features but synthesizer .* takes 768-d phone input/,
			);
		});

		it("says when sample_rate does not match the synthesizer", async () => {
			await expect(convertOnce(job({ voice: voice({ sample_rate: 48000 }) }))).rejects.toThrow(
				/returned \d+ samples for \d+ frames \(400 per frame\); expected 480 per frame .*sample_rate \(48000\)/,
			);
		});

		it("rejects a file that is not an ONNX model", async () => {
			const paths = writeModels({
				rmvpe: new TextEncoder().encode("not a model"),
			});
			const wrong = new Map(artifactPaths).set("rmvpe", paths.get("rmvpe") as string);
			await expect(convertOnce(job({ artifactPaths: wrong }))).rejects.toMatchObject({
				code: "invalid_model",
				message: expect.stringMatching(/rmvpe model .* could not be loaded on cpu/),
			});
		});

		it("lists every bad voice param", async () => {
			await expect(
				convertOnce(
					job({
						voice: voice({
							sample_rate: undefined,
							speaker_id: -1,
							chunk_seconds: "long",
						}),
					}),
				),
			).rejects.toMatchObject({
				code: "invalid_params",
				message: expect.stringMatching(
					/sample_rate is required; speaker_id must be an integer in 0..10000, got -1; chunk_seconds must be a number in 1..120, got "long"/,
				),
			});
		});

		it("refuses a speaker_id past the speakers the voice's model holds, before converting anything", async () => {
			// The count the admin tool records from the checkpoint; onnxruntime would fail the synthesizer's embedding
			// lookup only once the first window reached it.
			await expect(convertOnce(job({ voice: voice({ speaker_id: 3, speakers: 3 }) }))).rejects.toMatchObject({
				code: "invalid_params",
				permanent: true,
				message: expect.stringMatching(/speaker_id 3 is beyond the model's 3 speakers \(0 to 2\)/),
			});
			await expect(convertOnce(job({ voice: voice({ speakers: 0 }) }))).rejects.toMatchObject({
				code: "invalid_params",
				message: expect.stringMatching(/speakers \(the model's speaker count\) must be a positive integer, got 0/),
			});
			const within = await convertOnce(job({ voice: voice({ speaker_id: 2, speakers: 3 }) }));
			expect(within.samples.length).toBe(OUT_RATE);
		});

		it("refuses input that is not 16 kHz mono", async () => {
			const stereo = (async function* () {
				yield {
					sampleRate: 44100,
					channels: [new Float32Array(100), new Float32Array(100)],
				};
			})();
			await expect(convertOnce(job(), stereo)).rejects.toMatchObject({
				code: "invalid_input",
				message: expect.stringMatching(/takes 16000 Hz mono blocks, got 44100 Hz with 2 channel/),
			});
		});

		it("refuses work before init", async () => {
			await expect(
				collect(createRvcEngine().convert(speechLike(1), job(), new AbortController().signal)),
			).rejects.toMatchObject({ code: "not_ready" });
		});
	});
});
