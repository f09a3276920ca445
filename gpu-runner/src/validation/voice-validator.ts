/**
 * A `validate_voice` lease: an account's uploaded voice is checked the way a conversion would use it, so a voice
 * that becomes `ready` converts, and one that cannot says why. In order:
 * 1. every file is downloaded into the artifact cache under its sha256 (the checksum conversions will name);
 * 2. the model is read with the RVC readers (`inspectModelFile`: a `.pth` checkpoint or a synthesizer `.onnx`), the
 *    index with the faiss reader; they must fit: the index's width is the model's feature width, the sample rate is
 *    one RVC synthesizers make, and settings that need pitch or an index find them;
 * 3. the synthesizer is built and cached (`synthesizerOnnxPath`), and one second is converted through the rvc
 *    engine with the deployment's base models as a self-test (a v1 model with its `contentvec_v1`, where set);
 * 4. the sample, if any, is decoded and its typical pitch range measured (for `pitch_shift: "auto"`).
 * A problem with the files is an outcome (`failed`, with a message naming the file and the fault); anything else
 * (a download that broke off, a missing base model) is thrown, and the lease loop reports it as transient.
 */
import {
	RVC_V1_FEATURE_DIM,
	RVC_V2_FEATURE_DIM,
	sharedModelsFor,
	type VoiceDescriptor,
	type VoiceValidationLease,
	type VoiceValidationReport,
} from "../../../src/contracts/runner.ts";
import { RVC_SETTING_NEEDS, withPitchTracker } from "../../../src/contracts/rvc-setting-needs.ts";
import type { ArtifactCache } from "../artifacts/artifact-cache.ts";
import { decodeSource } from "../audio/decode-source.ts";
import type { AudioBlock, Engine } from "../engines/engine.ts";
import { FeatureWidthMismatch } from "../engines/rvc/errors.ts";
import { readFaissIndexWidth } from "../engines/rvc/faiss-index.ts";
import { inspectModelFile } from "../engines/rvc/model-inspection.ts";
import { synthesizerOnnxPath } from "../engines/rvc/synthesizer-file.ts";
import { measurePitch } from "../pipeline/auto-pitch.ts";
import { downloadSource, TransferError } from "../storage/transfer.ts";

/** Sample rates RVC's checkpoints are trained at. */
const RVC_SAMPLE_RATES = [32_000, 40_000, 48_000];
const SELF_TEST_SECONDS = 1;

export type VoiceValidator = (lease: VoiceValidationLease, signal: AbortSignal) => Promise<VoiceValidationReport>;

class FileProblem extends Error {
	readonly problem: string;

	constructor(problem: string, message: string) {
		super(message);
		this.problem = problem;
	}
}

const refuse = (problem: string, message: string): never => {
	throw new FileProblem(problem, message);
};

interface ModelFacts {
	sampleRate: number;
	f0: boolean;
	featureDim: number | null;
	version: string | null;
}

async function readModel(path: string): Promise<ModelFacts> {
	const facts = await inspectModelFile(path);
	if (facts.refused) {
		const reason = withoutFilePaths(facts.refused.message, new Map([["model", path]]));
		refuse(facts.refused.problem, `The model file cannot be used: ${reason}`);
	}
	if (facts.kind === "onnx" && facts.role !== "synthesizer") {
		refuse(
			"not_a_synthesizer",
			"The model file is an ONNX model without RVC's synthesizer inputs (phone, phone_lengths, ds, rnd); export the synthesizer, or upload the .pth",
		);
	}
	if (facts.kind !== "rvc_checkpoint" && facts.kind !== "onnx") {
		refuse("unrecognised_model", "The model file is neither an RVC checkpoint (.pth) nor an ONNX synthesizer");
	}
	const sampleRate = facts.sample_rate;
	if (typeof sampleRate !== "number" || !Number.isInteger(sampleRate) || sampleRate % 100 !== 0) {
		refuse(
			"sample_rate",
			`The model's output sample rate could not be established (got ${String(sampleRate)}); RVC synthesizers make 32000, 40000 or 48000 Hz`,
		);
	}
	if (facts.kind === "rvc_checkpoint" && !RVC_SAMPLE_RATES.includes(sampleRate as number)) {
		refuse("sample_rate", `The checkpoint's sample rate is ${sampleRate} Hz; RVC models are 32000, 40000 or 48000 Hz`);
	}
	return {
		sampleRate: sampleRate as number,
		f0: facts.f0 === 1,
		featureDim: typeof facts.feature_dim === "number" ? facts.feature_dim : null,
		version: typeof facts.version === "string" ? facts.version : null,
	};
}

