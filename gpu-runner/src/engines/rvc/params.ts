/**
 * The `params` of an `rvc` voice (VoiceDescriptor.params). Only `sample_rate` is required; the rest have
 * RVC's defaults.
 *
 * | key | default | meaning |
 * |---|---|---|
 * | `sample_rate` | required | the synthesizer's output rate in Hz (RVC: 32000, 40000 or 48000); one model frame is sample_rate / 100 samples |
 * | `speaker_id` | 0 | the `ds` speaker index for multi-speaker synthesizers; below `speakers` where that is given |
 * | `speakers` | none | the model's speaker count (rows of `emb_g.weight`), as the admin tool records it from a `.pth` or an ONNX export whose graph says it; not a setting |
 * | `transpose_semitones` | 0 | added to the job's semitones, e.g. +12 for a female voice model fed male speech |
 * | `f0_threshold` | 0.03 | RMVPE voicing threshold on the peak salience (RVC's pipeline value) |
 * | `noise_scale` | 0.66666 | scale of the `rnd` normal noise (RVC's `infer` value) |
 * | `chunk_seconds` | 30 (5 on the CPU provider, at most 20 there) | aim for segments this long when splitting long audio; shorter chunks use less memory and notice an abort sooner, longer ones spend less on context |
 * | `chunk_search_seconds` | 5 | look this far either side of the aim for the quietest point |
 * | `context_seconds` | 1 | audio converted on each side of a segment and dropped (RVC's x_pad) |
 * | `crossfade_seconds` | 0.04 | overlap over which neighbouring segments are crossfaded |
 * | `index_rate` | 0.75 | with an `index` artifact: share of each ContentVec frame replaced by the weighted mean of its 8 nearest training vectors (0 keeps the features, 1 replaces them); unused without an index |
 * | `protect` | 0.33 | 0..0.5: where the frame is unvoiced (pitchf < 1 Hz) only this share of the index blend is kept, the rest is the original features (keeps consonants and breaths); 0.5 turns it off |
 * | `rms_mix_rate` | 0.25 | 0..1: 1 keeps the synthesizer's loudness envelope, 0 imposes the source's (RVC's 1 s RMS frames, hop 0.5 s) |
 * | `f0_method` | `rmvpe` | `rmvpe` (needs the `rmvpe` artifact) or `yin` (built in, no model file) |
 * | `formant_shift` | 0 | only 0: the synthesizer fixes the timbre and RVC has no formant control, so other values are refused |
 *
 * A job may override `index_rate`, `protect`, `rms_mix_rate`, `formant_shift` and `f0_method` with its
 * `voice_settings` (`applyVoiceSettings`); out-of-range values fail the job permanently.
 */
import { PermanentJobError } from "../../job-errors.ts";
import { RvcEngineError } from "./errors.ts";

export const F0_METHODS = ["rmvpe", "yin"] as const;
export type F0Method = (typeof F0_METHODS)[number];

export interface RvcParams {
	sampleRate: number;
	speakerId: number;
	transposeSemitones: number;
	f0Threshold: number;
	noiseScale: number;
	chunkSeconds: number;
	chunkSearchSeconds: number;
	contextSeconds: number;
	crossfadeSeconds: number;
	indexRate: number;
	protect: number;
	rmsMixRate: number;
	f0Method: F0Method;
	/** The model's speaker count where the params record it (`speakers`); `speakerId` is below it. */
	speakers?: number;
}

type NumericParam = Exclude<keyof RvcParams, "f0Method" | "speakers">;

type Rule = {
	key: string;
	min: number;
	max: number;
	integer?: boolean;
	default?: number;
};

