/**
 * The `dsp` engine: the embedded default that needs no model files and no GPU. Pitch shift by the job's
 * semitones with formant compensation (Signalsmith Stretch transposing, or, with `pitch_method: "exact"`, stretching
 * time for our resampler and envelope stage: `ExactPitchShifter`), then the voice's timbre (formant shift,
 * brightness), loudness matched to the source and peak limited. Output keeps the source's sample rate and
 * channels, and exactly its length (`AlignedPitchShifter`); each channel is shifted on its own
 * (`ChannelwisePitchShifter`).
 */
import type { VoiceDescriptor } from "../../../../src/contracts/runner.ts";
import { PermanentJobError } from "../../job-errors.ts";
import type { AudioBlock, Engine, EngineInfo, EngineJob, PcmFormat } from "../engine.ts";
import { ChannelwiseExactPitchShifter } from "./exact-pitch-shifter.ts";
import { BrightnessShelf, LoudnessMatcher, PeakLimiter } from "./level-control.ts";
import { ChannelwisePitchShifter, PitchShifter } from "./signalsmith-stretch.ts";
import { DspVoiceParams } from "./voice-params.ts";

export function parseDspVoiceParams(voice: VoiceDescriptor): DspVoiceParams {
	const parsed = DspVoiceParams.safeParse(voice.params);
	if (!parsed.success) {
		// A catalogue error, not the caller's audio: retrying cannot fix it, so fail permanently.
		throw new PermanentJobError("internal", `voice ${voice.id} has invalid dsp params: ${parsed.error.message}`);
	}
	return parsed.data;
}

/**
 * The voice's params with a job's `voice_settings` applied. The engine honours `formant_shift` only (it has no
 * feature index, loudness mix or pitch tracker to set); anything else fails the job permanently, naming it.
 */
export function applyDspVoiceSettings(
	params: DspVoiceParams,
	settings: Readonly<Record<string, unknown>> | undefined,
): DspVoiceParams {
	const { formant_shift, ...others } = settings ?? {};
	const problems = Object.keys(others).map((key) => `voice_settings.${key} is not honoured by the dsp engine`);
	const shift = DspVoiceParams.shape.formant_shift.safeParse(formant_shift);
	if (formant_shift !== undefined && !shift.success) {
		problems.push(`voice_settings.formant_shift must be a number in -12..12, got ${JSON.stringify(formant_shift)}`);
	}
	if (problems.length > 0) throw new PermanentJobError("internal", `invalid voice_settings: ${problems.join("; ")}`);
	return formant_shift === undefined ? params : { ...params, formant_shift: formant_shift as number };
}

/** The voice's pitch shifter (`pitch_method`), one per channel either way. */
async function channelShifter(
	channels: number,
	sampleRate: number,
	semitones: number,
	params: DspVoiceParams,
): Promise<ChannelwisePitchShifter | ChannelwiseExactPitchShifter> {
	const settings = { semitones, formantSemitones: params.formant_shift, formantBaseHz: params.formant_base_hz };
	return params.pitch_method === "exact"
		? ChannelwiseExactPitchShifter.create(channels, sampleRate, settings)
		: ChannelwisePitchShifter.create(channels, sampleRate, { ...settings, tonalityLimitHz: params.tonality_limit_hz });
}

export class DspEngine implements Engine {
	readonly name = "dsp" as const;

	async init(): Promise<EngineInfo> {
		// Self-test: a real shifter instance proves the wasm loads and runs here.
		const shifter = await PitchShifter.create(1, 16_000, {
			semitones: 3,
			formantSemitones: 0,
			formantBaseHz: 0,
			tonalityLimitHz: 8000,
		});
		shifter.process([new Float32Array(256)], 256);
		return { name: this.name, executionProvider: "cpu", details: { library: "signalsmith-stretch" } };
	}

	inputFormat(source: PcmFormat): PcmFormat {
		return { sampleRate: source.sampleRate, channels: source.channels };
	}

	outputFormat(source: PcmFormat): PcmFormat {
		return { sampleRate: source.sampleRate, channels: source.channels };
	}

	async *convert(input: AsyncIterable<AudioBlock>, job: EngineJob, signal: AbortSignal): AsyncIterable<AudioBlock> {
		const params = applyDspVoiceSettings(parseDspVoiceParams(job.voice), job.voiceSettings);
		const { sampleRate, channels } = job.input;
		const shifter = await channelShifter(channels, sampleRate, job.semitones, params);
		const brightness = new BrightnessShelf(sampleRate, channels, params.brightness);
		const loudness = new LoudnessMatcher(sampleRate);
		const limiter = new PeakLimiter(sampleRate);
		const finish = (out: Float32Array[]): AudioBlock => {
			const length = out[0]?.length ?? 0;
			brightness.apply(out, length);
			loudness.apply(out, length);
			limiter.apply(out, length);
			return { sampleRate, channels: out };
		};

		for await (const block of input) {
			signal.throwIfAborted();
			loudness.observeSource(block.channels, block.channels[0]?.length ?? 0);
			for (const out of shifter.push(block.channels)) yield finish(out);
		}
		for (const out of shifter.flush()) {
			signal.throwIfAborted();
			yield finish(out);
		}
	}

	async dispose(): Promise<void> {}
}
