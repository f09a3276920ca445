/**
 * The `params` of an `rvc` voice (VoiceDescriptor.params). Only `sample_rate` is required; the rest have
 * RVC's defaults.
 *
 * | key | default | meaning |
 * |---|---|---|
 * | `sample_rate` | required | the synthesizer's output rate in Hz (RVC: 32000, 40000 or 48000); one model frame is sample_rate / 100 samples |
 * | `speaker_id` | 0 | the `ds` speaker index for multi-speaker synthesizers |
 * | `transpose_semitones` | 0 | added to the job's semitones, e.g. +12 for a female voice model fed male speech |
 * | `f0_threshold` | 0.03 | RMVPE voicing threshold on the peak salience (RVC's pipeline value) |
 * | `noise_scale` | 0.66666 | scale of the `rnd` normal noise (RVC's `infer` value) |
 * | `chunk_seconds` | 30 (10 on the CPU provider) | aim for segments this long when splitting long audio; shorter chunks use less memory and notice an abort sooner, longer ones spend less on context |
 * | `chunk_search_seconds` | 5 | look this far either side of the aim for the quietest point |
 * | `context_seconds` | 1 | audio converted on each side of a segment and dropped (RVC's x_pad) |
 * | `crossfade_seconds` | 0.04 | overlap over which neighbouring segments are crossfaded |
 */
import { RvcEngineError } from "./errors.ts";

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
}

type Rule = {
	key: string;
	min: number;
	max: number;
	integer?: boolean;
	default?: number;
};

const RULES: Record<keyof RvcParams, Rule> = {
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
};

/** Validates `params`; `defaults` replaces built-in defaults (the engine shortens chunks on the CPU). */
export function parseRvcParams(params: Record<string, unknown>, defaults: Partial<RvcParams> = {}): RvcParams {
	const problems: string[] = [];
	const out = {} as RvcParams;
	for (const [field, rule] of Object.entries(RULES) as [keyof RvcParams, Rule][]) {
		const raw = params[rule.key];
		if (raw === undefined) {
			const fallback = defaults[field] ?? rule.default;
			if (fallback === undefined) problems.push(`${rule.key} is required`);
			else out[field] = fallback;
			continue;
		}
		if (
			typeof raw !== "number" ||
			!Number.isFinite(raw) ||
			raw < rule.min ||
			raw > rule.max ||
			(rule.integer && !Number.isInteger(raw))
		) {
			problems.push(
				`${rule.key} must be ${rule.integer ? "an integer" : "a number"} in ${rule.min}..${rule.max}, got ${JSON.stringify(raw)}`,
			);
			continue;
		}
		out[field] = raw;
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
