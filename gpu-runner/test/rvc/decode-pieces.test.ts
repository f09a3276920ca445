/**
 * The layout of a decoded span in pieces keeps the conditions under which every kept frame comes out as decoding
 * the whole span gives it (`decode-pieces.ts`), for every span and piece count; the samples are put back in order.
 */
import { describe, expect, it } from "vitest";
import { decodedFrames, decodeLayout, joinPieces, splitLayout } from "../../src/engines/rvc/decode-pieces.ts";

const MARGIN = 16;

describe("decodeLayout", () => {
	it("cuts each piece a margin beyond what it keeps, or at the span's own ends", () => {
		for (const start of [0, 7, 100])
			for (let frames = 1; frames <= 700; frames += 3)
				for (const pieces of [1, 2, 3, 4, 8]) {
					const layout = decodeLayout({ start, frames }, pieces, MARGIN);
					const end = start + frames;
					const count = layout.starts.length;
					expect(count).toBeGreaterThanOrEqual(1);
					expect(count).toBeLessThanOrEqual(pieces);
					if (count > 1) expect(layout.length).toBeGreaterThanOrEqual(4 * MARGIN);
					expect(layout.keepFrom[0]).toBe(start);
					layout.starts.forEach((a, k) => {
						const b = a + layout.length;
						const c = layout.keepFrom[k] as number;
						const d = layout.keepFrom[k + 1] ?? end;
						expect(a).toBeGreaterThanOrEqual(start);
						expect(b).toBeLessThanOrEqual(end);
						expect(d).toBeGreaterThan(c);
						expect(c >= a && d <= b).toBe(true);
						expect(a === start || c - a >= MARGIN).toBe(true);
						expect(b === end || b - d >= MARGIN).toBe(true);
					});
				}
	});

	it("asks for one piece when the span is too short to be worth cutting", () => {
		expect(decodeLayout({ start: 5, frames: 100 }, 2, MARGIN).starts).toEqual([5]);
		expect(decodeLayout({ start: 5, frames: 128 }, 2, MARGIN).starts).toHaveLength(2);
		// A count that is not a whole number of pieces: rounded down, or one piece.
		expect(decodeLayout({ start: 5, frames: 500 }, 2.7, MARGIN).starts).toHaveLength(2);
		for (const odd of [0, -3, Number.NaN, Number.POSITIVE_INFINITY])
			expect(decodeLayout({ start: 5, frames: 500 }, odd, MARGIN).starts).toEqual([5]);
		expect(decodeLayout({ start: 5, frames: 500 }, 1, MARGIN)).toEqual({
			start: 5,
			frames: 500,
			starts: [5],
			length: 500,
			keepFrom: [5],
		});
	});

	it("puts the pieces' kept samples back in the span's order", () => {
		const hop = 3;
		const layout = decodeLayout({ start: 10, frames: 300 }, 3, MARGIN);
		expect(decodedFrames(layout)).toBe(3 * layout.length);
		// Each piece's samples hold their frame number, as a decoder would place them.
		const audio = new Float32Array(decodedFrames(layout) * hop);
		layout.starts.forEach((a, k) => {
			for (let f = 0; f < layout.length; f++)
				audio.fill(a + f, (k * layout.length + f) * hop, (k * layout.length + f + 1) * hop);
		});
		const joined = joinPieces(layout, audio, hop);
		expect(joined.length).toBe(300 * hop);
		expect(Array.from(joined, (_, i) => joined[i] === 10 + Math.floor(i / hop)).every(Boolean)).toBe(true);
	});

	it("splits the pieces into runs whose samples, one after the other, are the span's", () => {
		const hop = 2;
		for (const [frames, pieces, runs] of [
			[300, 2, 2],
			[300, 4, 2],
			[500, 6, 3],
			[500, 3, 2],
			[100, 2, 2], // too short to cut: one run
		] as const) {
			const layout = decodeLayout({ start: 10, frames }, pieces, MARGIN);
			const split = splitLayout(layout, runs);
			expect(split).toHaveLength(Math.min(runs, layout.starts.length));
			expect(split.flatMap((run) => run.starts)).toEqual(layout.starts);
			expect(split.reduce((n, run) => n + decodedFrames(run), 0)).toBe(decodedFrames(layout));
			// Each run decoded on its own: pieces hold their frame numbers, as a decoder would place them.
			const joined = split.flatMap((run) => {
				const audio = new Float32Array(decodedFrames(run) * hop);
				run.starts.forEach((a, k) => {
					for (let f = 0; f < run.length; f++)
						audio.fill(a + f, (k * run.length + f) * hop, (k * run.length + f + 1) * hop);
				});
				const out = joinPieces(run, audio, hop);
				expect(out.length).toBe(run.frames * hop);
				return Array.from(out);
			});
			expect(joined).toHaveLength(frames * hop);
			expect(joined.every((v, i) => v === 10 + Math.floor(i / hop))).toBe(true);
		}
		const one = decodeLayout({ start: 0, frames: 300 }, 2, MARGIN);
		for (const odd of [1, 0, Number.NaN]) expect(splitLayout(one, odd)).toEqual([one]);
	});
});
