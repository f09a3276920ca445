/**
 * RMVPE's front end (`MelSpectrogram` in RVC's `infer/lib/rmvpe.py`): 16 kHz audio, torch.stft with
 * n_fft = win_length = 1024, hop 160, a periodic Hann window, center=True (reflect padding of n_fft/2),
 * magnitude |X|, a 128-band librosa mel filterbank (htk=True, norm="slaney", fmin 30 Hz, fmax 8 kHz), then
 * log(max(mel, 1e-5)).
 */
import { Fft, periodicHann } from "./fft.ts";
import { reflectIndex } from "./reflect-pad.ts";

export const RMVPE_SAMPLE_RATE = 16_000;
export const RMVPE_HOP = 160;
export const RMVPE_N_FFT = 1024;
export const RMVPE_N_MELS = 128;
export const RMVPE_FMIN = 30;
export const RMVPE_FMAX = 8000;
export const RMVPE_LOG_CLAMP = 1e-5;
/** RMVPE's U-Net halves the time axis five times, so RVC pads the frame count up to a multiple of 32. */
export const RMVPE_FRAME_MULTIPLE = 32;

const htkHzToMel = (hz: number): number => 2595 * Math.log10(1 + hz / 700);
const htkMelToHz = (mel: number): number => 700 * (10 ** (mel / 2595) - 1);

/**
 * librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax, htk=True, norm="slaney") as a row-major
 * `nMels x (nFft/2 + 1)` matrix.
 */
export function melFilterbank(
	sampleRate: number,
	nFft: number,
	nMels: number,
	fmin: number,
	fmax: number,
): Float32Array {
	const nBins = nFft / 2 + 1;
	const melMin = htkHzToMel(fmin);
	const melMax = htkHzToMel(fmax);
	const edges = Array.from({ length: nMels + 2 }, (_, i) => htkMelToHz(melMin + ((melMax - melMin) * i) / (nMels + 1)));
	const weights = new Float32Array(nMels * nBins);
	for (let m = 0; m < nMels; m++) {
		const lo = edges[m] as number;
		const mid = edges[m + 1] as number;
		const hi = edges[m + 2] as number;
		const slaney = 2 / (hi - lo);
		for (let k = 0; k < nBins; k++) {
			const hz = (k * sampleRate) / nFft;
			const rising = (hz - lo) / (mid - lo);
			const falling = (hi - hz) / (hi - mid);
			weights[m * nBins + k] = Math.max(0, Math.min(rising, falling)) * slaney;
		}
	}
	return weights;
}

export interface LogMel {
	/** Row-major `[nMels, paddedFrames]`, ready to be the RMVPE input `[1, 128, paddedFrames]`. */
	data: Float32Array;
	/** STFT frames of the audio: 1 + floor(samples / hop). */
	frames: number;
	/** `frames` rounded up to a multiple of 32; the extra columns are 0, as in RVC. */
	paddedFrames: number;
}

export class LogMelSpectrogram {
	readonly #fft = new Fft(RMVPE_N_FFT);
	readonly #window = periodicHann(RMVPE_N_FFT);
	readonly #filterbank = melFilterbank(RMVPE_SAMPLE_RATE, RMVPE_N_FFT, RMVPE_N_MELS, RMVPE_FMIN, RMVPE_FMAX);
	/** For each mel band, the first and one-past-last FFT bin with a non-zero weight. */
	readonly #bandRanges: Array<[number, number]>;

	constructor() {
		const nBins = RMVPE_N_FFT / 2 + 1;
		this.#bandRanges = [];
		for (let m = 0; m < RMVPE_N_MELS; m++) {
			let first = nBins;
			let last = 0;
			for (let k = 0; k < nBins; k++) {
				if ((this.#filterbank[m * nBins + k] as number) > 0) {
					first = Math.min(first, k);
					last = k + 1;
				}
			}
			this.#bandRanges.push([first, Math.max(first, last)]);
		}
	}

	compute(audio: Float32Array): LogMel {
		if (audio.length === 0) throw new RangeError("cannot compute a spectrogram of no audio");
		const nBins = RMVPE_N_FFT / 2 + 1;
		const half = RMVPE_N_FFT / 2;
		const frames = 1 + Math.floor(audio.length / RMVPE_HOP);
		const paddedFrames = Math.ceil(frames / RMVPE_FRAME_MULTIPLE) * RMVPE_FRAME_MULTIPLE;
		const data = new Float32Array(RMVPE_N_MELS * paddedFrames);
		const re = new Float64Array(RMVPE_N_FFT);
		const im = new Float64Array(RMVPE_N_FFT);
		const magnitude = new Float64Array(nBins);
		for (let f = 0; f < frames; f++) {
			// center=True: frame f is centred on sample f * hop of the reflect-padded signal.
			const start = f * RMVPE_HOP - half;
			for (let i = 0; i < RMVPE_N_FFT; i++) {
				re[i] = (audio[reflectIndex(start + i, audio.length)] as number) * (this.#window[i] as number);
				im[i] = 0;
			}
			this.#fft.transform(re, im);
			for (let k = 0; k < nBins; k++) magnitude[k] = Math.hypot(re[k] as number, im[k] as number);
			for (let m = 0; m < RMVPE_N_MELS; m++) {
				const [first, last] = this.#bandRanges[m] as [number, number];
				let sum = 0;
				for (let k = first; k < last; k++)
					sum += (this.#filterbank[m * nBins + k] as number) * (magnitude[k] as number);
				data[m * paddedFrames + f] = Math.log(Math.max(sum, RMVPE_LOG_CLAMP));
			}
		}
		return { data, frames, paddedFrames };
	}
}
