/** Seedable standard-normal noise for the synthesizer's `rnd` input (mulberry32 + Box-Muller). */
export class NormalNoise {
	#state: number;
	#spare: number | undefined;

	constructor(seed: number) {
		this.#state = seed >>> 0;
	}

	#uniform(): number {
		this.#state = (this.#state + 0x6d2b79f5) >>> 0;
		let t = this.#state;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return (((t ^ (t >>> 14)) >>> 0) + 0.5) / 4294967296;
	}

	next(): number {
		if (this.#spare !== undefined) {
			const value = this.#spare;
			this.#spare = undefined;
			return value;
		}
		const radius = Math.sqrt(-2 * Math.log(this.#uniform()));
		const angle = 2 * Math.PI * this.#uniform();
		this.#spare = radius * Math.sin(angle);
		return radius * Math.cos(angle);
	}

	/** `length` values of N(0, scale^2). */
	fill(length: number, scale: number): Float32Array {
		const out = new Float32Array(length);
		for (let i = 0; i < length; i++) out[i] = this.next() * scale;
		return out;
	}
}
