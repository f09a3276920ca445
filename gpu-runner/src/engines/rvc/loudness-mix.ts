/**
 * RVC's `rms_mix_rate` (`change_rms` in `infer/modules/vc/pipeline.py`, applied to the whole output at the end of
 * `Pipeline.pipeline`): the RMS envelopes of the (high-passed, 16 kHz) source and of the output are taken in
 * frames of one second (`frame_length = sr // 2 * 2`) every half second (`hop_length = sr // 2`), centred with
 * zero padding (librosa 0.10's `feature.rms`), both linearly interpolated to the output's length (torch
 * `F.interpolate`, `align_corners=False`), and the output is scaled by
 * `rms_src^(1 − rate) · max(rms_out, 1e-6)^(rate − 1)`. Rate 1 leaves the output as it is; 0 gives it the source's
 * loudness envelope. The whole-file transcription the tests compare against is `test/rvc/support/rvc-change-rms.ts`.
 */
/**
 * Sums of squares over consecutive blocks of `hop` samples, fed in pieces. Frame `t` of RVC's envelope (one
 * second centred on sample `t · hop`, zero padded) is blocks `t − 1` and `t`, so these sums are all it needs.
 */
class BlockEnergies {
	readonly hop: number;
	readonly #sums: number[] = [];
	#current = 0;
	#filled = 0;
	#samples = 0;

	constructor(hop: number) {
		this.hop = hop;
	}

	get samples(): number {
		return this.#samples;
	}

	add(samples: Float32Array): void {
		for (let i = 0; i < samples.length; i++) {
			const v = samples[i] as number;
			this.#current += v * v;
			if (++this.#filled === this.hop) {
				this.#sums.push(this.#current);
				this.#current = 0;
				this.#filled = 0;
			}
		}
		this.#samples += samples.length;
	}

	/** Frames whose samples have all arrived (frame `t` needs block `t`). */
	get completeFrames(): number {
		return this.#sums.length;
	}

	/** RMS of frame `t`: complete frames, or any frame once the stream has ended (the partial block counts then). */
	rms(t: number): number {
		const block = (b: number): number =>
			b < 0 ? 0 : b < this.#sums.length ? (this.#sums[b] as number) : b === this.#sums.length ? this.#current : 0;
		return Math.sqrt((block(t - 1) + block(t)) / (2 * this.hop));
	}
}

/** Frames librosa gives `length` samples: 1 + floor(length / hop). */
const frameCount = (length: number, hop: number): number => 1 + Math.floor(length / hop);

/**
 * RVC's `change_rms` over a whole stream in bounded memory: the source's
 * samples go in as they are read (`addSource`), the joined output as it is converted (`mix`), which returns the
 * output samples whose envelope frames on both sides are known (about a second is held back); `end` returns the
 * rest once both streams have ended.
 *
 * RVC interpolates `n` frames onto `N` output samples at torch's scale `n / N`, which depends on the whole length.
 * Given the expected source length it does the same, and equals RVC's whole-file result when the source
 * is that long; without it, frame `t` sits on output sample `t · hop`, the position long files tend to.
 */
export class StreamingLoudnessMix {
	readonly #rate: number;
	readonly #ratio: number;
	readonly #source: BlockEnergies;
	readonly #output: BlockEnergies;
	readonly #expectedSource: number | undefined;
	/** Output samples not yet returned, starting at absolute position #pendingStart. */
	#pending: Float32Array[] = [];
	#pendingStart = 0;

	constructor(options: { sourceRate: number; outputRate: number; rate: number; expectedSourceLength?: number }) {
		this.#rate = options.rate;
		this.#ratio = options.outputRate / options.sourceRate;
		this.#source = new BlockEnergies(Math.floor(options.sourceRate / 2));
		this.#output = new BlockEnergies(Math.floor(options.outputRate / 2));
		this.#expectedSource = options.expectedSourceLength;
	}

	addSource(samples: Float32Array): void {
		if (this.#rate < 1) this.#source.add(samples);
	}

	mix(samples: Float32Array): Float32Array {
		if (this.#rate >= 1) return samples;
		this.#output.add(samples);
		this.#pending.push(samples);
		// Sample i needs frame floor(p(i)) + 1 of each envelope, p(i) = (i + 0.5) · scale − 0.5: complete frames
		// K allow i < (K − 0.5) / scale − 0.5.
		const scales = this.#scales(this.#expectedSource);
		const readyEnd = Math.min(
			Math.ceil((this.#source.completeFrames - 0.5) / scales.source - 0.5),
			Math.ceil((this.#output.completeFrames - 0.5) / scales.output - 0.5),
			this.#output.samples,
		);
		return this.#take(readyEnd, scales);
	}

	/** The held-back output, mixed; both streams must have ended. */
	end(): Float32Array {
		if (this.#rate >= 1) return new Float32Array(0);
		return this.#take(this.#output.samples, this.#scales(this.#source.samples), true);
	}

	/** Frames per output sample of each envelope, from a source length (RVC's) or for an unknown length. */
	#scales(sourceLength: number | undefined): {
		source: number;
		output: number;
		sourceFrames: number;
		outputFrames: number;
	} {
		if (sourceLength === undefined || sourceLength <= 0) {
			const scale = 1 / this.#output.hop;
			return { source: scale, output: scale, sourceFrames: Infinity, outputFrames: Infinity };
		}
		const outputLength = Math.round(sourceLength * this.#ratio);
		const sourceFrames = frameCount(sourceLength, this.#source.hop);
		const outputFrames = frameCount(outputLength, this.#output.hop);
		return { source: sourceFrames / outputLength, output: outputFrames / outputLength, sourceFrames, outputFrames };
	}

	#take(
		end: number,
		scales: { source: number; output: number; sourceFrames: number; outputFrames: number },
		ended = false,
	): Float32Array {
		const count = Math.max(0, end - this.#pendingStart);
		const out = new Float32Array(count);
		let filled = 0;
		while (filled < count) {
			const piece = this.#pending[0] as Float32Array;
			const n = Math.min(piece.length, count - filled);
			out.set(piece.subarray(0, n), filled);
			filled += n;
			if (n === piece.length) this.#pending.shift();
			else this.#pending[0] = piece.subarray(n);
		}
		const lastSource = ended ? frameCount(this.#source.samples, this.#source.hop) - 1 : scales.sourceFrames - 1;
		const lastOutput = ended ? frameCount(this.#output.samples, this.#output.hop) - 1 : scales.outputFrames - 1;
		const envelope = (energies: BlockEnergies, scale: number, last: number, i: number): number => {
			const position = Math.max(0, (i + 0.5) * scale - 0.5);
			const i0 = Math.min(Math.floor(position), last);
			const i1 = Math.min(i0 + 1, last);
			const lambda = position - i0;
			return energies.rms(i0) * (1 - lambda) + energies.rms(i1) * lambda;
		};
		for (let k = 0; k < count; k++) {
			const i = this.#pendingStart + k;
			const source = envelope(this.#source, scales.source, lastSource, i);
			const own = envelope(this.#output, scales.output, lastOutput, i);
			out[k] = (out[k] as number) * source ** (1 - this.#rate) * Math.max(own, 1e-6) ** (this.#rate - 1);
		}
		this.#pendingStart += count;
		return out;
	}
}
