/** Splitting long input at quiet points and joining the converted pieces: alignment, clicks, duration, streaming. */
import { describe, expect, it } from "vitest";
import {
	type ChunkPlan,
	type ChunkWindow,
	convertInChunks,
	makeChunkPlan,
	validateChunkPlan,
} from "../../src/engines/rvc/chunker.ts";
import { joinSamples } from "../helpers/streams.ts";

const IN_RATE = 16000;
const OUT_RATE = 40000;
const RATIO = OUT_RATE / IN_RATE;

function plan(overrides: Partial<Parameters<typeof makeChunkPlan>[0]> = {}): ChunkPlan {
	return makeChunkPlan({
		inputRate: IN_RATE,
		outputRate: OUT_RATE,
		hop: 160,
		cutStep: 320,
		chunkSeconds: 2,
		searchSeconds: 0.5,
		contextSeconds: 0.25,
		crossfadeSeconds: 0.02,
		...overrides,
	});
}

/** Streams `signal` in blocks of uneven sizes, counting how many were taken. */
function streamed(signal: Float32Array, counter = { taken: 0, done: false }): AsyncIterable<Float32Array> {
	return (async function* () {
		const sizes = [1234, 777, 4000, 160, 2500];
		let offset = 0;
		for (let i = 0; offset < signal.length; i++) {
			const size = sizes[i % sizes.length] as number;
			counter.taken++;
			yield signal.subarray(offset, offset + size);
			offset += size;
		}
		counter.done = true;
	})();
}

async function collect(blocks: AsyncIterable<Float32Array>): Promise<Float32Array> {
	const parts: Float32Array[] = [];
	for await (const b of blocks) parts.push(b);
	return joinSamples(parts);
}

/** Linear interpolation of `x` at fractional index `position` (clamped at the end). */
function interpolate(x: Float32Array, position: number): number {
	const i = Math.floor(position);
	const frac = position - i;
	const a = x[Math.min(i, x.length - 1)] as number;
	const b = x[Math.min(i + 1, x.length - 1)] as number;
	return a + (b - a) * frac;
}

/** A "converter" that only resamples: the joined output must then be the resampled input, sample for sample. */
async function resampleWindow(window: ChunkWindow): Promise<Float32Array> {
	const out = new Float32Array(window.samples.length * RATIO);
	for (let k = 0; k < out.length; k++) out[k] = interpolate(window.samples, k / RATIO);
	return out;
}

function testSignal(seconds: number, seed = 11): Float32Array {
	let s = seed;
	return Float32Array.from({ length: Math.round(seconds * IN_RATE) }, (_, i) => {
		s = (Math.imul(s, 1103515245) + 12345) >>> 0;
		const t = i / IN_RATE;
		return 0.5 * Math.sin(2 * Math.PI * 3 * t) * Math.sin(2 * Math.PI * 180 * t) + 0.05 * (s / 2 ** 32 - 0.5);
	});
}

