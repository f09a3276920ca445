/**
 * The synthesizer graph's speed options keep RVC's arithmetic: the planar (`[1, C, 1, T]`) decoder computes what
 * the 1-D one does, and decoding a span of frames gives, away from the span's ends, exactly the samples that
 * decoding every frame gives. Weights from a checkpoint written by PyTorch (fixtures/generate.py).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/engines/engine.ts";
import { createRvcEngine, type RvcChunkStats } from "../../src/engines/rvc/index.ts";
import { readRvcCheckpoint } from "../../src/engines/rvc/rvc-checkpoint.ts";
import { type SynthesizerConfig, samplesPerFrame } from "../../src/engines/rvc/synthesizer-config.ts";
import {
	buildSynthesizerGraph,
	DECODE_SPAN_MARGIN_FRAMES,
	decoderReachFrames,
} from "../../src/engines/rvc/synthesizer-graph.ts";
import { blocksOf, collect } from "../helpers/streams.ts";
import { buildTinyContentVec, buildTinyRmvpe, pseudoRandom, writeModels } from "./support/tiny-models.ts";

const checkpoint = readRvcCheckpoint(
	new Uint8Array(readFileSync(join(import.meta.dirname, "fixtures", "v2-f0-40k.pth"))),
);
const FRAMES = 90;

/** The graph's audio; `span` is `[start, frames]`, or `[starts, frames]` for pieces. */
async function synthesize(
	bytes: Uint8Array,
	span?: [number | number[], number],
	options: ort.InferenceSession.SessionOptions = {},
): Promise<Float32Array> {
	const session = await ort.InferenceSession.create(bytes, options);
	try {
		const feeds: Record<string, ort.Tensor> = {
			phone: new ort.Tensor("float32", pseudoRandom(FRAMES * checkpoint.featureDim, 1, 1), [
				1,
				FRAMES,
				checkpoint.featureDim,
			]),
			phone_lengths: new ort.Tensor("int64", BigInt64Array.of(BigInt(FRAMES)), [1]),
			pitch: new ort.Tensor(
				"int64",
				BigInt64Array.from({ length: FRAMES }, (_, i) => BigInt(40 + (i % 90))),
				[1, FRAMES],
			),
			// Voiced with a gliding f0, and an unvoiced stretch.
			pitchf: new ort.Tensor(
				"float32",
				Float32Array.from({ length: FRAMES }, (_, i) => (i % 45 < 35 ? 110 + i : 0)),
				[1, FRAMES],
			),
			ds: new ort.Tensor("int64", BigInt64Array.of(0n), [1]),
			rnd: new ort.Tensor("float32", pseudoRandom(checkpoint.config.interChannels * FRAMES, 2, 0.66), [
				1,
				checkpoint.config.interChannels,
				FRAMES,
			]),
		};
		if (span !== undefined) {
			const starts = typeof span[0] === "number" ? [span[0]] : span[0];
			feeds.decode_start = new ort.Tensor("int64", BigInt64Array.from(starts, BigInt), [starts.length]);
			feeds.decode_frames = new ort.Tensor("int64", BigInt64Array.of(BigInt(span[1])), [1]);
		}
		return (await session.run(feeds)).audio?.data as Float32Array;
	} finally {
		await session.release();
	}
}

const maxAbsDifference = (a: Float32Array, b: Float32Array) =>
	a.reduce((max, v, i) => Math.max(max, Math.abs(v - (b[i] as number))), 0);

