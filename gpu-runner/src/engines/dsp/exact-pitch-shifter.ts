/**
 * Pitch shift that is exact in frequency, with the formants kept where they were: the dsp engine's
 * `pitch_method: "exact"`, the alternative to Signalsmith Stretch transposing by itself (the default, `transpose`)
 * that `bench/runner/dsp-pitch-probe.ts` measures. It is better on lone partials, formants and downward periodicity,
 * but less periodic upwards and about 3.5× slower (figures in the README's dsp section).
 *
 * Signalsmith Stretch transposing on its own misplaces partials by up to half a bin × (1 - 1/ratio) (see the README's
 * dsp section), so the library only stretches time here, which keeps every frequency; the rest is ours:
 *
 * 1. time-stretch by the ratio r = 2^(semitones/12) with the library (no transposition, no formant handling);
 * 2. read the stretched audio back at r samples per output sample with a windowed-sinc resampler
 *    (`FractionalReader`): exactly the source's length again, every frequency (pitch and formants alike) × r;
 * 3. put the spectral envelope back (`FormantRestorer`): per STFT frame, the power spectrum of the source frame at
 *    the same time averaged over one harmonic spacing (its pitch, tracked per frame), P_x, and of the resampled
 *    frame over r times that, P_z; the magnitudes are scaled by √(P_x(f / φ) / (r P_z(f))), smoothed over the
 *    resampled frame's harmonic spacing, phases kept, frames overlap-added. φ = 2^(formant_shift/12) moves the
 *    envelope on top. (A cepstral envelope was tried first: its level depends on how dense the harmonics are,
 *    which differs between the two frames by r, and it moved a 1/h tone's level by up to 10 dB.)
 *
 * The library's latency is known in both its input and output domains, so output sample m is read at the stretched
 * position r (m + inputLatency) + outputLatency and lines up with source sample m exactly; the STFT's own delay is
 * dropped from the start. Exactly as many frames come out as went in, in bounded memory.
 */
import { joinSamples } from "../../audio/pcm.ts";
import { Fft, periodicHann } from "../rvc/fft.ts";
import { PitchShifter } from "./signalsmith-stretch.ts";

export interface ExactShiftSettings {
	semitones: number;
	/** Formant shift in semitones on top of keeping the source's formants. */
	formantSemitones: number;
	/** Rough fundamental of the source in Hz (its harmonic spacing) for the envelope smoothing; 0 tracks it per frame. */
	formantBaseHz: number;
}

/** Frames per library call, input and output alike (its buffers hold this many of each). */
const STRETCH_BLOCK = 4096;
/** Zero crossings of the resampling kernel on each side of its centre, and its Kaiser window's beta. */
const KERNEL_ZEROS = 16;
const KERNEL_BETA = 8;
/** Kernel table entries per input sample (linear interpolation between them). */
const KERNEL_OVERSAMPLE = 512;
/** The resampler passes this fraction of the narrower of the two bands; the rest is its transition band. */
const PASSBAND = 0.96;
/** Width of the envelope smoothing where a source frame has no pitch (noise, silence). */
const UNVOICED_SPACING_HZ = 200;
/** The envelope correction is held within ± this many dB (where the resampled audio is empty, e.g. above its band). */
const MAX_CORRECTION_DB = 24;

/** A growable float queue with an absolute index for its first sample. */
class SampleQueue {
	#data = new Float32Array(8192);
	#length = 0;
	/** Absolute index of `#data[0]`. */
	start = 0;

	get end(): number {
		return this.start + this.#length;
	}

