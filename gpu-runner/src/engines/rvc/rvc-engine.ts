/**
 * The `rvc` engine: RVC v2 voice conversion on onnxruntime-node, as RVC's `Pipeline` does it, per chunk:
 *
 *   16 kHz mono ─┬─ ContentVec ──> [frames/2, 768] ── repeat each frame twice ──> phone [frames, 768]
 *                └─ log-mel (128 bands, hop 160) ─ RMVPE ─> salience [frames, 360] ─ local average ─> f0 Hz
 *                   f0 x 2^(semitones/12) ──> pitchf; mel-scale quantisation 1..255 ──> pitch
 *   synthesizer(phone, phone_lengths, pitch, pitchf, ds, rnd) ──> audio at sample_rate, sample_rate/100 per frame
 *
 * Long input is cut at quiet points and joined with crossfades (`chunker.ts`), so memory stays bounded.
 *
 * Artifacts (`job.artifactPaths`): `contentvec`, `rmvpe`, `synthesizer` (ONNX files). Voice params: see
 * `params.ts`; `sample_rate` is required.
 *
 * Compared with RVC's pipeline (details in README.md): the 48 Hz input high-pass runs once, forwards (RVC's
 * filtfilt needs the whole file); not done are feature retrieval from a faiss `index` (and so `protect`, which
 * only acts with an index), `rms_mix_rate`, and peak normalisation of the whole output (it needs the whole
 * file; the WAV encoder clips instead).
 */
import { randomInt } from "node:crypto";
import type { VoiceDescriptor } from "../../../../src/contracts/runner.ts";
import type { AudioBlock, Engine, EngineInfo, EngineJob, PcmFormat } from "../engine.ts";
import { type ChunkWindow, convertInChunks, makeChunkPlan } from "./chunker.ts";
import { RvcEngineError } from "./errors.ts";
import {
	EXECUTION_PROVIDERS,
	type ExecutionProviderName,
	NoExecutionProviderError,
	type ProviderSelection,
	selectExecutionProvider,
} from "./execution-provider.ts";
import { ButterworthHighPass } from "./high-pass.ts";
import { LogMelSpectrogram, RMVPE_HOP, RMVPE_SAMPLE_RATE } from "./mel.ts";
import { type LoadedModels, ModelCache, type ModelRole } from "./models.ts";
import { parseRvcParams, type RvcParams } from "./params.ts";
import { decodeSalience, shiftAndQuantise } from "./pitch.ts";
import { NormalNoise } from "./random.ts";

/** Artifact names an `rvc` voice must carry. */
export const RVC_ARTIFACTS: readonly ModelRole[] = ["contentvec", "rmvpe", "synthesizer"];

export interface RvcChunkStats {
	index: number;
	/** Input samples (16 kHz) the chunk is responsible for, and the converted span with context. */
	segmentSamples: number;
	windowSamples: number;
	frames: number;
	voicedFrames: number;
	milliseconds: {
		contentvec: number;
		mel: number;
		rmvpe: number;
		synthesizer: number;
	};
}

export interface RvcEngineOptions {
	/** Providers to try, in order, each alone. Default: cuda, webgpu, cpu. */
	executionProviders?: readonly ExecutionProviderName[];
	/** CPU threads per session (onnxruntime's default: one per core). */
	intraOpNumThreads?: number;
	/** Loaded model sessions kept across jobs (default 6: two voices). */
	maxCachedModels?: number;
	/** Seed for the synthesizer's noise; by default a random seed per job. Set it for reproducible output. */
	noiseSeed?: number;
	/** Called after each chunk, for metrics and the benchmark. */
	onChunk?: (stats: RvcChunkStats) => void;
}

/** Input samples per ContentVec frame at 16 kHz (HuBERT's feature encoder stride). */
const CONTENTVEC_STRIDE = 320;

/** Default `chunk_seconds` on the CPU provider (30 s elsewhere). */
export const CPU_CHUNK_SECONDS = 10;

const INPUT_FORMAT: PcmFormat = { sampleRate: RMVPE_SAMPLE_RATE, channels: 1 };

function artifactPaths(job: EngineJob): Record<ModelRole, string> {
	const missing = RVC_ARTIFACTS.filter((name) => !job.artifactPaths.has(name));
	if (missing.length > 0) {
		const present = [...job.artifactPaths.keys()].join(", ") || "none";
		throw new RvcEngineError(
			"missing_artifact",
			`rvc voice ${job.voice.id} lacks artifact(s) ${missing.join(", ")} (has: ${present}); an rvc voice needs contentvec, rmvpe and synthesizer ONNX files`,
		);
	}
	return {
		contentvec: job.artifactPaths.get("contentvec") as string,
		rmvpe: job.artifactPaths.get("rmvpe") as string,
		synthesizer: job.artifactPaths.get("synthesizer") as string,
	};
}

/** The job's 16 kHz mono samples, high-passed at 48 Hz as RVC does before anything else. */
async function* monoSamples(input: AsyncIterable<AudioBlock>): AsyncGenerator<Float32Array> {
	const highPass = new ButterworthHighPass(48, RMVPE_SAMPLE_RATE);
	for await (const block of input) {
		const channel = block.channels[0];
		if (block.sampleRate !== RMVPE_SAMPLE_RATE || block.channels.length !== 1 || channel === undefined) {
			throw new RvcEngineError(
				"invalid_input",
				`rvc engine takes 16000 Hz mono blocks, got ${block.sampleRate} Hz with ${block.channels.length} channel(s); resample and downmix first`,
			);
		}
		yield highPass.process(channel);
	}
}