describe("chunked conversion", () => {
	it("joins pieces back into exactly the whole-signal result, with the input's duration", async () => {
		const signal = testSignal(10.3717);
		const windows: ChunkWindow[] = [];
		const output = await collect(
			convertInChunks(streamed(signal), plan(), async (w) => {
				windows.push(w);
				return resampleWindow(w);
			}),
		);
		expect(windows.length).toBeGreaterThanOrEqual(4);
		expect(output.length).toBe(Math.round(signal.length * RATIO));
		let worst = 0;
		// The last input sample has no right neighbour, so leave out the final few output samples.
		for (let k = 0; k < output.length - 3; k++)
			worst = Math.max(worst, Math.abs((output[k] as number) - interpolate(signal, k / RATIO)));
		expect(worst).toBeLessThan(1e-6);
	});

	it("cuts on the cut step, in the quietest stretch near each target, with context around every piece", async () => {
		const signal = testSignal(9);
		// Near-silent gaps at 2.3 s and 4.05 s, inside the search ranges of the first two cuts.
		for (const gap of [2.3, 4.05]) signal.fill(0.0001, gap * IN_RATE, (gap + 0.1) * IN_RATE);
		const windows: ChunkWindow[] = [];
		await collect(
			convertInChunks(streamed(signal), plan(), async (w) => {
				windows.push(w);
				return resampleWindow(w);
			}),
		);
		const cuts = windows.slice(1).map((w) => w.segmentStart);
		expect(cuts[0]).toBeGreaterThanOrEqual(2.3 * IN_RATE);
		expect(cuts[0]).toBeLessThan(2.4 * IN_RATE);
		expect(cuts[1]).toBeGreaterThanOrEqual(4.05 * IN_RATE);
		expect(cuts[1]).toBeLessThan(4.15 * IN_RATE);
		for (const w of windows) {
			expect(w.segmentStart % 320).toBe(0);
			expect(w.windowStart).toBe(w.segmentStart - 4000);
			expect(w.windowEnd).toBeGreaterThanOrEqual(w.segmentEnd + 4000);
			expect((w.windowEnd - w.windowStart) % 160).toBe(0);
			// Bounded memory: no window is longer than target + search + 2 x context (+ one frame at the end).
			expect(w.samples.length).toBeLessThanOrEqual(32000 + 8000 + 8000 + 160);
		}
		expect(windows.at(-1)?.final).toBe(true);
		expect(windows.at(-1)?.segmentEnd).toBe(signal.length);
	});

	it("lengthens windows to a multiple, with real audio on the right, and output unchanged", async () => {
		const signal = testSignal(10.3717);
		const windows: ChunkWindow[] = [];
		const multiple = plan({ windowMultipleSeconds: 1 });
		expect(multiple.windowMultiple).toBe(IN_RATE);
		const output = await collect(
			convertInChunks(streamed(signal), multiple, async (w) => {
				windows.push(w);
				return resampleWindow(w);
			}),
		);
		expect(output.length).toBe(Math.round(signal.length * RATIO));
		for (const w of windows) {
			expect((w.windowEnd - w.windowStart) % IN_RATE).toBe(0);
			expect(w.windowEnd).toBeGreaterThanOrEqual(w.segmentEnd + 4000);
			expect(w.windowEnd - (w.segmentEnd + 4000)).toBeLessThan(IN_RATE);
			// The lengthening is the stream itself, not padding, up to its end.
			for (let p = w.segmentEnd; p < Math.min(w.windowEnd, signal.length); p += 97)
				expect(w.samples[p - w.windowStart]).toBe(signal[p]);
		}
		let worst = 0;
		for (let k = 0; k < output.length - 3; k++)
			worst = Math.max(worst, Math.abs((output[k] as number) - interpolate(signal, k / RATIO)));
		expect(worst).toBeLessThan(1e-6);
		expect(() => validateChunkPlan({ ...multiple, windowMultiple: 200 })).toThrow(/multiple of the hop/);
	});

	it("crossfades pieces that disagree, so joins have no clicks", async () => {
		const frequency = 300;
		const amplitude = 0.5;
		// Each piece is a sine with its own random phase: a hard cut would jump by up to 2 x amplitude.
		let seed = 5;
		const phaseShifted = (crossfadeSeconds: number) =>
			collect(
				convertInChunks(streamed(testSignal(12)), plan({ crossfadeSeconds }), async (w) => {
					seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
					const phase = (seed / 2 ** 32) * 2 * Math.PI;
					return Float32Array.from(
						{ length: w.samples.length * RATIO },
						(_, k) => amplitude * Math.sin((2 * Math.PI * frequency * k) / OUT_RATE + phase),
					);
				}),
			);
		const maxJump = (x: Float32Array) => x.slice(1).reduce((m, v, i) => Math.max(m, Math.abs(v - (x[i] as number))), 0);
		const smoothest = amplitude * 2 * Math.sin((Math.PI * frequency) / OUT_RATE);
		const joined = await phaseShifted(0.02);
		expect(joined.length).toBe(12 * OUT_RATE);
		expect(maxJump(joined)).toBeLessThan(smoothest * 1.3);
		// The same pieces butted together do click, so the bound above is not trivially met.
		expect(maxJump(await phaseShifted(0))).toBeGreaterThan(smoothest * 3);
	});

	it("keeps a sustained tone's level through joins of pieces whose phases disagree", async () => {
		// Each piece carries the same note with a phase of its own, as RVC's NSF source does per window; a crossfade
		// of two out-of-phase copies alone cancels them. 5 ms RMS frames around every join against the steady level.
		const frequency = 220;
		const amplitude = 0.5;
		const phases = [0, Math.PI, 0.5 * Math.PI, 1.7 * Math.PI, 0.9 * Math.PI, 0.2 * Math.PI, 1.2 * Math.PI];
		const cuts: number[] = [];
		const joined = await collect(
			convertInChunks(streamed(testSignal(12)), plan({ crossfadeSeconds: 0.04 }), async (w) => {
				if (w.index > 0) cuts.push(w.segmentStart * RATIO);
				const phase = phases[w.index % phases.length] as number;
				return Float32Array.from(
					{ length: w.samples.length * RATIO },
					(_, k) => amplitude * Math.sin((2 * Math.PI * frequency * (w.windowStart * RATIO + k)) / OUT_RATE + phase),
				);
			}),
		);
		expect(joined.length).toBe(12 * OUT_RATE);
		expect(cuts.length).toBeGreaterThanOrEqual(4);
		const frame = 0.005 * OUT_RATE;
		const rms = (from: number) =>
			Math.sqrt(joined.subarray(from, from + frame).reduce((sum, v) => sum + v * v, 0) / frame);
		const steady = amplitude / Math.SQRT2;
		for (const cut of cuts) {
			for (let at = cut - 0.03 * OUT_RATE; at < cut + 0.03 * OUT_RATE; at += frame) {
				expect(20 * Math.log10(rms(at) / steady), `${at / OUT_RATE} s, join at ${cut / OUT_RATE} s`).toBeGreaterThan(
					-0.5,
				);
			}
		}
	});

	it("leaves pieces that agree where they are: the whole-signal result, sample for sample", async () => {
		const signal = testSignal(12);
		const joined = await collect(convertInChunks(streamed(signal), plan({ crossfadeSeconds: 0.04 }), resampleWindow));
		const whole = await resampleWindow({ samples: signal } as ChunkWindow);
		expect(joined.length).toBe(12 * OUT_RATE);
		let worst = 0;
		for (let k = 0; k < joined.length - RATIO; k++)
			worst = Math.max(worst, Math.abs((joined[k] as number) - (whole[k] as number)));
		expect(worst).toBeLessThan(1e-6);
	});

	it("streams: the first output comes before the input is used up", async () => {
		const counter = { taken: 0, done: false };
		const blocks = convertInChunks(streamed(testSignal(20), counter), plan(), resampleWindow);
		const first = await blocks[Symbol.asyncIterator]().next();
		expect(first.done).toBe(false);
		expect(counter.done).toBe(false);
		expect(counter.taken * 2000).toBeLessThan(20 * IN_RATE * 0.25);
	});

	it("handles input shorter than a frame or the context, and no input at all", async () => {
		for (const samples of [1, 100, 800, 3999]) {
			const signal = testSignal(samples / IN_RATE);
			const output = await collect(convertInChunks(streamed(signal), plan(), resampleWindow));
			expect(output.length).toBe(Math.round(samples * RATIO));
			expect(output[0]).toBeCloseTo(signal[0] as number, 6);
		}
		expect((await collect(convertInChunks(streamed(new Float32Array(0)), plan(), resampleWindow))).length).toBe(0);
	});

	it("stops when aborted", async () => {
		const controller = new AbortController();
		const blocks = convertInChunks(
			streamed(testSignal(10)),
			plan(),
			async (w) => {
				controller.abort(new Error("job cancelled"));
				return resampleWindow(w);
			},
			controller.signal,
		);
		await expect(collect(blocks)).rejects.toThrow("job cancelled");
	});

	it("rejects inconsistent settings with the reasons", () => {
		expect(() => plan({ searchSeconds: 3 })).toThrow(/search radius/);
		expect(() => plan({ contextSeconds: 0.001, crossfadeSeconds: 0.1 })).toThrow(
			/context must be at least one frame.*crossfade must fit/,
		);
		expect(() => plan({ outputRate: 22050 })).toThrow(/whole output samples/);
		expect(() => plan({ cutStep: 240 })).toThrow(/cut step must be a multiple of the hop/);
	});

	it("fails clearly when a converter returns too little audio", async () => {
		const blocks = convertInChunks(streamed(testSignal(3)), plan(), async (w) => new Float32Array(w.samples.length));
		await expect(collect(blocks)).rejects.toThrow(/returned \d+ samples for a window that needs \d+/);
	});
});