/**
 * The index's width is compared with the model's from the file's first 8 bytes (`readFaissIndexWidth`) before the
 * file is read through, so an index of another width (up to 1 GB) is refused without reading its body; one of the
 * model's width, or whose width the header does not tell, is then read in full.
 */
async function checkIndex(path: string, model: ModelFacts): Promise<void> {
	if (model.featureDim !== null) {
		const stated = await readFaissIndexWidth(path);
		if (stated !== undefined && stated !== model.featureDim) refuseIndexWidth(stated, model.featureDim);
	}
	const facts = await inspectModelFile(path);
	if (facts.kind !== "faiss_index") refuse("invalid_index", "The index file is not a faiss index");
	if (facts.refused) {
		const reason = withoutFilePaths(facts.refused.message, new Map([["index", path]]));
		refuse(facts.refused.problem, `The index file cannot be used: ${reason}`);
	}
	if (model.featureDim !== null && facts.dim !== model.featureDim) refuseIndexWidth(facts.dim, model.featureDim);
}

const refuseIndexWidth = (indexDim: unknown, featureDim: number): never =>
	refuse(
		"index_width_mismatch",
		`The index holds ${String(indexDim)}-wide features but the model reads ${featureDim}-wide ones ` +
			"(RVC v1 models use 256, v2 models 768): upload the index trained with this model",
	);

function checkSettings(settings: Record<string, unknown>, model: ModelFacts, hasIndex: boolean): void {
	const given = Object.entries(RVC_SETTING_NEEDS).filter(([key]) => settings[key] !== undefined);
	for (const [key, needs] of given) {
		if (needs.index && !hasIndex)
			refuse("settings", `voice_settings.${key} needs a feature index, and this voice has none`);
	}
	if (settings.formant_shift !== undefined && settings.formant_shift !== 0) {
		refuse("settings", "voice_settings.formant_shift must be 0 for an RVC voice: the model fixes the timbre");
	}
	for (const [key, needs] of given) {
		if (needs.pitch && !model.f0) {
			refuse("settings", `voice_settings.${key} does not apply: this model has no pitch input (f0 = 0)`);
		}
	}
}

/** One second of a voiced tone at the format the engine wants. */
async function* toneBlocks(sampleRate: number, channels: number): AsyncGenerator<AudioBlock> {
	const length = sampleRate * SELF_TEST_SECONDS;
	const samples = Float32Array.from({ length }, (_, i) => 0.3 * Math.sin((2 * Math.PI * 220 * i) / sampleRate));
	yield { sampleRate, channels: Array.from({ length: channels }, () => samples.slice()) };
}

/** What a customer can do about a model of another generation than the deployment's feature model. */
function featureWidthMessage({ featureDim, phoneDim }: FeatureWidthMismatch): string {
	const generation = (dim: number) =>
		dim === RVC_V1_FEATURE_DIM ? "RVC v1" : dim === RVC_V2_FEATURE_DIM ? "RVC v2" : `${dim}-wide`;
	return `The model reads ${phoneDim}-wide features (${generation(phoneDim)}), but this service extracts ${featureDim}-wide ones (${generation(featureDim)}) for every voice: use a model trained as ${generation(featureDim)}`;
}

async function selfTest(engine: Engine, voice: VoiceDescriptor, paths: Map<string, string>, signal: AbortSignal) {
	const input = engine.inputFormat({ sampleRate: 16_000, channels: 1 }, voice);
	let frames = 0;
	let outputRate = 0;
	try {
		// Transient: the voice is not serving yet, so its models and index are not kept, nor do they evict the
		// voices the runner's jobs use.
		const job = { voice, semitones: 0, artifactPaths: paths, input, transient: true };
		for await (const block of engine.convert(toneBlocks(input.sampleRate, input.channels), job, signal)) {
			outputRate = block.sampleRate;
			for (const channel of block.channels) {
				if (!channel.every(Number.isFinite)) refuse("self_test", "Converting a test second gave non-finite samples");
			}
			frames += block.channels[0]?.length ?? 0;
		}
	} catch (error) {
		if (error instanceof FileProblem || signal.aborted) throw error;
		if (error instanceof FeatureWidthMismatch) refuse("unsupported_feature_width", featureWidthMessage(error));
		const message = error instanceof Error ? error.message : String(error);
		refuse("self_test", `Converting a test second failed: ${withoutFilePaths(message, paths)}`);
	}
	const seconds = outputRate > 0 ? frames / outputRate : 0;
	if (Math.abs(seconds - SELF_TEST_SECONDS) > 0.01) {
		refuse("self_test", `Converting a test second gave ${seconds.toFixed(3)} s of audio`);
	}
}

