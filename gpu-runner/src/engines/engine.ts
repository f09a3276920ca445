/**
 * The one interface every conversion engine implements. Engines see planar float PCM in blocks, never a
 * whole file, so a long source never sits in memory as floats. The pipeline around an engine decodes the
 * source, trims previews, converts to the engine's `inputFormat` (resample, downmix), and encodes what the
 * engine yields as WAV in its `outputFormat`.
 *
 * Contract: the total duration an engine yields equals the duration it was given, within 10 ms.
 */
import type { EngineName, VoiceDescriptor } from "../../../src/contracts/runner.ts";

export interface PcmFormat {
	sampleRate: number;
	channels: number;
}

/** Planar PCM: `channels[c][i]` is sample i of channel c, nominally in [-1, 1]. All channels have the same length. */
export interface AudioBlock {
	sampleRate: number;
	channels: Float32Array[];
	/**
	 * The speakers the channels are for, as WAVE_FORMAT_EXTENSIBLE's `dwChannelMask` (front left 0x1, front right
	 * 0x2, front centre 0x4, LFE 0x8, ...; 0: none stated), where the source states them: a WAV's extensible header,
	 * a FLAC's `WAVEFORMATEXTENSIBLE_CHANNEL_MASK` tag, else FLAC's fixed layouts of 3 to 8 channels. Set by the
	 * decoders; the pipeline reads it from the source's first block for an output that keeps the source's channels.
	 */
	channelMask?: number;
}

export interface EngineJob {
	voice: VoiceDescriptor;
	/** Pitch shift in semitones, -12..12. */
	semitones: number;
	/** Local paths of the voice's model artifacts, by artifact name, already verified by checksum. */
	artifactPaths: ReadonlyMap<string, string>;
	/** Format of the blocks `convert` will receive (the engine's `inputFormat` for this job). */
	input: PcmFormat;
	/**
	 * How many frames (in `input`'s format) the source is expected to give, where its duration is known: for
	 * whole-file arithmetic such as rvc's `rms_mix_rate`. The blocks may still end a little earlier or later.
	 */
	inputFrames?: number;
	/**
	 * Per-job overrides of the voice's settings (the lease's `voice_settings`, e.g. `index_rate`), unvalidated:
	 * the engine checks them and fails the job permanently on anything it cannot honour.
	 */
	voiceSettings?: Readonly<Record<string, unknown>>;
	/**
	 * A one-off job (a voice's validation self-test): what it loads is not kept after it, and loading it does not
	 * evict what the runner's jobs use. Engines that keep nothing may ignore it.
	 */
	transient?: boolean;
}

export interface EngineInfo {
	name: EngineName;
	/** Where inference runs, e.g. `cpu`, `cuda`, `webgpu`; reported in health and metrics. */
	executionProvider: string;
	details?: Record<string, unknown>;
}

export interface Engine {
	readonly name: EngineName;
	/** Load runtimes and run a self-test; throws if the engine cannot run on this machine. */
	init(): Promise<EngineInfo>;
	/** The format the engine wants its input in, given the source format and voice. */
	inputFormat(source: PcmFormat, voice: VoiceDescriptor): PcmFormat;
	/** The format of the blocks `convert` yields. */
	outputFormat(source: PcmFormat, voice: VoiceDescriptor): PcmFormat;
	/** Semitones the engine adds to every job's shift for this voice (none if absent); `auto` pitch counts them. */
	transposeSemitones?(voice: VoiceDescriptor): number;
	/**
	 * Optional: load and warm whatever a voice needs (model sessions, kernels tuned for its shapes), so its
	 * first job pays only for the conversion. The runner calls it at start for voices it converted before.
	 */
	prepare?(voice: VoiceDescriptor, artifactPaths: ReadonlyMap<string, string>): Promise<void>;
	/**
	 * Optional: drop what the engine keeps loaded from these artifact files (a deleted voice's own): at once where no
	 * job uses it, else when the last job using it is done, which runs on undisturbed.
	 */
	forget?(artifactPaths: readonly string[]): Promise<void>;
	/** Convert a stream of blocks. Must stop promptly when `signal` aborts. */
	convert(input: AsyncIterable<AudioBlock>, job: EngineJob, signal: AbortSignal): AsyncIterable<AudioBlock>;
	/** Release models and sessions. */
	dispose(): Promise<void>;
}
