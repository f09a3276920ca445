/**
 * RVC's input high-pass (`signal.butter(N=5, Wn=48, btype="high", fs=16000)` in `pipeline.py`) as a streaming
 * filter: a 5th-order Butterworth from the bilinear transform with a pre-warped cutoff, run as two biquads and
 * one first-order section. RVC applies it forwards and backwards (`filtfilt`, zero phase), which needs the
 * whole signal; here it runs once, forwards, so it streams. The magnitude is then |H| instead of |H|^2 and
 * low frequencies get a small phase lag; speech above ~100 Hz is untouched either way.
 *
 * Like filtfilt, whose pass starts at `lfilter_zi` times the first value, the filter starts in the steady state
 * of the stream's first sample (for a high-pass: the first section's inputs held at it, every output 0), so a DC
 * offset, or a source that begins on a held non-zero value, is removed without the step response's thump (the
 * offset itself at once, ringing out over about 30 ms) that a filter starting from rest adds.
 */

interface Section {
	b0: number;
	b1: number;
	b2: number;
	a1: number;
	a2: number;
	x1: number;
	x2: number;
	y1: number;
	y2: number;
}

export class ButterworthHighPass {
	readonly #sections: Section[] = [];
	#started = false;

	constructor(cutoffHz: number, sampleRate: number, order = 5) {
		if (!(cutoffHz > 0 && cutoffHz < sampleRate / 2))
			throw new RangeError(`cutoff ${cutoffHz} Hz must be between 0 and ${sampleRate / 2} Hz`);
		const k = Math.tan((Math.PI * cutoffHz) / sampleRate);
		const state = { x1: 0, x2: 0, y1: 0, y2: 0 };
		// Conjugate pole pairs of the analog Butterworth prototype sit at angles pi (order - 2i + 1) / (2 order)
		// from the negative real axis, i = 1 .. order/2; a pair at angle a is a section with Q = 1 / (2 cos a).
		for (let i = 1; i <= Math.floor(order / 2); i++) {
			const q = 1 / (2 * Math.cos((Math.PI * (order - 2 * i + 1)) / (2 * order)));
			const norm = 1 / (1 + k / q + k * k);
			this.#sections.push({
				b0: norm,
				b1: -2 * norm,
				b2: norm,
				a1: 2 * (k * k - 1) * norm,
				a2: (1 - k / q + k * k) * norm,
				...state,
			});
		}
		if (order % 2 === 1) {
			const norm = 1 / (1 + k);
			this.#sections.push({
				b0: norm,
				b1: -norm,
				b2: 0,
				a1: (k - 1) * norm,
				a2: 0,
				...state,
			});
		}
	}

	/** Filters the next block of the stream (state carries over between calls); returns a new array. */
	process(block: Float32Array): Float32Array {
		const out = Float32Array.from(block);
		const first = this.#sections[0];
		if (!this.#started && out.length > 0 && first !== undefined) {
			// The steady state for a constant first sample: b0 + b1 + b2 = 0, so the first section gives 0 and the
			// sections after it rest.
			first.x1 = out[0] as number;
			first.x2 = out[0] as number;
			this.#started = true;
		}
		for (const s of this.#sections) {
			for (let n = 0; n < out.length; n++) {
				const x = out[n] as number;
				const y = s.b0 * x + s.b1 * s.x1 + s.b2 * s.x2 - s.a1 * s.y1 - s.a2 * s.y2;
				s.x2 = s.x1;
				s.x1 = x;
				s.y2 = s.y1;
				s.y1 = y;
				out[n] = y;
			}
		}
		return out;
	}
}
