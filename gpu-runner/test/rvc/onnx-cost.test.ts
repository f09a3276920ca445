/**
 * The arithmetic of `onnx-cost.ts`: the longest window the engine gives a synthesizer (the chunker driven at the
 * largest settings a voice may have), and a cost carried out from two runs to it.
 */
import { describe, expect, it } from "vitest";
import { convertInChunks, makeChunkPlan } from "../../src/engines/rvc/chunker.ts";
import { costAt, costVerdict } from "../../src/engines/rvc/onnx-cost.ts";
import { GPU_WINDOW_MULTIPLE_SECONDS, longestSynthesizerFrames } from "../../src/engines/rvc/windows.ts";

/** The longest window, in frames, `convertInChunks` gives a stream of `length` samples under `plan`. */
async function longestWindow(plan: ReturnType<typeof makeChunkPlan>, length: number): Promise<number> {
	let longest = 0;
	async function* input() {
		yield new Float32Array(length);
	}
	for await (const _ of convertInChunks(input(), plan, async (window) => {
		longest = Math.max(longest, window.samples.length / 160);
		return new Float32Array(window.samples.length);
	}));
	return longest;
}

describe("the engine's longest synthesizer window", () => {
	for (const provider of ["cpu", "cuda"] as const) {
		it(`on ${provider} is what the chunker gives the last window under the largest settings`, async () => {
			// The largest a voice may set: context 10 s; chunk 20 s on the CPU (its cap), 120 s on CUDA; the search
			// under the chunk by one cut step on the CPU, 30 s on CUDA.
			const cuda = provider === "cuda";
			const plan = makeChunkPlan({
				inputRate: 16_000,
				outputRate: 16_000,
				hop: 160,
				cutStep: 320,
				chunkSeconds: cuda ? 120 : 20,
				searchSeconds: cuda ? 30 : 19.98,
				contextSeconds: 10,
				crossfadeSeconds: 0,
				...(cuda ? { windowMultipleSeconds: GPU_WINDOW_MULTIPLE_SECONDS } : {}),
			});
			const rest = plan.targetSamples + plan.searchSamples + plan.contextSamples + plan.windowMultiple - plan.hop;
			let longest = 0;
			// Streams around the longest rest that is not cut again (one longer is cut, and its windows are shorter).
			for (const length of [rest - plan.hop, rest, rest + plan.hop])
				longest = Math.max(longest, await longestWindow(plan, length));
			expect(longest).toBe(longestSynthesizerFrames(provider));
		});
	}
	it("is 6 998 frames on the CPU and 18 400 on CUDA", () => {
		expect([longestSynthesizerFrames("cpu"), longestSynthesizerFrames("cuda")]).toEqual([6998, 18_400]);
	});
});

describe("a cost carried out to a longer window", () => {
	const points = (a: number, b: number) =>
		[125, 500].map((frames) => ({ frames, cpuSeconds: a * frames + b * frames ** 2, peakBytes: a * frames }));

	it("fits a x frames + b x frames^2 through two runs, time's rise per frame beyond noise only", () => {
		expect(costAt(points(0.01, 1e-6), "cpuSeconds", 18_400)).toBeGreaterThan(0.01 * 18_400);
		const exact = [125, 500].map((frames) => ({ frames, cpuSeconds: 0, peakBytes: 3 * frames + 0.5 * frames ** 2 }));
		expect(costAt(exact, "peakBytes", 18_400)).toBeCloseTo(3 * 18_400 + 0.5 * 18_400 ** 2, 3);
		// A fifth more CPU time per frame on the longer run (a busy machine) is carried out linearly, not as a square.
		const noisy = [
			{ frames: 125, cpuSeconds: 1.9, peakBytes: 0 },
			{ frames: 500, cpuSeconds: 1.2 * 4 * 1.9, peakBytes: 0 },
		];
		expect(costAt(noisy, "cpuSeconds", 18_400)).toBeCloseTo((1.2 * 4 * 1.9 * 18_400) / 500, 6);
		// A cost that grows slower than the frames is carried out linearly from the longer run; never negative.
		const sublinear = [
			{ frames: 125, cpuSeconds: 2, peakBytes: 0 },
			{ frames: 500, cpuSeconds: 4, peakBytes: 0 },
		];
		expect(costAt(sublinear, "cpuSeconds", 1000)).toBeCloseTo(8, 9);
		expect(costAt(sublinear, "peakBytes", 1000)).toBe(0);
	});

	it("refuses a candidate past the limit at any window, naming the measure, and passes one within it", () => {
		const reference = points(0.01, 1e-7);
		expect(costVerdict(points(0.012, 1e-7), reference, { CPU: 6998 }).refused).toBeUndefined();
		const refused = costVerdict(points(0.01, 1e-4), reference, { CPU: 6998 }).refused;
		expect(refused?.problem).toBe("too_large");
		expect(refused?.message).toMatch(/^the synthesizer's run time grows faster .* CPU window \(6998 frames\)/);
	});

	it("names the measure and window furthest past its limit, whichever is found first", () => {
		const reference = points(0.01, 1e-7);
		// Run time a little past its limit of 4 at the CPU window, memory far past its 8: the memory is named.
		const candidate = reference.map((p) => ({ ...p, cpuSeconds: p.cpuSeconds * 4.5, peakBytes: p.frames * 2 ** 20 }));
		const { refused, ratios } = costVerdict(candidate, reference, { CPU: 6998 });
		expect(ratios.cpuSeconds_CPU).toBeGreaterThan(4);
		expect(refused?.message).toMatch(/^the synthesizer's memory grows faster .* \(at most 8 times\)$/);
		// A quadratic term grows with the window: the longer one is the one furthest past.
		const quadratic = costVerdict(points(0.01, 1e-4), reference, { CPU: 6998, CUDA: 18_400 }).refused;
		expect(quadratic?.message).toMatch(/^the synthesizer's run time grows faster .* CUDA window \(18400 frames\)/);
	});
});