describe("synthesizer graph speed options", () => {
	it("computes the same audio with the planar decoder as with RVC's 1-D one", async () => {
		const planar = await synthesize(buildSynthesizerGraph(checkpoint, { sourceNoise: false }).bytes);
		const linear = await synthesize(
			buildSynthesizerGraph(checkpoint, { sourceNoise: false, decoderLayout: "1d" }).bytes,
		);
		expect(planar.length).toBe(FRAMES * samplesPerFrame(checkpoint.config));
		expect(Math.max(...planar.map(Math.abs))).toBeGreaterThan(0.1);
		expect(maxAbsDifference(planar, linear)).toBeLessThan(1e-5);
	});

	it("gives every published RVC decoder span inputs: they reach 11.2 to 14.5 frames, within the margin", () => {
		// RVC's configs (rvc-formats.md): upsampling rates and kernels by version and rate; the blocks are shared.
		const published: [string, number[], number[]][] = [
			["v1 32k", [10, 4, 2, 2, 2], [16, 16, 4, 4, 4]],
			["v1 40k / v2 40k", [10, 10, 2, 2], [16, 16, 4, 4]],
			["v1 48k", [10, 6, 2, 2, 2], [16, 16, 4, 4, 4]],
			["v2 32k", [10, 8, 2, 2], [20, 16, 4, 4]],
			["v2 48k", [12, 10, 2, 2], [24, 20, 4, 4]],
		];
		const blocks: Pick<SynthesizerConfig, "resblock" | "resblockKernelSizes" | "resblockDilationSizes"> = {
			resblock: "1",
			resblockKernelSizes: [3, 7, 11],
			resblockDilationSizes: [
				[1, 3, 5],
				[1, 3, 5],
				[1, 3, 5],
			],
		};
		const reach = Object.fromEntries(
			published.map(([name, upsampleRates, upsampleKernelSizes]) => [
				name,
				Math.round(decoderReachFrames({ ...checkpoint.config, ...blocks, upsampleRates, upsampleKernelSizes }) * 100) /
					100,
			]),
		);
		expect(reach).toEqual({
			"v1 32k": 14.46,
			"v1 40k / v2 40k": 12.4,
			"v1 48k": 13.37,
			"v2 32k": 12.68,
			"v2 48k": 11.17,
		});
		for (const frames of Object.values(reach)) expect(frames).toBeLessThanOrEqual(DECODE_SPAN_MARGIN_FRAMES);
	});

	it("decodes a span of frames exactly as decoding them all, beyond the margin from its ends", async () => {
		expect(decoderReachFrames(checkpoint.config)).toBeLessThanOrEqual(DECODE_SPAN_MARGIN_FRAMES);
		const hop = samplesPerFrame(checkpoint.config);
		const whole = await synthesize(buildSynthesizerGraph(checkpoint, { sourceNoise: false }).bytes);
		const spanGraph = buildSynthesizerGraph(checkpoint, { sourceNoise: false, decodeSpan: true }).bytes;
		for (const [start, frames] of [
			[20, 50],
			[0, 40],
			[45, 45],
		] as const) {
			const part = await synthesize(spanGraph, [start, frames]);
			expect(part.length).toBe(frames * hop);
			const from = start === 0 ? 0 : DECODE_SPAN_MARGIN_FRAMES;
			const to = start + frames === FRAMES ? frames : frames - DECODE_SPAN_MARGIN_FRAMES;
			const inner = part.subarray(from * hop, to * hop);
			expect(maxAbsDifference(inner, whole.subarray((start + from) * hop, (start + to) * hop))).toBeLessThan(1e-6);
		}
	});

	it("decodes pieces of a span as rows of one run, each as decoding everything gives it beyond the margin", async () => {
		const hop = samplesPerFrame(checkpoint.config);
		const whole = await synthesize(buildSynthesizerGraph(checkpoint, { sourceNoise: false }).bytes);
		const margin = DECODE_SPAN_MARGIN_FRAMES;
		for (const layout of ["2d", "1d"] as const) {
			const graph = buildSynthesizerGraph(checkpoint, { sourceNoise: false, decodeSpan: true, decoderLayout: layout });
			// Overlapping pieces, one at each end of the window and one inside it.
			const starts = [0, 25, 50];
			const length = 40;
			const parts = await synthesize(graph.bytes, [starts, length], { intraOpNumThreads: 2 });
			expect(parts.length).toBe(starts.length * length * hop);
			starts.forEach((start, k) => {
				const from = start === 0 ? 0 : margin;
				const to = start + length === FRAMES ? length : length - margin;
				const piece = parts.subarray((k * length + from) * hop, (k * length + to) * hop);
				expect(maxAbsDifference(piece, whole.subarray((start + from) * hop, (start + to) * hop))).toBeLessThan(1e-6);
			});
			// One piece is the span as before.
			const one = await synthesize(graph.bytes, [[25], length]);
			expect(maxAbsDifference(one, parts.subarray(length * hop, 2 * length * hop))).toBe(0);
		}
	});

	it("lets the engine decode only what it keeps of each window, with the same output", async () => {
		const paths = engineModels();
		const stats: RvcChunkStats[] = [];
		const engine = createRvcEngine({ noiseSeed: 3, decodePieces: 1, onChunk: (chunk) => stats.push(chunk) });
		await engine.init();
		const convert = (synthesizer: string, rmsMixRate: number) =>
			convertTone(engine, paths, synthesizer, { chunk_seconds: 1.5, rms_mix_rate: rmsMixRate });
		try {
			const whole = await convert("whole", 1);
			stats.length = 0;
			const spans = await convert("spans", 1);
			expect(stats.length).toBeGreaterThanOrEqual(3);
			expect(spans.length).toBe(4 * checkpoint.config.sampleRate);
			expect(whole.reduce((peak, v) => Math.max(peak, Math.abs(v)), 0)).toBeGreaterThan(0.05);
			expect(maxAbsDifference(spans, whole)).toBeLessThan(1e-5);
			expect(stats.every((chunk) => chunk.decodedFrames < chunk.frames)).toBe(true);
			// Loudness mixing runs over the joined output, so spans are decoded with it too, to the same result.
			stats.length = 0;
			const mixedSpans = await convert("spans", 0.25);
			expect(stats.every((chunk) => chunk.decodedFrames < chunk.frames)).toBe(true);
			expect(maxAbsDifference(mixedSpans, await convert("whole", 0.25))).toBeLessThan(1e-5);
		} finally {
			await engine.dispose();
		}
	});

	it("decodes the span of a source that does not end on a 10 ms frame, with the same output", async () => {
		const paths = engineModels();
		const stats: RvcChunkStats[] = [];
		const engine = createRvcEngine({ noiseSeed: 3, decodePieces: 2, onChunk: (chunk) => stats.push(chunk) });
		await engine.init();
		// 4.0052 s: the last segment ends 83 samples into a frame (most recordings do not end on a frame).
		const samples = 64083;
		const params = { chunk_seconds: 1.5, rms_mix_rate: 1 };
		try {
			const whole = await convertTone(engine, paths, "whole", params, samples, samples);
			stats.length = 0;
			const spans = await convertTone(engine, paths, "spans", params, samples, samples);
			expect(spans.length).toBe(Math.round((samples / 16000) * checkpoint.config.sampleRate));
			expect(stats.at(-1)?.decodedFrames).toBeLessThan(stats.at(-1)?.frames as number);
			expect(maxAbsDifference(spans, whole)).toBeLessThan(1e-5);
		} finally {
			await engine.dispose();
		}
	});

	it("gives the same output to the bit when the engine decodes each span in pieces", async () => {
		const paths = engineModels();
		const outputs: Float32Array[] = [];
		const decoded: number[][] = [];
		for (const decodePieces of [1, 2, 3]) {
			const stats: RvcChunkStats[] = [];
			const engine = createRvcEngine({ noiseSeed: 3, decodePieces, onChunk: (chunk) => stats.push(chunk) });
			expect((await engine.init()).details?.decode_pieces).toBe(decodePieces);
			try {
				outputs.push(await convertTone(engine, paths, "spans", { chunk_seconds: 2.5, rms_mix_rate: 0.25 }));
				decoded.push(stats.map((chunk) => chunk.decodedFrames));
			} finally {
				await engine.dispose();
			}
		}
		const [one, two, three] = outputs as [Float32Array, Float32Array, Float32Array];
		expect(one.length).toBe(4 * checkpoint.config.sampleRate);
		expect(maxAbsDifference(two, one)).toBe(0);
		expect(maxAbsDifference(three, one)).toBe(0);
		// Each cut decodes the margin again: more frames decoded, so the pieces were used.
		const [d1, d2, d3] = decoded as [number[], number[], number[]];
		const sum = (list: number[]) => list.reduce((a, b) => a + b, 0);
		expect(sum(d2)).toBeGreaterThan(sum(d1));
		expect(sum(d3)).toBeGreaterThan(sum(d2));
	});

	it("lends idle model threads parts of a lone job's spans, with the same output to the bit, loading nothing for a job of unknown length", async () => {
		const paths = engineModels();
		const params = { chunk_seconds: 2.5, rms_mix_rate: 0.25 };
		const threadsUsed = (stats: RvcChunkStats[]) => stats.map((chunk) => chunk.synthesizerThreads);
		const engines = capacityTwoEngines();
		const [own, lending] = engines;
		try {
			const infos = await Promise.all(engines.map(({ engine }) => engine.init()));
			expect(infos.map((info) => info.details?.lend_idle_threads)).toEqual([false, true]);
			expect(infos.map((info) => info.details?.model_threads)).toEqual([2, 2]);
			// One voice's synthesizer kept per model thread on the CPU, by default.
			expect(infos.map((info) => info.details?.cached_voices)).toEqual([1, 1]);
			// Feature indexes are bounded by what they hold (1.1 GB by default on the CPU), and their threads at 16.
			expect(infos.map((info) => info.details?.cached_index_bytes)).toEqual([1.1e9, 1.1e9]);
			expect(infos.map((info) => info.details?.cached_indexes)).toEqual([16, 16]);
			// Nothing is lent before the other thread holds the synthesizer: lending itself never loads one.
			const first = await convertTone(lending.engine, paths, "spans", params);
			expect(threadsUsed(lending.stats).every((threads) => threads === 1)).toBe(true);

			const artifactPaths = new Map(paths).set("synthesizer", paths.get("spans") as string);
			const voice = {
				id: "5d0c7a3e-1f2b-4c6d-8e9f-0a1b2c3d4e5f",
				name: "spans",
				engine: "rvc" as const,
				artifacts: [],
			};
			for (const { engine } of engines)
				await engine.prepare?.({ ...voice, params: { sample_rate: checkpoint.config.sampleRate } }, artifactPaths);
			for (const { stats } of engines) stats.length = 0;
			const alone = await convertTone(own.engine, paths, "spans", params);
			const lent = await convertTone(lending.engine, paths, "spans", params);
			expect(threadsUsed(own.stats).every((threads) => threads === 1)).toBe(true);
			expect(threadsUsed(lending.stats).every((threads) => threads === 2)).toBe(true);
			expect(lent.length).toBe(4 * checkpoint.config.sampleRate);
			expect(maxAbsDifference(lent, alone)).toBe(0);
			expect(maxAbsDifference(first, alone)).toBe(0);

			// Two jobs at once hold both threads; each converts as it does alone, lent or not.
			lending.stats.length = 0;
			const [a, b] = await Promise.all([
				convertTone(lending.engine, paths, "spans", params),
				convertTone(lending.engine, paths, "spans", params),
			]);
			expect(maxAbsDifference(a as Float32Array, alone)).toBe(0);
			expect(maxAbsDifference(b as Float32Array, alone)).toBe(0);
			expect(lending.stats.length).toBeGreaterThanOrEqual(4);
		} finally {
			await Promise.all(engines.map(({ engine }) => engine.dispose()));
		}
	});

	it("loads a long job's synthesizer on an idle thread that holds another voice, and lends it every window", async () => {
		const paths = engineModels();
		paths.set("other", writeModels({ other: readFileSync(paths.get("spans") as string) }).get("other") as string);
		const params = { chunk_seconds: 1.5, rms_mix_rate: 0.25 };
		const engines = capacityTwoEngines();
		const [own, lending] = engines;
		try {
			await Promise.all(engines.map(({ engine }) => engine.init()));
			// Another voice's job leaves its synthesizer on one thread; the next job gets the other thread.
			await convertTone(lending.engine, paths, "other", params);
			lending.stats.length = 0;
			const lent = await convertTone(lending.engine, paths, "spans", params, 64000);
			expect(lending.stats.length).toBeGreaterThanOrEqual(3);
			expect(lending.stats.every((chunk) => chunk.synthesizerThreads === 2)).toBe(true);
			const alone = await convertTone(own.engine, paths, "spans", params, 64000);
			expect(own.stats.every((chunk) => chunk.synthesizerThreads === 1)).toBe(true);
			expect(maxAbsDifference(lent, alone)).toBe(0);
			// Without the source's length the job is not known to be long: nothing is loaded for it.
			await convertTone(lending.engine, paths, "other", params);
			lending.stats.length = 0;
			await convertTone(lending.engine, paths, "spans", params);
			expect(lending.stats.every((chunk) => chunk.synthesizerThreads === 1)).toBe(true);
		} finally {
			await Promise.all(engines.map(({ engine }) => engine.dispose()));
		}
	});
});