/**
 * An engine's message as the voice's owner may read it: the runner's own file paths (its artifact cache) taken
 * out; the message names each file by what it is already ("contentvec model ... gives 768-d features").
 */
export function withoutFilePaths(message: string, paths: ReadonlyMap<string, string>): string {
	let text = message;
	for (const path of paths.values()) text = text.split(path).join("");
	return text
		.replace(/(^|[\s(])\/[^\s,;)]+/g, "$1")
		.replace(/\s{2,}/g, " ")
		.replace(/ :/g, ":")
		.trim();
}

async function measureSample(url: string, signal: AbortSignal) {
	try {
		const profile = await measurePitch(decodeSource(downloadSource(url, signal)));
		return profile ? { low: profile.lowHz, high: profile.highHz } : null;
	} catch (error) {
		// A download that failed is no fault of the sample: thrown, and retried like any transient failure.
		if (signal.aborted || error instanceof TransferError) throw error;
		return refuse(
			"invalid_sample",
			`The sample could not be decoded: ${error instanceof Error ? error.message : String(error)}`,
		);
	}
}

export function createVoiceValidator(options: { artifacts: ArtifactCache; engine: Engine }): VoiceValidator {
	return async (lease, signal) => {
		// The voice's files and the base models stay in the cache until validation is over.
		const held = options.artifacts.hold();
		try {
			const stored = new Map<string, { path: string; sha256: string; sizeBytes: number }>();
			for (const file of lease.files) {
				if (file.role === "sample") continue;
				stored.set(file.role, await held.adopt(file.url, file.role, signal));
			}
			const model = stored.get("model") ?? refuse("missing_model", "The voice has no model file");
			const facts = await readModel(model.path);
			const index = stored.get("index");
			if (index) await checkIndex(index.path, facts);
			checkSettings(lease.voice_settings, facts, index !== undefined);

			// The base models as a conversion of this voice will get them (a v1 model gets the deployment's
			// contentvec_v1 as its ContentVec); only those are downloaded.
			const bases = sharedModelsFor(lease.base_models, { featureDim: facts.featureDim, own: new Set() }).map(
				({ name, base }) => ({ ...base, name }),
			);
			if (!bases.some((base) => base.name === "contentvec")) {
				// The deployment's fault, not the voice's: thrown, so the job is retried once an operator sets it.
				throw new Error("this deployment has no ContentVec base model (admin base-model set contentvec)");
			}
			const paths = await held.ensureAll(bases, signal);
			paths.set("synthesizer", await synthesizerOnnxPath(model.path));
			if (index) paths.set("index", index.path);
			// Tested as its conversions will run: with YIN where neither its defaults nor the deployment give RMVPE.
			const carriesRmvpe = bases.some((base) => base.name === "rmvpe");
			if (facts.f0 && !carriesRmvpe && lease.voice_settings.f0_method === "rmvpe") {
				refuse(
					"settings",
					'voice_settings.f0_method is "rmvpe", and this service has no RMVPE model to track pitch with: use f0_method "yin", or leave it out',
				);
			}
			const voice: VoiceDescriptor = {
				id: lease.voice_id,
				name: lease.voice_name,
				engine: "rvc",
				params: withPitchTracker(
					{ ...lease.voice_settings, sample_rate: facts.sampleRate, f0: facts.f0 },
					null,
					carriesRmvpe,
				),
				artifacts: [],
				account_voice: true,
			};
			await selfTest(options.engine, voice, paths, signal);

			const sample = lease.files.find((file) => file.role === "sample");
			const pitchRange = sample ? await measureSample(sample.url, signal) : null;
			return {
				outcome: "ready",
				files: [...stored].map(([role, file]) => ({
					role: role as "model" | "index" | "image",
					sha256: file.sha256,
					size_bytes: file.sizeBytes,
				})),
				model: { sample_rate: facts.sampleRate, f0: facts.f0, feature_dim: facts.featureDim, version: facts.version },
				pitch_range_hz: pitchRange,
			};
		} catch (error) {
			if (error instanceof FileProblem) return { outcome: "failed", problem: error.problem, message: error.message };
			throw error;
		} finally {
			held.release();
		}
	};
}
