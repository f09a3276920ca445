/**
 * Streaming WAV encoder to a local file: 16-bit PCM written block by block, header sizes patched when the
 * stream ends. Writing to disk (not memory) keeps long outputs cheap and gives the upload an exact
 * Content-Length. `finish(frames)` also fits the file to an exact frame count (pads with silence or cuts),
 * which is how the pipeline guarantees output duration = input duration.
 */
import { type FileHandle, open } from "node:fs/promises";
import { type AudioBlock, blockFrames } from "./pcm.ts";

const HEADER_BYTES = 44;
const BYTES_PER_SAMPLE = 2;

/** The size of the WAV this writer makes of `frames` frames of `channels` channels. */
export const wavFileBytes = (frames: number, channels: number) => HEADER_BYTES + frames * channels * BYTES_PER_SAMPLE;

export interface WavFileInfo {
	path: string;
	sizeBytes: number;
	frames: number;
	sampleRate: number;
	channels: number;
}

export class WavFileWriter {
	readonly path: string;
	readonly sampleRate: number;
	readonly channels: number;
	#file: FileHandle;
	#frames = 0;

	private constructor(path: string, file: FileHandle, sampleRate: number, channels: number) {
		this.path = path;
		this.#file = file;
		this.sampleRate = sampleRate;
		this.channels = channels;
	}

	static async create(path: string, sampleRate: number, channels: number): Promise<WavFileWriter> {
		const file = await open(path, "w+");
		await file.write(wavHeader(0, sampleRate, channels), 0, HEADER_BYTES, 0);
		return new WavFileWriter(path, file, sampleRate, channels);
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
		const bytes = encodePcm16(block);
		await this.#file.write(bytes, 0, bytes.length, HEADER_BYTES + this.#frames * this.#blockAlign);
		this.#frames += blockFrames(block);
	}

	/** Fit to `targetFrames` (when given), patch the header, close. */
	async finish(targetFrames?: number): Promise<WavFileInfo> {
		if (targetFrames !== undefined && targetFrames !== this.#frames) {
			if (targetFrames > this.#frames) {
				const padding = new Uint8Array((targetFrames - this.#frames) * this.#blockAlign);
				await this.#file.write(padding, 0, padding.length, HEADER_BYTES + this.#frames * this.#blockAlign);
			} else {
				await this.#file.truncate(HEADER_BYTES + targetFrames * this.#blockAlign);
			}
			this.#frames = targetFrames;
		}
		await this.#file.write(
			wavHeader(this.#frames * this.#blockAlign, this.sampleRate, this.channels),
			0,
			HEADER_BYTES,
			0,
		);
		await this.#file.close();
		return {
			path: this.path,
			sizeBytes: HEADER_BYTES + this.#frames * this.#blockAlign,
			frames: this.#frames,
			sampleRate: this.sampleRate,
			channels: this.channels,
		};
	}

	async abort(): Promise<void> {
		await this.#file.close().catch(() => {});
	}

	get #blockAlign(): number {
		return this.channels * BYTES_PER_SAMPLE;
	}
}

export function wavHeader(dataBytes: number, sampleRate: number, channels: number): Uint8Array {
	const header = new Uint8Array(HEADER_BYTES);
	const view = new DataView(header.buffer);
	const text = (offset: number, value: string) => {
		for (let i = 0; i < value.length; i++) header[offset + i] = value.charCodeAt(i);
	};
	const blockAlign = channels * BYTES_PER_SAMPLE;
	text(0, "RIFF");
	view.setUint32(4, 36 + dataBytes, true);
	text(8, "WAVE");
	text(12, "fmt ");
	view.setUint32(16, 16, true);
	view.setUint16(20, 1, true); // PCM
	view.setUint16(22, channels, true);
	view.setUint32(24, sampleRate, true);
	view.setUint32(28, sampleRate * blockAlign, true);
	view.setUint16(32, blockAlign, true);
	view.setUint16(34, BYTES_PER_SAMPLE * 8, true);
	text(36, "data");
	view.setUint32(40, dataBytes, true);
	return header;
}

/** Interleave and quantise to 16-bit, clamping to full scale so nothing wraps around. */
export function encodePcm16(block: AudioBlock): Uint8Array {
	const frames = blockFrames(block);
	const channels = block.channels.length;
	const out = new Int16Array(frames * channels);
	for (let c = 0; c < channels; c++) {
		const channel = block.channels[c] as Float32Array;
		for (let i = 0; i < frames; i++) {
			const sample = Math.max(-1, Math.min(1, channel[i] as number));
			out[i * channels + c] = Math.round(sample < 0 ? sample * 32768 : sample * 32767);
		}
	}
	return new Uint8Array(out.buffer);
}
