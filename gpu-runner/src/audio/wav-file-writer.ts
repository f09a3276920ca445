/**
 * Streaming WAV encoder to a local file: 16-bit PCM. Mono and stereo get the plain 44-byte header (format tag 1);
 * more channels get WAVE_FORMAT_EXTENSIBLE with a channel mask, as Microsoft's WAVE format documentation asks of
 * files with more than 2 channels (players map the channels to speakers by it): the source's speakers where it
 * stated them, else a mask of 0 (no speakers assigned; as sox writes where it knows no layout). The blocks are kept as 32-bit floats in a staging file beside
 * the output while the engine runs, and the peak is tracked; `finish` writes the WAV from them in one pass. An output
 * whose peak goes past `PEAK_LIMIT` is scaled down as a whole to peak there, as RVC's pipeline does, instead of
 * clipping where it is loud (a loud sung source often converts past full scale); any other output is written exactly
 * as the engine made it. Writing to disk (not memory) keeps long outputs cheap and gives the upload an exact
 * Content-Length; the staging file takes twice the output's size while the job runs. `finish(frames)` also fits the
 * file to an exact frame count (pads with silence or cuts), which is how the pipeline guarantees output duration =
 * input duration.
 */
import { type FileHandle, open, rm } from "node:fs/promises";
import { type AudioBlock, blockFrames } from "./pcm.ts";

const BYTES_PER_SAMPLE = 2;
const WAVE_FORMAT_PCM = 0x0001;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;
/** KSDATAFORMAT_SUBTYPE_PCM, {00000001-0000-0010-8000-00aa00389b71}, as its bytes are stored. */
const KSDATAFORMAT_SUBTYPE_PCM = [
	0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71,
];
const STAGED_BYTES_PER_SAMPLE = 4;
/** The peak an output is scaled down to when it would go past it (RVC: 0.99 of full scale). */
export const PEAK_LIMIT = 0.99;
/** Frames converted per read of the staging file in `finish`. */
const FINISH_FRAMES = 65_536;

/** Whether a WAV of `channels` channels is written as WAVE_FORMAT_EXTENSIBLE (more than 2 channels). */
const extensible = (channels: number) => channels > 2;

/** The header's size: RIFF, `fmt ` (16 bytes, or 40 when extensible) and the data chunk's header. */
export const wavHeaderBytes = (channels: number) => 12 + 8 + (extensible(channels) ? 40 : 16) + 8;

/** The size of the WAV this writer makes of `frames` frames of `channels` channels. */
export const wavFileBytes = (frames: number, channels: number) =>
	wavHeaderBytes(channels) + frames * channels * BYTES_PER_SAMPLE;

export interface WavFileInfo {
	path: string;
	sizeBytes: number;
	frames: number;
	sampleRate: number;
	channels: number;
	/** The gain applied to the whole output to keep its peak at `PEAK_LIMIT` (1 when it stayed below). */
	gain: number;
}

export interface WavLayout {
	/** Speakers of the channels (WAVE_FORMAT_EXTENSIBLE `dwChannelMask`), written for more than 2 channels; default 0. */
	channelMask?: number;
}

export class WavFileWriter {
	readonly path: string;
	readonly sampleRate: number;
	readonly channels: number;
	readonly channelMask: number;
	readonly #stagedPath: string;
	#staged: FileHandle;
	#frames = 0;
	#peak = 0;

	private constructor(path: string, staged: FileHandle, sampleRate: number, channels: number, channelMask: number) {
		this.path = path;
		this.#stagedPath = `${path}.f32`;
		this.#staged = staged;
		this.sampleRate = sampleRate;
		this.channels = channels;
		this.channelMask = channelMask;
	}

	static async create(
		path: string,
		sampleRate: number,
		channels: number,
		layout: WavLayout = {},
	): Promise<WavFileWriter> {
		const staged = await open(`${path}.f32`, "w+");
		return new WavFileWriter(path, staged, sampleRate, channels, layout.channelMask ?? 0);
	}

	get frames(): number {
		return this.#frames;
	}

