/**
 * The admin commands: parse arguments, check them, and act through an `AdminBackend`. Every command prints
 * one JSON document; a client secret is printed once, at creation, and only its hash is stored.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import { DspVoiceParams } from "../../gpu-runner/src/engines/dsp/voice-params.ts";
import {
	contentVecLayoutProblem,
	rmvpeLayoutProblem,
	type TensorMeta,
} from "../../gpu-runner/src/engines/rvc/feature-model-layout.ts";
import { CPU_PARAM_DEFAULTS, parseRvcParams } from "../../gpu-runner/src/engines/rvc/params.ts";
import { RVC_V1_FEATURE_DIM, RVC_V2_FEATURE_DIM, sharedModelsFor } from "../../src/contracts/runner.ts";
import { RVC_MODEL_FACTS, RVC_SETTING_NEEDS } from "../../src/contracts/rvc-setting-needs.ts";
import { VoiceSettings } from "../../src/contracts/voice-conversions.ts";
import type { AdminBackend } from "./admin-backend.ts";
import {
	BASE_MODEL_NAMES,
	type BaseModelName,
	baseModelKey,
	createAccount,
	createClient,
	createVoice,
	revokeClient,
	setBaseModel,
	updateVoice,
	VOICE_ENGINES,
	type VoiceFields,
	voiceObjectKeys,
} from "./provisioning.ts";
import { samplePitchRange } from "./sample-pitch.ts";
import { sqlValue } from "./sql.ts";

export class UsageError extends Error {}

export const USAGE = `Usage: npm run admin -- <command> [options] [--remote [--env NAME]] [--persist-to DIR]

  account create --name NAME
  account list
  client create --account ACCOUNT_ID [--name NAME]          API client (scope voice-conversion-api/base)
  runner-client create --account ACCOUNT_ID [--name NAME]   GPU runner client (scope voice-conversion-api/runner)
  client revoke --id CLIENT_ID
  base-model set contentvec|contentvec_v1|rmvpe FILE.onnx   shared by every rvc voice (stored by sha256);
                                                            contentvec_v1 (optional): 256-wide, for v1 voices
  base-model list
  voice create --name NAME [--engine dsp|rvc] [--tags a,b] [--params JSON]
               [--model FILE.pth|FILE.onnx] [--index FILE.index] [--pitch-range LOW-HIGH]
               [--image FILE] [--sample FILE] [--artifact NAME=FILE ...]
  voice update (--id VOICE_ID | --name NAME) [--rename NEW] [--engine ...] [--tags ...] [--params JSON]
               [--model FILE] [--index FILE] [--pitch-range LOW-HIGH]
               [--image FILE] [--sample FILE] [--artifact NAME=FILE ...] [--active true|false]
  voice list

voice commands act on the service's voices; an account's own voices are its to manage, through the API.

rvc voices: --model is the synthesizer (RVC's .pth checkpoint or an ONNX export), --index its feature index; both
are recognised by their bytes. --params holds the voice's defaults: sample_rate, index_rate, protect,
rms_mix_rate, f0_method, transpose_semitones. Whether the model takes pitch (f0) and the width of the features it
reads (feature_dim) are read from --model and kept with them: f0_method is refused for a model without pitch
input, an --index given later must match the width, and a v1 model (256-wide) needs the base model
contentvec_v1 or its own --artifact contentvec=FILE (a v2 model, 768-wide, a 768-wide contentvec or its own).
The pitch range (Hz, for pitch_shift "auto") is measured from --sample unless --pitch-range gives it.
--artifact adds another file the voice's engine reads (contentvec or rmvpe in place of the base model, checked as
base-model set checks one); the model and index go by --model and --index, which check them.

Local D1/R2 (the ones \`npm run dev\` uses) by default; --remote acts on the deployed ones through wrangler.`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function required(value: string | undefined, flag: string): string {
	if (!value?.trim()) throw new UsageError(`--${flag} is required`);
	return value.trim();
}

function uuid(value: string | undefined, flag: string): string {
	const v = required(value, flag);
	if (!UUID.test(v)) throw new UsageError(`--${flag} must be a UUID, got "${v}"`);
	return v.toLowerCase();
}

/** Recognises a file by its first bytes, never by its name. */
function sniff(bytes: Uint8Array, kind: "image" | "audio"): { contentType: string; extension: string } | null {
	const ascii = (from: number, to: number) => String.fromCharCode(...bytes.subarray(from, to));
	if (kind === "image") {
		if (bytes[0] === 0x89 && ascii(1, 4) === "PNG") return { contentType: "image/png", extension: "png" };
		if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff)
			return { contentType: "image/jpeg", extension: "jpg" };
		if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WEBP") return { contentType: "image/webp", extension: "webp" };
		return null;
	}
	if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WAVE") return { contentType: "audio/wav", extension: "wav" };
	if (ascii(0, 4) === "fLaC") return { contentType: "audio/flac", extension: "flac" };
	if (ascii(0, 3) === "ID3" || (bytes[0] === 0xff && ((bytes[1] ?? 0) & 0xe0) === 0xe0)) {
		return { contentType: "audio/mpeg", extension: "mp3" };
	}
	return null;
}

