/** In-place iterative radix-2 complex FFT on split real/imaginary arrays whose length is a power of two. */
export class Fft {
	readonly size: number;
	readonly #cos: Float64Array;
	readonly #sin: Float64Array;
	readonly #bitReversed: Uint32Array;

	constructor(size: number) {
		if (size < 2 || (size & (size - 1)) !== 0) throw new RangeError(`FFT size must be a power of two, got ${size}`);
		this.size = size;
		this.#cos = new Float64Array(size / 2);
		this.#sin = new Float64Array(size / 2);
		for (let k = 0; k < size / 2; k++) {
			this.#cos[k] = Math.cos((2 * Math.PI * k) / size);
			this.#sin[k] = -Math.sin((2 * Math.PI * k) / size);
		}
		const bits = Math.log2(size);
		this.#bitReversed = new Uint32Array(size);
		for (let i = 0; i < size; i++) {
			let r = 0;
			for (let b = 0; b < bits; b++) r |= ((i >> b) & 1) << (bits - 1 - b);
			this.#bitReversed[i] = r;
		}
	}

	/** Forward transform, X[k] = sum_n x[n] e^(-2 pi i k n / N), in place. */
	transform(re: Float64Array, im: Float64Array): void {
		const n = this.size;
		for (let i = 0; i < n; i++) {
			const j = this.#bitReversed[i] as number;
			if (j > i) {
				const tr = re[i] as number;
				re[i] = re[j] as number;
				re[j] = tr;
				const ti = im[i] as number;
				im[i] = im[j] as number;
				im[j] = ti;
			}
		}
		for (let half = 1; half < n; half *= 2) {
			const step = n / (2 * half);
			for (let start = 0; start < n; start += 2 * half) {
				for (let k = 0; k < half; k++) {
					const wr = this.#cos[k * step] as number;
					const wi = this.#sin[k * step] as number;
					const a = start + k;
					const b = a + half;
					const br = re[b] as number;
					const bi = im[b] as number;
					const tr = br * wr - bi * wi;
					const ti = br * wi + bi * wr;
					re[b] = (re[a] as number) - tr;
					im[b] = (im[a] as number) - ti;
					re[a] = (re[a] as number) + tr;
					im[a] = (im[a] as number) + ti;
				}
			}
		}
	}
}

/** torch.hann_window(n) with its default `periodic=True`: 0.5 - 0.5 cos(2 pi i / n). */
export function periodicHann(n: number): Float64Array {
	const w = new Float64Array(n);
	for (let i = 0; i < n; i++) w[i] = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / n);
	return w;
}