/**
 * Two engines of capacity 2 on one session thread per model thread, recording their windows: the first lends no
 * idle thread, the second does (the default).
 */
function capacityTwoEngines(): [Recorded, Recorded] {
	return [false, true].map((lendIdleThreads) => {
		const stats: RvcChunkStats[] = [];
		const engine = createRvcEngine({
			noiseSeed: 3,
			capacity: 2,
			intraOpNumThreads: 1,
			lendIdleThreads,
			onChunk: (chunk) => stats.push(chunk),
		});
		return { engine, stats };
	}) as [Recorded, Recorded];
}

interface Recorded {
	engine: Engine;
	stats: RvcChunkStats[];
}

/** The tiny feature models and the fixture's synthesizer built whole and with span inputs. */
function engineModels(): Map<string, string> {
	return writeModels({
		contentvec: buildTinyContentVec(),
		rmvpe: buildTinyRmvpe({ pitchBin: 168 }),
		whole: buildSynthesizerGraph(checkpoint, { sourceNoise: false }).bytes,
		spans: buildSynthesizerGraph(checkpoint, { sourceNoise: false, decodeSpan: true }).bytes,
	});
}

/** Four seconds of a 150 Hz tone through the engine with the named synthesizer and these voice params. */
async function convertTone(
	engine: Engine,
	paths: Map<string, string>,
	synthesizer: string,
	params: { chunk_seconds: number; rms_mix_rate: number },
	/** The source's length, as the runner passes it when the file states it. */
	inputFrames?: number,
	/** The tone's length in 16 kHz samples. */
	sourceSamples = 64000,
): Promise<Float32Array> {
	const artifactPaths = new Map(paths).set("synthesizer", paths.get(synthesizer) as string);
	const voice = {
		id: "5d0c7a3e-1f2b-4c6d-8e9f-0a1b2c3d4e5f",
		name: "spans",
		engine: "rvc" as const,
		params: {
			sample_rate: checkpoint.config.sampleRate,
			chunk_search_seconds: 0.3,
			context_seconds: 0.6,
			...params,
		},
		artifacts: [],
	};
	const tone = Float32Array.from({ length: sourceSamples }, (_, i) => 0.3 * Math.sin((i * 2 * Math.PI * 150) / 16000));
	const job = {
		voice,
		semitones: 0,
		artifactPaths,
		input: { sampleRate: 16000, channels: 1 },
		...(inputFrames !== undefined ? { inputFrames } : {}),
	};
	const { channels } = await collect(engine.convert(blocksOf([tone], 16000, 1600), job, new AbortController().signal));
	return channels[0] as Float32Array;
}