async function readInput(file: string, kind: "image" | "audio" | "artifact" | "model" | "index" | "base model") {
	let bytes: Buffer;
	try {
		bytes = await readFile(path.resolve(file));
	} catch (error) {
		throw new UsageError(`Cannot read ${kind} file ${file}: ${(error as Error).message}`);
	}
	if (bytes.length === 0) throw new UsageError(`${kind} file ${file} is empty`);
	return bytes;
}

interface VoiceOptions {
	engine?: string;
	tags?: string;
	params?: string;
	image?: string;
	sample?: string;
	artifact?: string[];
	model?: string;
	index?: string;
	"pitch-range"?: string;
	active?: string;
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

type ModelInspection = Awaited<
	ReturnType<typeof import("../../gpu-runner/src/engines/rvc/model-inspection.ts").inspectModelFile>
>;

/**
 * Reads a model file and has the runner's own readers inspect it: the kind from its bytes, then every fact the
 * runner will rely on (a checkpoint is read in full, an ONNX model loaded, an index parsed). Loaded on demand, so
 * the other commands never start onnxruntime.
 */
async function inspectModel(
	file: string,
	/** How the file was given, for messages: a flag (`model`, `index`), or `base-model` (a positional FILE). */
	flag: "model" | "index" | "base-model",
	/** True takes the file; false, or why not, refuses it. */
	accept: (inspection: ModelInspection) => boolean | string,
	what: string,
	/** How messages name the file, where not by `flag`. */
	given = flag === "base-model" ? file : `--${flag} ${file}`,
): Promise<{ bytes: Buffer; inspection: ModelInspection }> {
	const bytes = await readInput(file, flag === "index" ? "index" : flag === "base-model" ? "base model" : "model");
	const { inspectModelFile } = await import("../../gpu-runner/src/engines/rvc/model-inspection.ts");
	const inspection = await inspectModelFile(path.resolve(file));
	const verdict = accept(inspection);
	if (verdict !== true) {
		const why = typeof verdict === "string" ? `: ${verdict}` : "";
		const found = inspection.kind === "unknown" ? "" : ` (it is ${describeKind(inspection)}${why})`;
		throw new UsageError(`${given} is not ${what}${found}`);
	}
	if (inspection.refused) throw new UsageError(`${given} cannot be used: ${inspection.refused.message}`);
	return { bytes, inspection };
}

const describeKind = (inspection: ModelInspection) =>
	inspection.kind === "onnx"
		? `an ONNX model, role ${String(inspection.role)}`
		: `a ${inspection.kind.replace("_", " ")}`;

const isSynthesizer = (inspection: ModelInspection) =>
	inspection.kind === "rvc_checkpoint" || (inspection.kind === "onnx" && inspection.role === "synthesizer");

/**
 * Why an ONNX model cannot be this base model: the layout the rvc engine checks as it loads one (ContentVec 16 kHz
 * audio in, RMVPE a `[1, 128, frames]` log-mel in and 360 bins out: `feature-model-layout.ts`), and for ContentVec
 * what only shows when it runs: one audio channel in, features as wide as some RVC voice's (768 for v2, 256 for v1)
 * out. RMVPE set as contentvec, say, loads, then fails every rvc conversion.
 */
function baseModelLayoutProblem(name: BaseModelName, inspection: ModelInspection): string | undefined {
	const inputs = (inspection.inputs ?? []) as TensorMeta[];
	const outputs = (inspection.outputs ?? []) as TensorMeta[];
	if (name === "rmvpe") return rmvpeLayoutProblem(inputs, outputs);
	const problem = contentVecLayoutProblem(inputs, outputs);
	if (problem !== undefined) return problem;
	const channels = inputs[0]?.shape?.length === 3 ? inputs[0].shape[1] : 1;
	if (typeof channels === "number" && channels !== 1) return `its input takes ${channels} channels, not 1`;
	const width = featureWidth(name, inspection);
	if (width !== null && width !== RVC_V2_FEATURE_DIM && width !== RVC_V1_FEATURE_DIM)
		return `its features are ${width} wide, not ${RVC_V2_FEATURE_DIM} or ${RVC_V1_FEATURE_DIM}`;
	if (name === "contentvec_v1" && width !== null && width !== RVC_V1_FEATURE_DIM)
		return `its features are ${width} wide; contentvec_v1 is the ContentVec of RVC v1 voices, ${RVC_V1_FEATURE_DIM} wide`;
	return undefined;
}

/** Takes an ONNX model of the base model's layout (`baseModelLayoutProblem`), for base-model set and a voice's own. */
const baseModelVerdict = (name: BaseModelName) => (inspection: ModelInspection) =>
	inspection.kind === "onnx" && inspection.role !== "synthesizer" && (baseModelLayoutProblem(name, inspection) ?? true);

/** A ContentVec's feature width, where its outputs say (null for RMVPE, or one that leaves it symbolic). */
function featureWidth(name: BaseModelName, inspection: ModelInspection): number | null {
	const width = name === "rmvpe" ? undefined : (inspection.outputs as TensorMeta[] | undefined)?.[0]?.shape?.[2];
	return typeof width === "number" ? width : null;
}

const BASE_MODEL_LAYOUTS: Record<BaseModelName, string> = {
	contentvec: "a ContentVec ONNX model (16 kHz audio [1, 1, samples] in, [1, frames, 768] features out)",
	contentvec_v1:
		"a ContentVec ONNX model for RVC v1 voices, e.g. RVC's vec-256-layer-9 (16 kHz audio in, [1, frames, 256] features out)",
	rmvpe: "an RMVPE ONNX model ([1, 128, frames] log-mel in, [1, frames, 360] pitch salience out)",
};

/**
 * Refuses an rvc voice whose conversions would get a ContentVec of another width than its model reads, as every one
 * of them would fail: its own `--artifact contentvec`, else the deployment's as leases give it (`sharedModelsFor`: a
 * v1 model gets contentvec_v1 where set, or a contentvec that is itself 256 wide, in a deployment of v1 voices). A
 * base model set before widths were recorded is not held against it.
 */
async function checkContentVecWidth(
	backend: AdminBackend,
	voice: {
		/** `--model`, where one is given, and the width it reads. */
		model: string | undefined;
		modelWidth: number | null;
		/** The width the voice's model reads: the new model's, or the one recorded for the current one. */
		featureDim: number | null;
		own: { spec: string; width: number | null } | undefined;
		ownsContentVec: boolean;
	},
): Promise<void> {
	const { model, modelWidth, featureDim, own } = voice;
	if (typeof own?.width === "number" && featureDim !== null && own.width !== featureDim) {
		const reader = modelWidth !== null ? `--model ${model} reads` : "the voice's model reads";
		throw new UsageError(
			`--artifact ${own.spec} gives ${own.width}-wide features, but ${reader} ${featureDim}-wide ones: give a ContentVec of the model's width`,
		);
	}
	if ((modelWidth !== RVC_V1_FEATURE_DIM && modelWidth !== RVC_V2_FEATURE_DIM) || voice.ownsContentVec) return;
	const bases = await backend.query<{ name: string; feature_dim: number | null }>(
		"SELECT name, feature_dim FROM base_models WHERE name IN ('contentvec', 'contentvec_v1')",
	);
	const fed = sharedModelsFor(bases, { featureDim: modelWidth, own: new Set() }).find(
		(shared) => shared.name === "contentvec",
	);
	const width = fed?.base.feature_dim;
	if (typeof width !== "number" || width === modelWidth) return;
	const ownInstead = "or give the voice its own (--artifact contentvec=FILE.onnx)";
	throw new UsageError(
		modelWidth === RVC_V1_FEATURE_DIM
			? `--model ${model} reads 256-wide features (RVC v1), but the deployment's ContentVec gives ${width}-wide ones: set one for v1 voices first (base-model set contentvec_v1 FILE.onnx, e.g. RVC's vec-256-layer-9), ${ownInstead}`
			: `--model ${model} reads 768-wide features (RVC v2), but the deployment's ContentVec gives ${width}-wide ones: set a 768-wide one as contentvec (base-model set contentvec FILE.onnx; the 256-wide one serves v1 voices as contentvec_v1), ${ownInstead}`,
	);
}

/** `LOW-HIGH` in Hz, e.g. `165-330`. */
function pitchRange(value: string): { low: number; high: number } {
	const match = /^\s*(\d+(?:\.\d+)?)\s*-\s*(\d+(?:\.\d+)?)\s*$/.exec(value);
	const low = Number(match?.[1]);
	const high = Number(match?.[2]);
	if (!match || !(low >= 30 && high <= 2000 && low < high)) {
		throw new UsageError(
			`--pitch-range must be LOW-HIGH in Hz with 30 <= LOW < HIGH <= 2000, e.g. 165-330; got "${value}"`,
		);
	}
	return { low, high };
}

/** The defaults an rvc voice keeps in its params: the per-conversion settings' ranges, and a transpose. */
function checkRvcParams(params: Record<string, unknown>): void {
	const { sample_rate, transpose_semitones, index_rate, protect, rms_mix_rate, f0_method, formant_shift } = params;
	const problems: string[] = [];
	const settings = VoiceSettings.safeParse({ index_rate, protect, rms_mix_rate, f0_method });
	if (!settings.success) problems.push(...settings.error.issues.map((i) => `${i.path.join(".")} ${i.message}`));
	if (formant_shift !== undefined && formant_shift !== 0) problems.push("formant_shift must be 0 for rvc voices");
	if (sample_rate !== undefined && !(Number.isInteger(sample_rate) && (sample_rate as number) % 100 === 0)) {
		problems.push("sample_rate must be a whole number of Hz divisible by 100 (RVC: 32000, 40000 or 48000)");
	}
	const transpose = transpose_semitones as number;
	if (transpose_semitones !== undefined && !(typeof transpose === "number" && transpose >= -24 && transpose <= 24)) {
		problems.push("transpose_semitones must be a number from -24 to 24");
	}
	if (problems.length > 0) throw new UsageError(`--params for an rvc voice: ${problems.join("; ")}`);
}

/**
 * The rest of an rvc voice's params (chunking, noise, speaker), by the runner's own rules, which refuse the job:
 * as a GPU runner reads them and as a CPU runner does (with its shorter chunks by default), so that no runner refuses
 * the voice. `chunk_seconds` 4 alone, say, suits the CPU's 0.75 s cut search but not the 5 s one elsewhere.
 */
function checkRvcEngineParams(params: Record<string, unknown>): void {
	for (const defaults of [{}, CPU_PARAM_DEFAULTS]) {
		try {
			parseRvcParams(params, defaults);
		} catch (error) {
			const message = (error as Error).message.replace(/^invalid rvc voice params: /, "");
			throw new UsageError(`--params for an rvc voice: ${message}`);
		}
	}
}

/** A dsp voice's params, by the runner's own schema (a voice it refuses fails every conversion). */
function checkDspParams(params: Record<string, unknown>): void {
	const parsed = DspVoiceParams.safeParse(params);
	if (!parsed.success) {
		const problems = parsed.error.issues.map((issue) => `${issue.path.join(".")} ${issue.message}`);
		throw new UsageError(`--params for a dsp voice: ${problems.join("; ")}`);
	}
}

/**
 * Validates voice options and uploads any files; returns the columns to write. `current` is the voice being
 * updated: new model files replace its files of the same name, the others stay.
 */
async function voiceFields(
	backend: AdminBackend,
	voiceId: string,
	options: VoiceOptions,
	current?: { engine: string; params: Record<string, unknown>; artifacts: NonNullable<VoiceFields["artifacts"]> },
): Promise<VoiceFields> {
	const fields: VoiceFields = {};
	if (options.engine !== undefined) {
		if (!VOICE_ENGINES.includes(options.engine as "dsp")) {
			throw new UsageError(`--engine must be one of: ${VOICE_ENGINES.join(", ")}`);
		}
		fields.engine = options.engine as "dsp";
	}
	if (options.tags !== undefined) {
		fields.tags = options.tags
			.split(",")
			.map((t) => t.trim())
			.filter(Boolean);
	}
	if (options.params !== undefined) {
		let params: unknown;
		try {
			params = JSON.parse(options.params);
		} catch {
			throw new UsageError("--params must be a JSON object, e.g. '{\"formant_shift\": 2}'");
		}
		if (typeof params !== "object" || params === null || Array.isArray(params)) {
			throw new UsageError("--params must be a JSON object");
		}
		fields.params = params as Record<string, unknown>;
	}
	if (options.active !== undefined) {
		if (options.active !== "true" && options.active !== "false") throw new UsageError("--active must be true or false");
		fields.isActive = options.active === "true";
	}
	const keys = voiceObjectKeys(voiceId);
	// Check every file before uploading any, so a bad argument leaves nothing half-written.
	const image = options.image ? await readInput(options.image, "image") : null;
	const imageType = image ? sniff(image, "image") : null;
	if (image && !imageType) throw new UsageError(`--image ${options.image} is not a PNG, JPEG or WebP image`);
	const sample = options.sample ? await readInput(options.sample, "audio") : null;
	const sampleType = sample ? sniff(sample, "audio") : null;
	if (sample && !sampleType) throw new UsageError(`--sample ${options.sample} is not a WAV, FLAC or MP3 file`);
	const artifacts = [];
	let ownContentVec: { spec: string; width: number | null } | undefined;
	for (const spec of options.artifact ?? []) {
		const [name, file] = spec.split(/=(.*)/s);
		if (!name || !file || !/^[a-z0-9_-]{1,64}$/.test(name)) {
			throw new UsageError(`--artifact must be NAME=FILE with NAME in [a-z0-9_-], got "${spec}"`);
		}
		if (name === "synthesizer" || name === "index") {
			// Stored as given, these would skip every check --model and --index make (a synthesizer's graph rules, a
			// checkpoint's pickle, the index's width), and the facts read from them.
			const flag = name === "synthesizer" ? "--model" : "--index";
			throw new UsageError(
				`--artifact ${name}=FILE is not taken: give it as ${flag} FILE, which is checked as runners read it`,
			);
		}
		if (name === "contentvec" || name === "rmvpe") {
			// In place of the deployment's base model: checked as base-model set checks one.
			const { bytes, inspection } = await inspectModel(
				file,
				"base-model",
				baseModelVerdict(name),
				BASE_MODEL_LAYOUTS[name],
				`--artifact ${spec}`,
			);
			if (name === "contentvec") ownContentVec = { spec, width: featureWidth(name, inspection) };
			artifacts.push({ name, bytes, sha256: sha256(bytes) });
			continue;
		}
		const bytes = await readInput(file, "artifact");
		artifacts.push({ name, bytes, sha256: sha256(bytes) });
	}
	const engine = fields.engine ?? current?.engine;
	if ((options.model || options.index) && engine !== "rvc") {
		throw new UsageError("--model and --index are for rvc voices: add --engine rvc");
	}
	let modelRate: number | null = null;
	let modelF0: boolean | null = null;
	let modelWidth: number | null = null;
	let modelSpeakers: number | null = null;
	if (options.model) {
		const { bytes, inspection } = await inspectModel(
			options.model,
			"model",
			// An ONNX model refused as what it is (w-okada's export, say) is named with why.
			(inspection) => isSynthesizer(inspection) || (inspection.refused?.message ?? false),
			"an RVC .pth checkpoint or an ONNX synthesizer",
		);
		artifacts.push({ name: "synthesizer", bytes, sha256: sha256(bytes) });
		modelRate = typeof inspection.sample_rate === "number" ? inspection.sample_rate : null;
		modelF0 = inspection.f0 === 1 ? true : inspection.f0 === 0 ? false : null;
		modelWidth = typeof inspection.feature_dim === "number" ? inspection.feature_dim : null;
		// A checkpoint says how many speakers it holds; an ONNX export where its graph says it with certainty.
		modelSpeakers = typeof inspection.speakers === "number" ? inspection.speakers : null;
	}
	// The width of the features the voice's model reads: the new model's, or the one the current model recorded
	// (voices added before it was recorded have none, and an index is then not checked).
	const storedWidth = options.model === undefined ? current?.params.feature_dim : undefined;
	const featureDim = modelWidth ?? (typeof storedWidth === "number" ? storedWidth : null);
	if (options.index) {
		const { bytes, inspection } = await inspectModel(
			options.index,
			"index",
			(inspection) => inspection.kind === "faiss_index",
			"a faiss feature index (RVC's .index)",
		);
		// As validation refuses it for account voices: the index's vectors replace the model's input features.
		if (featureDim !== null && typeof inspection.dim === "number" && inspection.dim !== featureDim) {
			const reader = modelWidth !== null ? "--model reads" : "the voice's model reads";
			throw new UsageError(
				`--index ${options.index} holds ${inspection.dim}-wide features but ${reader} ${featureDim}-wide ones (RVC v1 models use 256, v2 models 768): give the index trained with this model`,
			);
		}
		artifacts.push({ name: "index", bytes, sha256: sha256(bytes) });
	}
	if (engine !== "rvc" && fields.params !== undefined) checkDspParams(fields.params);
	if (engine === "rvc") {
		for (const read of RVC_MODEL_FACTS.filter((fact) => fact !== "sample_rate")) {
			if (fields.params !== undefined && read in fields.params) {
				throw new UsageError(`--params cannot set ${read}: it is read from --model`);
			}
		}
		// The model first: without one nothing else about an rvc voice can be checked.
		const names = new Set([...(current?.artifacts ?? []), ...artifacts].map((artifact) => artifact.name));
		if (!names.has("synthesizer")) throw new UsageError("an rvc voice needs its model: --model FILE.pth or FILE.onnx");
		// A voice becoming rvc does not keep its dsp params (formant_shift, brightness): they mean nothing here.
		let params = fields.params ?? (current?.engine === "rvc" ? current.params : {});
		checkRvcParams(params);
		// The rate kept is the replaced model's: a new model brings its own (new --params must agree with it).
		if (fields.params === undefined && modelRate !== null) params = { ...params, sample_rate: modelRate };
		if (modelRate !== null && params.sample_rate !== undefined && params.sample_rate !== modelRate) {
			throw new UsageError(`--params sample_rate ${params.sample_rate} disagrees with the model's ${modelRate} Hz`);
		}
		// The model knows its rate (a checkpoint records it, an ONNX synthesizer shows it when run).
		if (params.sample_rate === undefined && modelRate !== null) params = { ...params, sample_rate: modelRate };
		else if (params.sample_rate === undefined) {
			throw new UsageError(
				"--params must give the synthesizer's sample_rate for an rvc voice, e.g. '{\"sample_rate\": 40000}'",
			);
		}
		// Whether the model takes pitch, as validation records it for account voices: the API refuses f0_method
		// for a voice without (voice-capabilities.ts). New --params keep what the current model recorded.
		const f0 = modelF0 ?? (options.model === undefined ? current?.params.f0 : undefined);
		if (typeof f0 === "boolean") params = { ...params, f0 };
		// Kept, for an index given later to match.
		if (featureDim !== null) params = { ...params, feature_dim: featureDim };
		// Kept too, so that the runner (checkRvcEngineParams below, and each job) refuses a speaker_id past them. A new
		// model of unknown count (an ONNX export whose graph does not say it) drops the old one's.
		const speakers = options.model === undefined ? current?.params.speakers : modelSpeakers;
		if (typeof speakers === "number") params = { ...params, speakers };
		else if ("speakers" in params) {
			const { speakers: _dropped, ...rest } = params;
			params = rest;
		}
		// Settings a model without pitch input cannot honour, refused as the API refuses them for such a voice.
		for (const [key, needs] of Object.entries(RVC_SETTING_NEEDS)) {
			if (f0 === false && needs.pitch && params[key] !== undefined) {
				throw new UsageError(
					`--params ${key} does not apply: the model has no pitch input (f0 = 0), so ${needs.pitch}`,
				);
			}
		}
		// A default of rmvpe on a model with pitch loads the RMVPE model in every conversion: the voice's own, or the
		// deployment's. Without either each conversion would fail at the runner; the API refuses a conversion's
		// rmvpe so, and an account voice's default. Checked where defaults are given (or the voice is new).
		if (
			(fields.params !== undefined || current === undefined) &&
			f0 !== false &&
			params.f0_method === "rmvpe" &&
			!names.has("rmvpe") &&
			(await backend.query<{ name: string }>("SELECT name FROM base_models WHERE name = 'rmvpe'")).length === 0
		) {
			throw new UsageError(
				"--params f0_method rmvpe needs an RMVPE model, and this deployment has none: set it first (base-model set rmvpe FILE.onnx), give the voice its own (--artifact rmvpe=FILE.onnx), or use f0_method yin",
			);
		}
		checkRvcEngineParams(params);
		if (params !== (fields.params ?? current?.params)) fields.params = params;
		await checkContentVecWidth(backend, {
			model: options.model,
			modelWidth,
			featureDim,
			own: ownContentVec,
			ownsContentVec: names.has("contentvec"),
		});
	}
	if (options["pitch-range"] !== undefined) fields.pitchRangeHz = pitchRange(options["pitch-range"]);
	else if (sample) {
		const measured = await samplePitchRange(sample);
		if (measured) fields.pitchRangeHz = measured;
	}
	if (image && imageType) {
		fields.imageKey = keys.image(imageType.extension);
		await backend.putObject(fields.imageKey, image, imageType.contentType);
	}
	if (sample && sampleType) {
		fields.sampleKey = keys.sample(sampleType.extension);
		await backend.putObject(fields.sampleKey, sample, sampleType.contentType);
	}
	if (artifacts.length) {
		const renewed = new Set(artifacts.map((artifact) => artifact.name));
		fields.artifacts = (current?.artifacts ?? []).filter((artifact) => !renewed.has(artifact.name));
		for (const artifact of artifacts) {
			// Under its checksum: a runner leased before this update still fetches the file its lease names. Put even
			// where the key exists, before the row names it: it may be a replaced file the safety net is removing.
			const key = keys.artifact(artifact.name, artifact.sha256);
			await backend.putObject(key, artifact.bytes, "application/octet-stream");
			fields.artifacts.push({ name: artifact.name, key, sha256: artifact.sha256, size_bytes: artifact.bytes.length });
		}
	}
	return fields;
}

/** A service voice, by id or name: an account's own voices are its to change, through the API. */
async function findVoiceId(backend: AdminBackend, id: string | undefined, name: string | undefined): Promise<string> {
	if (id) {
		const rows = await backend.query<{ id: string }>(
			`SELECT id FROM voices WHERE account_id IS NULL AND id = ${sqlValue(uuid(id, "id"))}`,
		);
		if (!rows[0]) throw new UsageError(`No service voice with id ${id}`);
		return rows[0].id;
	}
	// Names are the service's to look up; an account's voices may share them (they are private to it). One stored
	// before names were composed is found as typed.
	const given = required(name, "name");
	const rows = await backend.query<{ id: string }>(
		`SELECT id FROM voices WHERE account_id IS NULL AND name IN (${sqlValue(given.normalize("NFC"))}, ${sqlValue(given)})`,
	);
	if (!rows[0]) throw new UsageError(`No voice named "${name}"`);
	return rows[0].id;
}

/**
 * A service voice's name as stored: trimmed, in Unicode's composed form (NFC), as the API stores an account's, so
 * that "Zoë" typed with a combining diaeresis is the same name as with the composed letter.
 */
const voiceName = (value: string | undefined, flag: string) => required(value, flag).normalize("NFC");

async function accountExists(backend: AdminBackend, id: string): Promise<void> {
	const rows = await backend.query<{ id: string }>(`SELECT id FROM accounts WHERE id = ${sqlValue(id)}`);
	if (!rows[0]) throw new UsageError(`No account with id ${id}`);
}

export async function runAdmin(argv: string[], backend: AdminBackend): Promise<unknown> {
	const { positionals, values } = parseArgs({
		args: argv,
		allowPositionals: true,
		strict: true,
		options: {
			name: { type: "string" },
			account: { type: "string" },
			id: { type: "string" },
			rename: { type: "string" },
			engine: { type: "string" },
			tags: { type: "string" },
			params: { type: "string" },
			image: { type: "string" },
			sample: { type: "string" },
			artifact: { type: "string", multiple: true },
			model: { type: "string" },
			index: { type: "string" },
			"pitch-range": { type: "string" },
			active: { type: "string" },
		},
	});
	// `base-model set` takes its name and file as positionals.
	const command = positionals[0] === "base-model" ? positionals.slice(0, 2).join(" ") : positionals.join(" ");
	switch (command) {
		case "account create": {
			const plan = createAccount(required(values.name, "name"));
			await backend.execute(plan.statements);
			return plan.output;
		}
		case "account list":
			return backend.query("SELECT id AS account_id, name, created_at FROM accounts ORDER BY created_at");
		case "client create":
		case "runner-client create": {
			const accountId = uuid(values.account, "account");
			await accountExists(backend, accountId);
			const kind = command === "client create" ? "api" : "runner";
			const plan = await createClient(accountId, { name: values.name ?? `${kind} client`, kind });
			await backend.execute(plan.statements);
			return plan.output;
		}
		case "client revoke": {
			const plan = revokeClient(uuid(values.id, "id"));
			await backend.execute(plan.statements);
			return plan.output;
		}
		case "voice create": {
			const name = voiceName(values.name, "name");
			// In any Unicode form: one stored before names were composed is the same name.
			const existing = await backend.query<{ name: string }>("SELECT name FROM voices WHERE account_id IS NULL");
			if (existing.some((row) => row.name.normalize("NFC") === name)) {
				throw new UsageError(`A voice named "${name}" already exists; use voice update`);
			}
			const id = crypto.randomUUID();
			const fields = await voiceFields(backend, id, { engine: "dsp", ...values });
			const plan = createVoice(id, { ...fields, name, engine: fields.engine ?? "dsp" });
			await backend.execute(plan.statements);
			return { ...plan.output, engine: fields.engine ?? "dsp", pitch_range_hz: fields.pitchRangeHz ?? null };
		}
		case "voice update": {
			const id = await findVoiceId(backend, values.id, values.name);
			const [row] = await backend.query<{
				engine: string;
				engine_params: string;
				artifacts: string;
				image_key: string | null;
				sample_key: string | null;
			}>(`SELECT engine, engine_params, artifacts, image_key, sample_key FROM voices WHERE id = ${sqlValue(id)}`);
			if (!row) throw new UsageError(`No voice with id ${id}`);
			const fields = await voiceFields(backend, id, values, {
				engine: row.engine,
				params: JSON.parse(row.engine_params),
				artifacts: JSON.parse(row.artifacts),
			});
			if (values.rename !== undefined) fields.name = voiceName(values.rename, "rename");
			if (Object.keys(fields).length === 0) throw new UsageError("voice update needs at least one field to change");
			const plan = updateVoice(id, fields);
			try {
				await backend.execute(plan.statements);
			} catch (error) {
				// D1 (local or through wrangler) refusing the unique service-voice name.
				if (/UNIQUE constraint failed: voices\.name/i.test(String(error))) {
					throw new UsageError(`A voice named "${fields.name}" already exists`);
				}
				throw error;
			}
			// An image or sample of another type went under another key: the one it replaces is no one's now.
			for (const [old, now] of [
				[row.image_key, fields.imageKey],
				[row.sample_key, fields.sampleKey],
			]) {
				if (old && now && old !== now) await backend.deleteObject(old);
			}
			return plan.output;
		}
		case "voice list":
			return (
				await backend.query<Record<string, string | number | null>>(
					`SELECT id AS voice_id, name, engine, tags, engine_params, artifacts, pitch_range_low_hz,
					 pitch_range_high_hz, is_active FROM voices WHERE account_id IS NULL ORDER BY name`,
				)
			).map(({ tags, engine_params, artifacts, pitch_range_low_hz, pitch_range_high_hz, ...row }) => ({
				...row,
				tags: JSON.parse(String(tags ?? "[]")),
				engine_params: JSON.parse(String(engine_params ?? "{}")),
				artifacts: (JSON.parse(String(artifacts ?? "[]")) as { name: string; sha256: string }[]).map((a) => ({
					name: a.name,
					sha256: a.sha256,
				})),
				pitch_range_hz: pitch_range_low_hz === null ? null : { low: pitch_range_low_hz, high: pitch_range_high_hz },
			}));
		case "base-model set": {
			const [, , name, file, ...extra] = positionals;
			if (!BASE_MODEL_NAMES.includes(name as BaseModelName) || !file || extra.length > 0) {
				throw new UsageError(`usage: base-model set ${BASE_MODEL_NAMES.join("|")} FILE.onnx`);
			}
			const { bytes, inspection } = await inspectModel(
				file,
				"base-model",
				baseModelVerdict(name as BaseModelName),
				BASE_MODEL_LAYOUTS[name as BaseModelName],
			);
			const digest = sha256(bytes);
			const key = baseModelKey(name as BaseModelName, digest);
			// Before the row names it, and even where the key exists (a file set back): see voiceFields.
			await backend.putObject(key, bytes, "application/octet-stream");
			const plan = setBaseModel(name as BaseModelName, {
				key,
				sha256: digest,
				size_bytes: bytes.length,
				feature_dim: featureWidth(name as BaseModelName, inspection),
			});
			await backend.execute(plan.statements);
			return plan.output;
		}
		case "base-model list":
			return backend.query(
				"SELECT name, sha256, size_bytes, feature_dim, object_key AS key, updated_at FROM base_models ORDER BY name",
			);
		default:
			throw new UsageError(command ? `Unknown command "${command}"` : "No command given");
	}
}