/** Converts one chunk window with the three models. */
async function convertWindow(
	window: ChunkWindow,
	models: LoadedModels,
	params: RvcParams,
	semitones: number,
	mel: LogMelSpectrogram,
	noise: NormalNoise,
	onChunk: RvcEngineOptions["onChunk"],
): Promise<Float32Array> {
	const frames = window.samples.length / RMVPE_HOP;
	const samplesPerFrame = params.sampleRate / 100;
	let started = performance.now();

	const features = await models.contentvec.extract(window.samples);
	const timeContentvec = performance.now() - started;
	if (features.frames < 1)
		throw new RvcEngineError("invalid_model", `contentvec returned no frames for ${window.samples.length} samples`);
	// RVC doubles ContentVec's 50 frames/s to the synthesizer's 100 by repeating each frame
	// (F.interpolate(scale_factor=2), nearest). The doubled count can fall a frame or two short of the
	// audio's; the last frame is repeated so the output keeps the input's duration.
	const phone = new Float32Array(frames * features.dim);
	for (let f = 0; f < frames; f++) {
		const source = Math.min(f >> 1, features.frames - 1);
		phone.set(features.data.subarray(source * features.dim, (source + 1) * features.dim), f * features.dim);
	}

	started = performance.now();
	const spectrogram = mel.compute(window.samples);
	const timeMel = performance.now() - started;
	started = performance.now();
	const salience = await models.rmvpe.salience(spectrogram);
	const timeRmvpe = performance.now() - started;
	// The mel has frames + 1 columns (centred STFT); RVC keeps the first `frames` f0 values (pitch[:p_len]).
	const f0 = decodeSalience(salience, frames, params.f0Threshold);
	const { pitch, pitchf } = shiftAndQuantise(f0, semitones + params.transposeSemitones);

	started = performance.now();
	const rnd = noise.fill(models.synthesizer.noiseChannels * frames, params.noiseScale);
	const audio = await models.synthesizer.synthesize(
		{ phone, frames, pitch, pitchf, speakerId: params.speakerId, rnd },
		samplesPerFrame,
	);
	const timeSynthesizer = performance.now() - started;

	onChunk?.({
		index: window.index,
		segmentSamples: window.segmentEnd - window.segmentStart,
		windowSamples: window.samples.length,
		frames,
		voicedFrames: f0.reduce((n, v) => (v > 0 ? n + 1 : n), 0),
		milliseconds: {
			contentvec: timeContentvec,
			mel: timeMel,
			rmvpe: timeRmvpe,
			synthesizer: timeSynthesizer,
		},
	});
	return audio;
}

export function createRvcEngine(options: RvcEngineOptions = {}): Engine {
	const order = options.executionProviders ?? EXECUTION_PROVIDERS;
	let selection: ProviderSelection | undefined;
	let cache: ModelCache | undefined;
	const mel = new LogMelSpectrogram();

	return {
		name: "rvc",

		async init(): Promise<EngineInfo> {
			try {
				selection = await selectExecutionProvider(order);
			} catch (error) {
				if (error instanceof NoExecutionProviderError) {
					throw new RvcEngineError("no_execution_provider", `rvc engine cannot run here: ${error.message}`, {
						cause: error,
					});
				}
				throw error;
			}
			cache = new ModelCache(
				{
					provider: selection.provider,
					...(options.intraOpNumThreads !== undefined ? { intraOpNumThreads: options.intraOpNumThreads } : {}),
				},
				options.maxCachedModels ?? 6,
			);
			return {
				name: "rvc",
				executionProvider: selection.provider,
				details: { attempts: selection.attempts, artifacts: RVC_ARTIFACTS },
			};
		},

		inputFormat(): PcmFormat {
			return INPUT_FORMAT;
		},

		outputFormat(_source: PcmFormat, voice: VoiceDescriptor): PcmFormat {
			return {
				sampleRate: parseRvcParams(voice.params).sampleRate,
				channels: 1,
			};
		},

		async *convert(input: AsyncIterable<AudioBlock>, job: EngineJob, signal: AbortSignal): AsyncIterable<AudioBlock> {
			if (cache === undefined)
				throw new RvcEngineError("not_ready", "rvc engine used before init() or after dispose()");
			// On the CPU a 30 s chunk takes a minute or more and several GB; shorter chunks keep memory down and
			// let an abort (checked between chunks) take effect sooner.
			const params = parseRvcParams(
				job.voice.params,
				selection?.provider === "cpu" ? { chunkSeconds: CPU_CHUNK_SECONDS } : {},
			);
			if (job.input.sampleRate !== RMVPE_SAMPLE_RATE || job.input.channels !== 1) {
				throw new RvcEngineError(
					"invalid_input",
					`rvc engine takes 16000 Hz mono input, the job says ${job.input.sampleRate} Hz x ${job.input.channels}`,
				);
			}
			const paths = artifactPaths(job);
			const plan = makeChunkPlan({
				inputRate: RMVPE_SAMPLE_RATE,
				outputRate: params.sampleRate,
				hop: RMVPE_HOP,
				cutStep: CONTENTVEC_STRIDE,
				chunkSeconds: params.chunkSeconds,
				searchSeconds: params.chunkSearchSeconds,
				contextSeconds: params.contextSeconds,
				crossfadeSeconds: params.crossfadeSeconds,
			});
			const { models, release } = await cache.acquire(paths);
			try {
				const noise = new NormalNoise(options.noiseSeed ?? randomInt(2 ** 31));
				const convert = (window: ChunkWindow): Promise<Float32Array> =>
					convertWindow(window, models, params, job.semitones, mel, noise, options.onChunk);
				for await (const samples of convertInChunks(monoSamples(input), plan, convert, signal)) {
					yield { sampleRate: params.sampleRate, channels: [samples] };
				}
			} finally {
				release();
			}
		},

		async dispose(): Promise<void> {
			const current = cache;
			cache = undefined;
			await current?.dispose();
		},
	};
}