	async write(block: AudioBlock): Promise<void> {
		if (block.channels.length !== this.channels || block.sampleRate !== this.sampleRate) {
			throw new Error(
				`engine yielded ${block.channels.length} ch @ ${block.sampleRate} Hz into a ${this.channels} ch @ ${this.sampleRate} Hz WAV`,
			);
		}
		const frames = blockFrames(block);
		const interleaved = new Float32Array(frames * this.channels);
		for (let c = 0; c < this.channels; c++) {
			const channel = block.channels[c] as Float32Array;
			for (let i = 0; i < frames; i++) {
				const sample = channel[i] as number;
				interleaved[i * this.channels + c] = sample;
				const magnitude = Math.abs(sample);
				if (magnitude > this.#peak) this.#peak = magnitude;
			}
		}
		const bytes = new Uint8Array(interleaved.buffer);
		await this.#staged.write(bytes, 0, bytes.length, this.#frames * this.channels * STAGED_BYTES_PER_SAMPLE);
		this.#frames += frames;
	}

	/**
	 * Fit to `targetFrames` (when given: padded with silence or cut), then write the WAV, scaled down as a whole when
	 * its peak is past `PEAK_LIMIT` (a frame cut off does not count towards the peak), and remove the staging file.
	 */
	async finish(targetFrames?: number): Promise<WavFileInfo> {
		const frames = targetFrames ?? this.#frames;
		const kept = Math.min(frames, this.#frames);
		const peak = kept === this.#frames ? this.#peak : await this.#peakOf(kept);
		const gain = peak > PEAK_LIMIT ? PEAK_LIMIT / peak : 1;
		const output = await open(this.path, "w");
		const headerBytes = wavHeaderBytes(this.channels);
		try {
			const header = wavHeader(frames * this.#blockAlign, this.sampleRate, this.channels, this.channelMask);
			await output.write(header, 0, header.byteLength, 0);
			for (let start = 0; start < frames; start += FINISH_FRAMES) {
				const count = Math.min(FINISH_FRAMES, frames - start);
				const samples = await this.#readStaged(start, Math.max(0, Math.min(count, kept - start)), count);
				const bytes = encodeInterleavedPcm16(samples, gain);
				await output.write(bytes, 0, bytes.length, headerBytes + start * this.#blockAlign);
			}
		} finally {
			await output.close();
		}
		await this.abort();
		this.#frames = frames;
		return {
			path: this.path,
			sizeBytes: wavFileBytes(frames, this.channels),
			frames,
			sampleRate: this.sampleRate,
			channels: this.channels,
			gain,
		};
	}

	/** Closes and removes the staging file (the output, if any, is the caller's). */
	async abort(): Promise<void> {
		await this.#staged.close().catch(() => {});
		await rm(this.#stagedPath, { force: true });
	}

	/** `count` frames from `start`, of which the first `available` come from the staging file and the rest are silence. */
	async #readStaged(start: number, available: number, count: number): Promise<Float32Array> {
		const samples = new Float32Array(count * this.channels);
		const bytes = new Uint8Array(samples.buffer, 0, Math.max(0, available) * this.channels * STAGED_BYTES_PER_SAMPLE);
		const position = start * this.channels * STAGED_BYTES_PER_SAMPLE;
		for (let done = 0; done < bytes.length; ) {
			const { bytesRead } = await this.#staged.read(bytes, done, bytes.length - done, position + done);
			if (bytesRead === 0) throw new Error("the staged output ended early");
			done += bytesRead;
		}
		return samples;
	}

	/** The peak of the first `frames` frames (when the end is cut off, the tracked peak may lie in what is cut). */
	async #peakOf(frames: number): Promise<number> {
		let peak = 0;
		for (let start = 0; start < frames; start += FINISH_FRAMES) {
			const count = Math.min(FINISH_FRAMES, frames - start);
			for (const sample of await this.#readStaged(start, count, count)) peak = Math.max(peak, Math.abs(sample));
		}
		return peak;
	}

	get #blockAlign(): number {
		return this.channels * BYTES_PER_SAMPLE;
	}
}

/** The header of a 16-bit PCM WAV whose data is `dataBytes` long: plain up to 2 channels, else extensible. */
export function wavHeader(dataBytes: number, sampleRate: number, channels: number, channelMask = 0): Uint8Array {
	const headerBytes = wavHeaderBytes(channels);
	const header = new Uint8Array(headerBytes);
	const view = new DataView(header.buffer);
	const text = (offset: number, value: string) => {
		for (let i = 0; i < value.length; i++) header[offset + i] = value.charCodeAt(i);
	};
	const blockAlign = channels * BYTES_PER_SAMPLE;
	const fmtBytes = headerBytes - 12 - 8 - 8;
	text(0, "RIFF");
	view.setUint32(4, headerBytes - 8 + dataBytes, true);
	text(8, "WAVE");
	text(12, "fmt ");
	view.setUint32(16, fmtBytes, true);
	view.setUint16(20, extensible(channels) ? WAVE_FORMAT_EXTENSIBLE : WAVE_FORMAT_PCM, true);
	view.setUint16(22, channels, true);
	view.setUint32(24, sampleRate, true);
	view.setUint32(28, sampleRate * blockAlign, true);
	view.setUint16(32, blockAlign, true);
	view.setUint16(34, BYTES_PER_SAMPLE * 8, true);
	if (extensible(channels)) {
		view.setUint16(36, 22, true); // cbSize: the extension's bytes
		view.setUint16(38, BYTES_PER_SAMPLE * 8, true); // wValidBitsPerSample
		view.setUint32(40, channelMask >>> 0, true); // dwChannelMask
		header.set(KSDATAFORMAT_SUBTYPE_PCM, 44);
	}
	text(20 + fmtBytes, "data");
	view.setUint32(24 + fmtBytes, dataBytes, true);
	return header;
}

/** Quantise interleaved samples to 16-bit after `gain`, clamping to full scale so nothing wraps around. */
export function encodeInterleavedPcm16(samples: Float32Array, gain = 1): Uint8Array {
	const out = new Int16Array(samples.length);
	for (let i = 0; i < samples.length; i++) {
		const sample = Math.max(-1, Math.min(1, (samples[i] as number) * gain));
		out[i] = Math.round(sample < 0 ? sample * 32768 : sample * 32767);
	}
	return new Uint8Array(out.buffer);
}
