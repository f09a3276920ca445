/**
 * How the synthesizer decodes a span of a window's frames in several equal pieces (`decodeSpan` graphs take
 * one start per piece and one length), and how the pieces' samples are put back together.
 *
 * Why: onnxruntime's CPU provider convolves in its blocked NCHWc layout and divides a convolution's work among
 * its threads by output rows and sets of 64 output channels. The decoder's tensors are one row (`[1, C, 1, T]`),
 * so its layers of 64 channels and fewer (the last two upsampling stages of the 40 kHz config, 30 % of its
 * arithmetic) ran on one thread whatever the session's thread count. Pieces are rows: two pieces keep two
 * threads busy there. Each interior cut costs the decoder's margin either side.
 *
 * Exactness: a kept sample is computed from the frames within the decoder's receptive radius of it. A piece
 * `[a, b)` gives its kept frames `[c, d)` exactly as decoding the whole span `[s, e)` does when, at each side,
 * the piece either reaches as far as the span (`a = s`, `b = e`) or reaches `margin` frames past the kept part
 * (`c - a >= margin`, `b - d >= margin`), with `margin` at least the radius. The layout below keeps that, so the
 * stitched samples are the span's to the bit (`test/rvc/synthesizer-decode.test.ts`).
 */

/** Pieces shorter than this many margins are not worth their cuts: the span is decoded in fewer pieces. */
const MIN_PIECE_MARGINS = 4;

export interface DecodeLayout {
	/** The span of the window's frames whose samples the caller wants. */
	start: number;
	frames: number;
	/** First frame of each piece (ascending), all `length` frames long, within the span. */
	starts: number[];
	length: number;
	/** Where each piece's kept frames begin; piece k keeps `[keepFrom[k], keepFrom[k + 1])`, the last to the span's end. */
	keepFrom: number[];
}

/**
 * The span `[start, start + frames)` in up to `pieces` pieces, each cut `margin` frames beyond what it keeps.
 * One piece (the span itself) where more are not asked for (`pieces` below 2, or not a number) or would be shorter
 * than `MIN_PIECE_MARGINS` margins; a fractional count is rounded down.
 */
export function decodeLayout(span: { start: number; frames: number }, pieces: number, margin: number): DecodeLayout {
	const { start, frames } = span;
	const end = start + frames;
	const wanted = Number.isFinite(pieces) ? Math.floor(pieces) : 1;
	const count = Math.max(1, Math.min(wanted, Math.floor(frames / (MIN_PIECE_MARGINS * margin))));
	if (count === 1) return { start, frames, starts: [start], length: frames, keepFrom: [start] };
	const share = Math.ceil(frames / count);
	// The first and last pieces reach the span's ends on one side; interior ones need the margin on both.
	const length = Math.min(frames, share + (count > 2 ? 2 * margin : margin));
	const keepFrom = Array.from({ length: count }, (_, k) => start + k * share);
	const starts = keepFrom.map((keep) => Math.min(Math.max(keep - margin, start), end - length));
	return { start, frames, starts, length, keepFrom };
}

/** Frames the decoder runs on for a layout (the span's plus the pieces' overlaps). */
export function decodedFrames(layout: DecodeLayout): number {
	return layout.starts.length * layout.length;
}

/**
 * The span's samples from the pieces' (`audio`: each piece's `length x samplesPerFrame` samples one after the
 * other), each piece giving its kept frames.
 */
export function joinPieces(layout: DecodeLayout, audio: Float32Array, samplesPerFrame: number): Float32Array {
	if (layout.starts.length === 1 && layout.starts[0] === layout.start && layout.length === layout.frames) return audio;
	const out = new Float32Array(layout.frames * samplesPerFrame);
	const end = layout.start + layout.frames;
	layout.starts.forEach((pieceStart, k) => {
		const from = layout.keepFrom[k] as number;
		const to = layout.keepFrom[k + 1] ?? end;
		const offset = (k * layout.length + (from - pieceStart)) * samplesPerFrame;
		out.set(audio.subarray(offset, offset + (to - from) * samplesPerFrame), (from - layout.start) * samplesPerFrame);
	});
	return out;
}

/**
 * The layout's pieces in up to `groups` runs of consecutive pieces, each a layout of its own over the frames its
 * pieces keep, in the span's order: one run per synthesizer session when idle model threads decode parts of a
 * job's span beside its own (`rvc-engine.ts`). Their samples, one after the other, are the span's, and each
 * piece keeps what it kept in the whole layout, so the samples are the same.
 */
export function splitLayout(layout: DecodeLayout, groups: number): DecodeLayout[] {
	const count = layout.starts.length;
	const runs = Math.max(1, Math.min(count, Number.isFinite(groups) ? Math.floor(groups) : 1));
	if (runs === 1) return [layout];
	const end = layout.start + layout.frames;
	return Array.from({ length: runs }, (_, g) => {
		const first = Math.floor((g * count) / runs);
		const next = Math.floor(((g + 1) * count) / runs);
		const start = layout.keepFrom[first] as number;
		const stop = layout.keepFrom[next] ?? end;
		return {
			start,
			frames: stop - start,
			starts: layout.starts.slice(first, next),
			length: layout.length,
			keepFrom: layout.keepFrom.slice(first, next),
		};
	});
}