const RULES: Record<NumericParam, Rule> = {
	sampleRate: { key: "sample_rate", min: 8000, max: 96_000, integer: true },
	speakerId: {
		key: "speaker_id",
		min: 0,
		max: 10_000,
		integer: true,
		default: 0,
	},
	transposeSemitones: {
		key: "transpose_semitones",
		min: -24,
		max: 24,
		default: 0,
	},
	f0Threshold: { key: "f0_threshold", min: 0, max: 1, default: 0.03 },
	noiseScale: { key: "noise_scale", min: 0, max: 2, default: 0.66666 },
	chunkSeconds: { key: "chunk_seconds", min: 1, max: 120, default: 30 },
	chunkSearchSeconds: {
		key: "chunk_search_seconds",
		min: 0,
		max: 30,
		default: 5,
	},
	contextSeconds: { key: "context_seconds", min: 0.1, max: 10, default: 1 },
	crossfadeSeconds: { key: "crossfade_seconds", min: 0, max: 1, default: 0.04 },
	indexRate: { key: "index_rate", min: 0, max: 1, default: 0.75 },
	protect: { key: "protect", min: 0, max: 0.5, default: 0.33 },
	rmsMixRate: { key: "rms_mix_rate", min: 0, max: 1, default: 0.25 },
};

/** What a job's `voice_settings` may override, by key. */
const VOICE_SETTINGS: Record<string, NumericParam | "f0Method" | "formantShift"> = {
	index_rate: "indexRate",
	protect: "protect",
	rms_mix_rate: "rmsMixRate",
	f0_method: "f0Method",
	formant_shift: "formantShift",
};

function ruleProblem(rule: Rule, raw: unknown): string | undefined {
	if (
		typeof raw !== "number" ||
		!Number.isFinite(raw) ||
		raw < rule.min ||
		raw > rule.max ||
		(rule.integer && !Number.isInteger(raw))
	) {
		return `${rule.key} must be ${rule.integer ? "an integer" : "a number"} in ${rule.min}..${rule.max}, got ${JSON.stringify(raw)}`;
	}
	return undefined;
}

/** Why `speakerId` cannot select one of a model's `speakers`, if it cannot. */
export function speakerProblem(speakerId: number | undefined, speakers: number): string | undefined {
	if (speakerId === undefined || speakerId < speakers) return undefined;
	return `speaker_id ${speakerId} is beyond the model's ${speakers} speaker${speakers === 1 ? "" : "s"} (0 to ${speakers - 1})`;
}

function f0MethodProblem(raw: unknown): string | undefined {
	return F0_METHODS.includes(raw as F0Method)
		? undefined
		: `f0_method must be one of ${F0_METHODS.join(", ")}, got ${JSON.stringify(raw)}`;
}

function formantShiftProblem(raw: unknown): string | undefined {
	return raw === 0
		? undefined
		: `formant_shift must be 0 for rvc voices, got ${JSON.stringify(raw)}: the voice model fixes the timbre and RVC has no formant control (the dsp engine shifts formants)`;
}

/**
 * Default `chunk_seconds` and `chunk_search_seconds` on the CPU provider (30 s and 5 s elsewhere). Short windows
 * keep the synthesizer's arena small (its activations grow with the window) and ContentVec's attention cheap
 * (quadratic in the window); below about 5 s the second of context on each side costs more than it saves.
 * Measured on the bench's 40 s, 2 threads (search a quarter of the chunk): RTF 1.34 / peak RSS 1791 MiB at 10 s,
 * 1.18 / 1536 at 6 s, 1.27 / 1482 at 5 s, 1.36 / 1385 at 4 s. The search bounds the longest window, which the
 * arena grows to: over a minute at 5 s chunks, peak RSS 1510 MiB with 1.25 s, 1416 with 0.75 s, 1396 with 0.5 s.
 */
/** The largest value a voice's params may give `name`. */
export function paramMaximum(name: NumericParam): number {
	return RULES[name].max;
}

export const CPU_PARAM_DEFAULTS: Partial<RvcParams> = { chunkSeconds: 5, chunkSearchSeconds: 0.75 };