	append(samples: Float32Array): void {
		if (this.#length + samples.length > this.#data.length) {
			const grown = new Float32Array(Math.max(this.#data.length * 2, this.#length + samples.length));
			grown.set(this.#data.subarray(0, this.#length));
			this.#data = grown;
		}
		this.#data.set(samples, this.#length);
		this.#length += samples.length;
	}

	appendZeros(count: number): void {
		this.append(new Float32Array(count));
	}

	at(index: number): number {
		return index < this.start || index >= this.end ? 0 : (this.#data[index - this.start] as number);
	}

	/** The samples from absolute `from` on, as a view (valid until the next change). */
	view(from: number, to: number): Float32Array {
		return this.#data.subarray(from - this.start, to - this.start);
	}

	/** Forget the samples before absolute `index`. */
	drop(index: number): void {
		const count = Math.min(Math.max(0, index - this.start), this.#length);
		if (count === 0) return;
		this.#data.copyWithin(0, count, this.#length);
		this.#length -= count;
		this.start += count;
	}
}

function besselI0(x: number): number {
	let sum = 1;
	let term = 1;
	for (let k = 1; k < 50; k++) {
		term *= (x / (2 * k)) ** 2;
		sum += term;
		if (term < 1e-12 * sum) break;
	}
	return sum;
}

/**
 * Reads a stream at fractional positions with a Kaiser-windowed sinc low-pass whose cutoff is `cutoff` × Nyquist
 * (below 1 where the reading steps over more than one sample at a time, so nothing aliases).
 */
class FractionalReader {
	readonly halfWidth: number;
	readonly #table: Float64Array;

	constructor(cutoff: number) {
		this.halfWidth = KERNEL_ZEROS / cutoff;
		const entries = Math.ceil(this.halfWidth * KERNEL_OVERSAMPLE) + 2;
		this.#table = new Float64Array(entries);
		const norm = besselI0(KERNEL_BETA);
		for (let j = 0; j < entries; j++) {
			const t = j / KERNEL_OVERSAMPLE;
			const u = t / this.halfWidth;
			if (u >= 1) continue;
			const x = Math.PI * cutoff * t;
			const sinc = x === 0 ? 1 : Math.sin(x) / x;
			this.#table[j] = cutoff * sinc * (besselI0(KERNEL_BETA * Math.sqrt(1 - u * u)) / norm);
		}
	}

	/** The filtered value at absolute position `position` of `queue`, which must hold position ± halfWidth. */
	read(queue: SampleQueue, position: number): number {
		const centre = Math.floor(position);
		const frac = position - centre;
		const reach = Math.floor(this.halfWidth);
		const samples = queue.view(centre - reach, centre + reach + 2);
		const table = this.#table;
		const oversample = KERNEL_OVERSAMPLE;
		const mid = reach;
		let sum = 0;
		// Taps at or before the position are frac, frac + 1, ... samples away; those after it 1 - frac, 2 - frac, ...
		// Along each side the distance steps by whole samples, so the table index steps by `oversample` and the
		// interpolation weight stays the same.
		let t = frac * oversample;
		let j = Math.floor(t);
		let w = t - j;
		for (let i = mid; i >= 0 && j + 1 < table.length; i--, j += oversample) {
			const a = table[j] as number;
			sum += (samples[i] as number) * (a + w * ((table[j + 1] as number) - a));
		}
		t = (1 - frac) * oversample;
		j = Math.floor(t);
		w = t - j;
		for (let i = mid + 1; i < samples.length && j + 1 < table.length; i++, j += oversample) {
			const a = table[j] as number;
			sum += (samples[i] as number) * (a + w * ((table[j + 1] as number) - a));
		}
		return sum;
	}
}

/**
 * Time-stretch by `ratio` with the library and read back at `ratio` samples per output sample: the source with every
 * frequency × ratio, sample m aligned with source sample m.
 */
class StretchResampler {
	readonly #ratio: number;
	readonly #stretcher: PitchShifter;
	readonly #reader: FractionalReader;
	readonly #chunk: number;
	readonly #stretched = new SampleQueue();
	#framesIn = 0;
	#stretchedOut = 0;
	#framesOut = 0;

	private constructor(ratio: number, stretcher: PitchShifter, chunk: number) {
		this.#ratio = ratio;
		this.#chunk = chunk;
		this.#stretcher = stretcher;
		this.#reader = new FractionalReader(PASSBAND * Math.min(1, 1 / ratio));
		// Stretched positions before the library's first output are silence.
		const firstNeeded = Math.floor(this.#position(0) - this.#reader.halfWidth) - 2;
		this.#stretched.start = Math.min(0, firstNeeded);
		this.#stretched.appendZeros(-this.#stretched.start);
	}

	static async create(sampleRate: number, ratio: number): Promise<StretchResampler> {
		// The library starts randomising its phase estimates once the stretch between two analyses exceeds 2, which
		// rounding does at an octave up unless every analysis reads the same number of input frames: an even interval,
		// and input fed half an interval at a time (an octave up, each call then ends on the same analysis phase).
		// Deterministic output at every shift of the job's range (±12 semitones).
		const interval = 2 * Math.round(0.015 * sampleRate);
		const stretcher = await PitchShifter.createTimeStretcher(1, sampleRate, STRETCH_BLOCK, interval);
		return new StretchResampler(ratio, stretcher, interval / 2);
	}

	/** Stretched position that output sample m is read at. */
	#position(m: number): number {
		return this.#ratio * (m + this.#stretcher.inputLatencyFrames) + this.#stretcher.outputLatencyFrames;
	}

	/** Feeds `input` and returns the output samples it completes. */
	push(input: Float32Array): Float32Array {
		const chunk = this.#chunk;
		for (let start = 0; start < input.length; start += chunk) {
			const frames = Math.min(chunk, input.length - start);
			this.#framesIn += frames;
			const target = Math.floor(this.#framesIn * this.#ratio);
			const outputFrames = target - this.#stretchedOut;
			this.#stretchedOut = target;
			const [stretched] = this.#stretcher.process([input.subarray(start, start + frames)], frames, outputFrames);
			this.#stretched.append(stretched as Float32Array);
		}
		return this.#read(Number.POSITIVE_INFINITY);
	}

	/** Pushes silence through until the first `frames` output samples are all out; returns those still owed. */
	flush(frames: number): Float32Array {
		const parts: Float32Array[] = [];
		const silence = new Float32Array(1024);
		let owed = frames - this.#framesOut;
		while (owed > 0) {
			const part = this.push(silence).subarray(0, owed);
			owed -= part.length;
			parts.push(part);
		}
		return joinSamples(parts);
	}

	#read(limit: number): Float32Array {
		const halfWidth = this.#reader.halfWidth;
		const available = this.#stretched.end;
		let count = 0;
		while (this.#framesOut + count < limit && this.#position(this.#framesOut + count) + halfWidth + 2 < available)
			count++;
		const out = new Float32Array(count);
		for (let i = 0; i < count; i++) out[i] = this.#reader.read(this.#stretched, this.#position(this.#framesOut + i));
		this.#framesOut += count;
		this.#stretched.drop(Math.floor(this.#position(this.#framesOut) - halfWidth) - 2);
		return out;
	}
}

/**
 * In place: each of `values` becomes the mean over a window `width` entries wide centred on it (fractional widths
 * weigh the two edge entries by the fraction; fewer entries at the ends).
 */
function boxSmooth(values: Float64Array, width: number, scratch: Float64Array): void {
	const n = values.length;
	const half = Math.max(0, (width - 1) / 2);
	const reach = Math.floor(half);
	const edge = half - reach;
	scratch.set(values);
	let sum = 0;
	for (let i = 0; i < Math.min(n, reach); i++) sum += scratch[i] as number;
	for (let i = 0; i < n; i++) {
		if (i + reach < n) sum += scratch[i + reach] as number;
		if (i - reach - 1 >= 0) sum -= scratch[i - reach - 1] as number;
		let total = sum;
		let weight = Math.min(n - 1, i + reach) - Math.max(0, i - reach) + 1;
		if (edge > 0) {
			if (i - reach - 1 >= 0) {
				total += edge * (scratch[i - reach - 1] as number);
				weight += edge;
			}
			if (i + reach + 1 < n) {
				total += edge * (scratch[i + reach + 1] as number);
				weight += edge;
			}
		}
		values[i] = total / weight;
	}
}

/**
 * STFT stage that gives the shifted audio z the spectral envelope of the source x (moved by `formantFactor`):
 * magnitudes × E_x(f / formantFactor) / E_z(f), phases kept. Hann analysis and synthesis windows at 75 % overlap.
 * Its output lags by frameSize - hop, which `process` drops, so output sample m lines up with input sample m.
 */
class FormantRestorer {
	readonly #size: number;
	readonly #hop: number;
	readonly #sampleRate: number;
	readonly #ratio: number;
	readonly #baseHz: number;
	readonly #windowCorrelation: Float64Array;
	readonly #scratch: Float64Array;
	readonly #gains: Float64Array;
	readonly #formantFactor: number;
	readonly #fft: Fft;
	readonly #window: Float64Array;
	readonly #source: Float64Array;
	readonly #shifted: Float64Array;
	readonly #overlap: Float64Array;
	readonly #re: Float64Array;
	readonly #im: Float64Array;
	readonly #spectrumRe: Float64Array;
	readonly #spectrumIm: Float64Array;
	readonly #sourceEnvelope: Float64Array;
	readonly #shiftedEnvelope: Float64Array;
	/** Samples in the current hop so far. */
	#filled = 0;
	/** Output samples still to drop (the STFT's delay). */
	#delayLeft: number;

	/**
	 * `ratio`: the pitch ratio of the shifted audio to the source; `baseHz`: the source's harmonic spacing if known
	 * (else tracked per frame); `formantFactor`: how far to move the source's envelope.
	 */
	constructor(sampleRate: number, ratio: number, baseHz: number, formantFactor: number) {
		this.#size = 2 ** Math.ceil(Math.log2((0.04 * sampleRate) / Math.min(1, ratio)));
		this.#hop = this.#size / 4;
		this.#sampleRate = sampleRate;
		this.#ratio = ratio;
		this.#baseHz = baseHz;
		this.#formantFactor = formantFactor;
		this.#fft = new Fft(this.#size);
		this.#window = periodicHann(this.#size);
		this.#source = new Float64Array(this.#size);
		this.#shifted = new Float64Array(this.#size);
		this.#overlap = new Float64Array(this.#size);
		this.#re = new Float64Array(this.#size);
		this.#im = new Float64Array(this.#size);
		this.#spectrumRe = new Float64Array(this.#size);
		this.#spectrumIm = new Float64Array(this.#size);
		this.#sourceEnvelope = new Float64Array(this.#size / 2 + 1);
		this.#shiftedEnvelope = new Float64Array(this.#size / 2 + 1);
		this.#delayLeft = this.#size - this.#hop;
		this.#scratch = new Float64Array(this.#size / 2 + 1);
		this.#gains = new Float64Array(this.#size / 2 + 1);
		this.#windowCorrelation = new Float64Array(this.#size / 2 + 1);
		for (let lag = 0; lag <= this.#size / 2; lag++) {
			let sum = 0;
			for (let n = 0; n + lag < this.#size; n++) sum += (this.#window[n] as number) * (this.#window[n + lag] as number);
			this.#windowCorrelation[lag] = sum;
		}
		const zeroLag = this.#windowCorrelation[0] as number;
		for (let lag = 0; lag <= this.#size / 2; lag++)
			this.#windowCorrelation[lag] = (this.#windowCorrelation[lag] as number) / zeroLag;
	}

	/** Takes equally long source and shifted samples; returns the corrected samples released (in order). */
	process(source: Float32Array, shifted: Float32Array): Float32Array {
		const size = this.#size;
		const hop = this.#hop;
		const out = new Float32Array(Math.ceil((this.#filled + shifted.length) / hop) * hop);
		let released = 0;
		for (let i = 0; i < shifted.length; i++) {
			this.#source[size - hop + this.#filled] = source[i] as number;
			this.#shifted[size - hop + this.#filled] = shifted[i] as number;
			if (++this.#filled < hop) continue;
			this.#filled = 0;
			this.#frame();
			const drop = Math.min(this.#delayLeft, hop);
			this.#delayLeft -= drop;
			for (let j = drop; j < hop; j++) out[released++] = this.#overlap[j] as number;
			this.#overlap.copyWithin(0, hop);
			this.#overlap.fill(0, size - hop);
			this.#source.copyWithin(0, hop);
			this.#shifted.copyWithin(0, hop);
		}
		return out.subarray(0, released);
	}

	#frame(): void {
		const size = this.#size;
		const half = size / 2;
		const re = this.#re;
		const im = this.#im;
		const spectrumRe = this.#spectrumRe;
		const spectrumIm = this.#spectrumIm;
		const sourceEnvelope = this.#sourceEnvelope;
		const shiftedEnvelope = this.#shiftedEnvelope;
		const window = this.#window;
		const source = this.#source;
		const shifted = this.#shifted;
		// Both frames in one complex FFT: x in the real part, z in the imaginary part.
		for (let n = 0; n < size; n++) {
			const w = window[n] as number;
			re[n] = (source[n] as number) * w;
			im[n] = (shifted[n] as number) * w;
		}
		this.#fft.transform(re, im);
		spectrumRe.set(re);
		spectrumIm.set(im);
		// Powers of X and Z: X[k] = (A[k] + conj(A[N-k])) / 2, Z[k] = (A[k] - conj(A[N-k])) / 2i.
		let peakPower = 1e-30;
		for (let k = 0; k <= half; k++) {
			const mirror = (size - k) & (size - 1);
			const ar = spectrumRe[k] as number;
			const ai = spectrumIm[k] as number;
			const br = spectrumRe[mirror] as number;
			const bi = spectrumIm[mirror] as number;
			const xr = ar + br;
			const xi = ai - bi;
			const zr = ai + bi;
			const zi = br - ar;
			const px = 0.25 * (xr * xr + xi * xi);
			const pz = 0.25 * (zr * zr + zi * zi);
			sourceEnvelope[k] = px;
			shiftedEnvelope[k] = pz;
			if (px > peakPower) peakPower = px;
			if (pz > peakPower) peakPower = pz;
		}
		// The harmonic spacing of the source frame (its pitch, from its autocorrelation: the transform of its power
		// spectrum), or a fixed width where it has none; the shifted frame's spacing is `ratio` times that.
		const spacingHz = this.#baseHz > 0 ? this.#baseHz : this.#pitchOf(sourceEnvelope);
		const binHz = this.#sampleRate / size;
		const shiftedWidth = Math.max(3, (spacingHz * this.#ratio) / binHz);
		boxSmooth(sourceEnvelope, Math.max(3, spacingHz / binHz), this.#scratch);
		boxSmooth(shiftedEnvelope, shiftedWidth, this.#scratch);
		// Averaged over one harmonic spacing, a frame's power is (harmonic amplitude)² / spacing, and noise keeps its
		// density / ratio through the resampling; so E_x² / E_z² = P_x / (ratio P_z) for both, and the gain is its root.
		const floor = peakPower * 1e-10;
		const limit = 10 ** (MAX_CORRECTION_DB / 20);
		const step = 1 / this.#formantFactor;
		// The gain per bin, then smoothed over one harmonic spacing of the shifted frame: it is only defined at the
		// harmonics, and must not slope across one harmonic's own peak (which would bend a lone partial).
		const gains = this.#gains;
		for (let k = 0; k <= half; k++) {
			const at = Math.min(half, k * step);
			const j = Math.min(half - 1, Math.floor(at));
			const a = sourceEnvelope[j] as number;
			const target = a + (at - j) * ((sourceEnvelope[j + 1] as number) - a);
			const gain = Math.sqrt((target + floor) / (this.#ratio * (shiftedEnvelope[k] as number) + floor));
			gains[k] = Math.min(limit, Math.max(1 / limit, gain));
		}
		boxSmooth(gains, shiftedWidth, this.#scratch);
		for (let k = 0; k <= half; k++) {
			const mirror = (size - k) & (size - 1);
			const ar = spectrumRe[k] as number;
			const ai = spectrumIm[k] as number;
			const br = spectrumRe[mirror] as number;
			const bi = spectrumIm[mirror] as number;
			const zr = 0.5 * (ai + bi);
			const zi = 0.5 * (br - ar);
			const gain = gains[k] as number;
			// Z's spectrum scaled, conjugated for the inverse FFT by the forward one.
			re[k] = zr * gain;
			im[k] = -zi * gain;
			if (k > 0 && k < half) {
				re[mirror] = zr * gain;
				im[mirror] = zi * gain;
			}
		}
		// Inverse FFT via the forward one: ifft(Y) = conj(fft(conj(Y))) / N; the result is real.
		this.#fft.transform(re, im);
		// Hann² at a quarter-frame hop sums to 1.5.
		const scale = 1 / (size * 1.5);
		const overlap = this.#overlap;
		for (let n = 0; n < size; n++)
			overlap[n] = (overlap[n] as number) + (re[n] as number) * (window[n] as number) * scale;
	}

	/**
	 * Pitch of the frame whose power spectrum (bins 0..N/2) is `power`, from the strongest autocorrelation peak
	 * between 1/1000 and 1/50 s; `UNVOICED_SPACING_HZ` where none reaches half the frame's energy.
	 */
	#pitchOf(power: Float64Array): number {
		const size = this.#size;
		const half = size / 2;
		const re = this.#re;
		const im = this.#im;
		for (let k = 0; k <= half; k++) {
			re[k] = power[k] as number;
			if (k > 0 && k < half) re[size - k] = power[k] as number;
		}
		im.fill(0);
		this.#fft.transform(re, im);
		const energy = re[0] as number;
		if (!(energy > 0)) return UNVOICED_SPACING_HZ;
		const shortest = Math.max(2, Math.floor(this.#sampleRate / 1000));
		const longest = Math.min(Math.floor(size / 3), Math.ceil(this.#sampleRate / 50));
		// Normalised by the Hann window's own autocorrelation (which falls with the lag): 1 at a perfect period.
		const correlation = (lag: number) => (re[lag] as number) / (energy * (this.#windowCorrelation[lag] as number));
		let highest = 0;
		for (let lag = shortest; lag <= longest; lag++) highest = Math.max(highest, correlation(lag));
		if (highest < 0.5) return UNVOICED_SPACING_HZ;
		// The first peak close to the highest: not a multiple of the period.
		for (let lag = shortest; lag <= longest; lag++) {
			const value = correlation(lag);
			if (value >= 0.9 * highest && value >= correlation(lag - 1) && value >= correlation(lag + 1)) {
				return this.#sampleRate / lag;
			}
		}
		return UNVOICED_SPACING_HZ;
	}

	/** Samples still to come once the input has ended: the STFT's delay. */
	get tail(): number {
		return this.#size;
	}
}

/**
 * A mono exact pitch shifter (module comment) with `AlignedPitchShifter`'s contract: output lines up with the input
 * frame for frame, and after `flush` exactly as many frames have come out as went in. With no shift at all, the
 * input comes back unchanged.
 */
export class ExactPitchShifter {
	readonly #resampler: StretchResampler | undefined;
	readonly #restorer: FormantRestorer | undefined;
	/** Source samples waiting for their shifted counterparts (for the envelope). */
	readonly #source = new SampleQueue();
	#framesIn = 0;
	#framesOut = 0;

	private constructor(resampler: StretchResampler | undefined, restorer: FormantRestorer | undefined) {
		this.#resampler = resampler;
		this.#restorer = restorer;
	}

	static async create(sampleRate: number, settings: ExactShiftSettings): Promise<ExactPitchShifter> {
		const ratio = 2 ** (settings.semitones / 12);
		const formantFactor = 2 ** (settings.formantSemitones / 12);
		const resampler = ratio === 1 ? undefined : await StretchResampler.create(sampleRate, ratio);
		const restorer =
			ratio === 1 && formantFactor === 1
				? undefined
				: new FormantRestorer(sampleRate, ratio, settings.formantBaseHz, formantFactor);
		return new ExactPitchShifter(resampler, restorer);
	}

	/** Shifts `block` (any length); returns the shifted frames it releases, in order (maybe none). */
	push(block: Float32Array): Float32Array {
		this.#framesIn += block.length;
		if (!this.#restorer) return this.#emit(block);
		this.#source.append(block);
		return this.#emit(this.#restore(this.#resampler ? this.#resampler.push(block) : block));
	}

	/** The frames still inside: afterwards exactly as many frames have come out as went in. */
	flush(): Float32Array {
		const parts: Float32Array[] = [];
		if (this.#restorer) {
			const resampled = this.#resampler ? this.#resampler.flush(this.#framesIn) : new Float32Array(0);
			parts.push(this.#restore(resampled));
			const tail = new Float32Array(this.#restorer.tail);
			this.#source.appendZeros(tail.length);
			parts.push(this.#restore(tail));
		}
		return this.#emit(joinSamples([...parts, new Float32Array(0)]));
	}

	#restore(shifted: Float32Array): Float32Array {
		const restorer = this.#restorer as FormantRestorer;
		const start = this.#source.start;
		const out = restorer.process(this.#source.view(start, start + shifted.length), shifted);
		this.#source.drop(start + shifted.length);
		return out;
	}

	#emit(samples: Float32Array): Float32Array {
		const length = Math.min(samples.length, this.#framesIn - this.#framesOut);
		this.#framesOut += length;
		return samples.subarray(0, length);
	}
}

/**
 * One `ExactPitchShifter` per channel, so that every channel is shifted on its own (see `ChannelwisePitchShifter`
 * for what sharing one analysis did to channels whose content differs). The channels see the same frame counts and
 * release equally many frames at every step.
 */
export class ChannelwiseExactPitchShifter {
	readonly #shifters: ExactPitchShifter[];

	private constructor(shifters: ExactPitchShifter[]) {
		this.#shifters = shifters;
	}

	static async create(
		channels: number,
		sampleRate: number,
		settings: ExactShiftSettings,
	): Promise<ChannelwiseExactPitchShifter> {
		const shifters: ExactPitchShifter[] = [];
		for (let c = 0; c < channels; c++) shifters.push(await ExactPitchShifter.create(sampleRate, settings));
		return new ChannelwiseExactPitchShifter(shifters);
	}

	/**
	 * Shifts `block` (one array per channel, any length); yields the frames it releases (none, or one block), as
	 * `ChannelwisePitchShifter` does.
	 */
	*push(block: Float32Array[]): Generator<Float32Array[]> {
		const frames = block[0]?.length ?? 0;
		yield* this.#released(this.#shifters.map((shifter, c) => shifter.push(block[c] ?? new Float32Array(frames))));
	}

	/** Yields the frames still inside the shifters. */
	*flush(): Generator<Float32Array[]> {
		yield* this.#released(this.#shifters.map((shifter) => shifter.flush()));
	}

	*#released(outputs: Float32Array[]): Generator<Float32Array[]> {
		const length = outputs[0]?.length ?? 0;
		if (outputs.some((output) => output.length !== length))
			throw new Error("pitch shifters of one job fell out of step");
		if (length > 0) yield outputs;
	}
}
