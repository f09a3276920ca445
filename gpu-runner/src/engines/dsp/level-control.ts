/**
 * Level stages after the pitch shifter. A phase vocoder does not keep loudness exactly (measured up to ±3 dB
 * at ±12 semitones on a harmonic tone), so `LoudnessMatcher` follows the short-term energy of the source,
 * aligned sample for sample with the output, and steers the output gain towards it. `PeakLimiter` then keeps
 * the result below full scale (a pitch shift can raise peaks even at equal loudness).
 */

/** Energies of input frames waiting for their output frames (which come `latency` frames later). */
class EnergyFifo {
	#chunks: Float32Array[] = [];
	#offset = 0;

	push(energies: Float32Array): void {
		this.#chunks.push(energies);
	}

	/** Sum of the next `frames` energies (missing ones count as silence). */
	popSum(frames: number): number {
		let sum = 0;
		let left = frames;
		while (left > 0 && this.#chunks.length > 0) {
			const head = this.#chunks[0] as Float32Array;
			const take = Math.min(left, head.length - this.#offset);
			for (let i = this.#offset; i < this.#offset + take; i++) sum += head[i] as number;
			this.#offset += take;
			left -= take;
			if (this.#offset === head.length) {
				this.#chunks.shift();
				this.#offset = 0;
			}
		}
		return sum;
	}
}

function frameEnergies(channels: Float32Array[], frames: number): Float32Array {
	const out = new Float32Array(frames);
	for (const channel of channels) {
		for (let i = 0; i < frames; i++) out[i] = (out[i] as number) + (channel[i] as number) ** 2;
	}
	return out;
}

export class LoudnessMatcher {
	#pending = new EnergyFifo();
	#sourceEnergy = 0;
	#outputEnergy = 0;
	#gain = 1;
	#framesPerTau: number;

	/** `tauSeconds`: how fast the gain follows; long enough to average over a few pitch periods and syllables. */
	constructor(sampleRate: number, tauSeconds = 0.4) {
		this.#framesPerTau = sampleRate * tauSeconds;
	}

	/** Record source frames as they enter the shifter. */
	observeSource(channels: Float32Array[], frames: number): void {
		this.#pending.push(frameEnergies(channels, frames));
	}

	/** Scale output frames (in place) that correspond, in order, to the source frames observed. */
	apply(channels: Float32Array[], frames: number): void {
		if (frames === 0) return;
		const decay = Math.exp(-frames / this.#framesPerTau);
		this.#sourceEnergy = this.#sourceEnergy * decay + this.#pending.popSum(frames);
		const outputEnergy = frameEnergies(channels, frames).reduce((a, b) => a + b, 0);
		this.#outputEnergy = this.#outputEnergy * decay + outputEnergy;
		let target = this.#gain;
		// Only steer while there is signal on both sides; in silence keep the last gain.
		if (this.#sourceEnergy > 1e-9 * this.#framesPerTau && this.#outputEnergy > 1e-9 * this.#framesPerTau) {
			target = Math.min(4, Math.max(0.25, Math.sqrt(this.#sourceEnergy / this.#outputEnergy)));
		}
		rampGain(channels, frames, this.#gain, target);
		this.#gain = target;
	}
}

export class PeakLimiter {
	#gain = 1;
	#release: number;
	#ceiling: number;

	constructor(sampleRate: number, ceiling = 0.98, releaseSeconds = 0.1) {
		this.#ceiling = ceiling;
		this.#release = 1 - Math.exp(-1 / (sampleRate * releaseSeconds));
	}

	/** Limit in place; block-wise attack, smooth release, and a final clamp so nothing can exceed ±1. */
	apply(channels: Float32Array[], frames: number): void {
		let peak = 0;
		for (const channel of channels) {
			for (let i = 0; i < frames; i++) peak = Math.max(peak, Math.abs(channel[i] as number));
		}
		const needed = peak > 0 ? Math.min(1, this.#ceiling / peak) : 1;
		const released = this.#gain + (1 - this.#gain) * (1 - (1 - this.#release) ** frames);
		const target = Math.min(needed, released);
		rampGain(channels, frames, Math.min(this.#gain, target), target);
		this.#gain = target;
		for (const channel of channels) {
			for (let i = 0; i < frames; i++) channel[i] = Math.max(-1, Math.min(1, channel[i] as number));
		}
	}
}

function rampGain(channels: Float32Array[], frames: number, from: number, to: number): void {
	if (from === 1 && to === 1) return;
	const step = (to - from) / frames;
	for (const channel of channels) {
		for (let i = 0; i < frames; i++) channel[i] = (channel[i] as number) * (from + step * (i + 1));
	}
}

/** First-order high shelf around `cornerHz`: `gainDb` above it, unity below ("brightness"). */
export class BrightnessShelf {
	#amount: number;
	#coefficient: number;
	#previousInput: number[];
	#previousHighPass: number[];

	constructor(sampleRate: number, channels: number, gainDb: number, cornerHz = 2000) {
		this.#amount = 10 ** (gainDb / 20) - 1;
		const rc = 1 / (2 * Math.PI * cornerHz);
		this.#coefficient = rc / (rc + 1 / sampleRate);
		this.#previousInput = new Array(channels).fill(0);
		this.#previousHighPass = new Array(channels).fill(0);
	}

	apply(channels: Float32Array[], frames: number): void {
		if (this.#amount === 0) return;
		channels.forEach((channel, c) => {
			let x1 = this.#previousInput[c] as number;
			let y1 = this.#previousHighPass[c] as number;
			for (let i = 0; i < frames; i++) {
				const x = channel[i] as number;
				y1 = this.#coefficient * (y1 + x - x1); // one-pole high-pass
				x1 = x;
				channel[i] = x + this.#amount * y1;
			}
			this.#previousInput[c] = x1;
			this.#previousHighPass[c] = y1;
		});
	}
}
