/** Reads the WAVs the service produces (16/24/32-bit PCM or 32-bit float) and measures them for assertions. */

export interface DecodedWav {
	sampleRate: number;
	channels: number;
	durationSeconds: number;
	/** The first channel, as floats in [-1, 1]. */
	samples: Float32Array;
}

export function readWav(bytes: Uint8Array): DecodedWav {
	const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
	const ascii = (at: number) => String.fromCharCode(...bytes.subarray(at, at + 4));
	if (ascii(0) !== "RIFF" || ascii(8) !== "WAVE") throw new Error("not a RIFF/WAVE file");
	let format = 0;
	let channels = 0;
	let sampleRate = 0;
	let bits = 0;
	for (let offset = 12; offset + 8 <= bytes.length; ) {
		const id = ascii(offset);
		const size = view.getUint32(offset + 4, true);
		const body = offset + 8;
		if (id === "fmt ") {
			format = view.getUint16(body, true);
			channels = view.getUint16(body + 2, true);
			sampleRate = view.getUint32(body + 4, true);
			bits = view.getUint16(body + 14, true);
			if (format === 0xfffe) format = view.getUint16(body + 24, true);
		}
		if (id === "data") {
			const bytesPerSample = bits / 8;
			const frames = Math.floor(Math.min(size, bytes.length - body) / (bytesPerSample * channels));
			const samples = new Float32Array(frames);
			for (let i = 0; i < frames; i++) {
				const at = body + i * channels * bytesPerSample;
				if (format === 3) samples[i] = view.getFloat32(at, true);
				else if (bits === 16) samples[i] = view.getInt16(at, true) / 32768;
				else if (bits === 24) samples[i] = ((view.getUint8(at + 2) << 24) | (view.getUint16(at, true) << 8)) / 2 ** 31;
				else if (bits === 32) samples[i] = view.getInt32(at, true) / 2 ** 31;
				else throw new Error(`unsupported WAV: format ${format}, ${bits} bits`);
			}
			return { sampleRate, channels, durationSeconds: size / (sampleRate * channels * bytesPerSample), samples };
		}
		offset = body + size + (size % 2);
	}
	throw new Error("WAV has no data chunk");
}

/**
 * Fundamental frequency of a steady tone by normalised autocorrelation over a window from the middle of the signal,
 * searched between 50 and 1000 Hz, with parabolic interpolation around the best lag.
 */
export function estimatePitchHz(samples: Float32Array, sampleRate: number): number {
	const size = Math.min(8192, samples.length);
	const start = Math.floor((samples.length - size) / 2);
	const x = samples.subarray(start, start + size);
	const correlation = (lag: number) => {
		let sum = 0;
		let energy = 0;
		for (let i = 0; i + lag < x.length; i++) {
			sum += (x[i] as number) * (x[i + lag] as number);
			energy += (x[i] as number) ** 2 + (x[i + lag] as number) ** 2;
		}
		return energy > 0 ? (2 * sum) / energy : 0;
	};
	const minLag = Math.floor(sampleRate / 1000);
	const maxLag = Math.ceil(sampleRate / 50);
	let bestLag = minLag;
	let best = Number.NEGATIVE_INFINITY;
	// The first strong peak is the period; later peaks are its multiples.
	for (let lag = minLag; lag <= maxLag; lag++) {
		const value = correlation(lag);
		if (value > best) {
			best = value;
			bestLag = lag;
		}
		if (best > 0.9 && value < best - 0.2) break;
	}
	const [a, b, c] = [correlation(bestLag - 1), best, correlation(bestLag + 1)];
	const shift = (a - c) / (2 * (a - 2 * b + c)) || 0;
	return sampleRate / (bestLag + shift);
}