/** Validates `params`; `defaults` replaces built-in defaults (the engine shortens chunks on the CPU). */
export function parseRvcParams(params: Record<string, unknown>, defaults: Partial<RvcParams> = {}): RvcParams {
	const problems: string[] = [];
	const out = {} as RvcParams;
	for (const [field, rule] of Object.entries(RULES) as [NumericParam, Rule][]) {
		const raw = params[rule.key];
		if (raw === undefined) {
			const fallback = defaults[field] ?? rule.default;
			if (fallback === undefined) problems.push(`${rule.key} is required`);
			else out[field] = fallback;
			continue;
		}
		const problem = ruleProblem(rule, raw);
		if (problem !== undefined) problems.push(problem);
		else out[field] = raw as number;
	}
	const method = params.f0_method ?? defaults.f0Method ?? "rmvpe";
	const methodProblem = f0MethodProblem(method);
	if (methodProblem !== undefined) problems.push(methodProblem);
	else out.f0Method = method as F0Method;
	if (params.formant_shift !== undefined) {
		const problem = formantShiftProblem(params.formant_shift);
		if (problem !== undefined) problems.push(problem);
	}
	// The model's speaker count, where recorded: RVC's embedding lookup fails past it (onnxruntime's on the CPU, with
	// a message about a Gather node, after the job has begun), so a speaker_id beyond it is refused here.
	const speakers = params.speakers;
	if (speakers !== undefined) {
		if (typeof speakers !== "number" || !Number.isInteger(speakers) || speakers < 1) {
			problems.push(`speakers (the model's speaker count) must be a positive integer, got ${JSON.stringify(speakers)}`);
		} else {
			out.speakers = speakers;
			const problem = speakerProblem(out.speakerId, speakers);
			if (problem !== undefined) problems.push(problem);
		}
	}
	if (out.sampleRate !== undefined && out.sampleRate % 100 !== 0) {
		problems.push(
			`sample_rate must be a multiple of 100 (RVC synthesizers make sample_rate / 100 samples per 10 ms frame), got ${out.sampleRate}`,
		);
	}
	if (
		out.chunkSearchSeconds !== undefined &&
		out.chunkSeconds !== undefined &&
		out.chunkSearchSeconds >= out.chunkSeconds
	) {
		problems.push("chunk_search_seconds must be shorter than chunk_seconds");
	} else if (
		out.chunkSearchSeconds !== undefined &&
		out.chunkSeconds !== undefined &&
		// The chunk plan counts both in 10 ms frames, and cuts on ContentVec's 20 ms grid (`makeChunkPlan`).
		Math.round(out.chunkSeconds * 100) - Math.round(out.chunkSearchSeconds * 100) < 2
	) {
		problems.push(
			`chunk_search_seconds must be at least 0.02 s (one cut step) shorter than chunk_seconds, got ${out.chunkSearchSeconds} and ${out.chunkSeconds}`,
		);
	}
	if (
		out.crossfadeSeconds !== undefined &&
		out.contextSeconds !== undefined &&
		out.crossfadeSeconds / 2 > out.contextSeconds
	) {
		problems.push("half of crossfade_seconds must fit in context_seconds");
	}
	if (problems.length > 0)
		throw new RvcEngineError("invalid_params", `invalid rvc voice params: ${problems.join("; ")}`);
	return out;
}

/**
 * The voice's params with a job's `voice_settings` applied. Anything unknown or out of range fails the job
 * permanently (a retry would get the same settings), naming every offending field.
 */
export function applyVoiceSettings(
	params: RvcParams,
	settings: Readonly<Record<string, unknown>> | undefined,
): RvcParams {
	if (settings === undefined) return params;
	const problems: string[] = [];
	const out = { ...params };
	for (const [key, raw] of Object.entries(settings)) {
		const field = VOICE_SETTINGS[key];
		let problem: string | undefined;
		if (field === undefined) {
			problem = `${key} is not a voice setting (allowed: ${Object.keys(VOICE_SETTINGS).join(", ")})`;
		} else if (field === "f0Method") {
			problem = f0MethodProblem(raw);
			if (problem === undefined) out.f0Method = raw as F0Method;
		} else if (field === "formantShift") {
			problem = formantShiftProblem(raw);
		} else {
			problem = ruleProblem(RULES[field], raw);
			if (problem === undefined) out[field] = raw as number;
		}
		if (problem !== undefined) problems.push(`voice_settings.${problem}`);
	}
	if (problems.length > 0) {
		throw new PermanentJobError("internal", `invalid voice_settings for an rvc voice: ${problems.join("; ")}`);
	}
	return out;
}
