/**
 * Which per-conversion settings a voice can honour, decided when the conversion is created so that a setting the
 * engine would ignore is refused with 400 instead. What each engine honours (gpu-runner/src/engines/):
 * - `dsp`: `formant_shift` (its voices' own parameter, overridden per conversion); it has no feature index, no
 *   loudness mix and tracks no pitch for the conversion itself.
 * - `rvc`: `index_rate` and `protect` with a feature index (both act on the index blend; `protect` only on a model
 *   with pitch input, whose unvoiced frames it keeps from the blend, as RVC does), `rms_mix_rate`,
 *   `f0_method` (on a model with pitch input; `rmvpe` needs the RMVPE model: the voice's own or the deployment's
 *   base model), and `formant_shift` 0 only (the synthesizer fixes the timbre).
 * `pitch_shift: "auto"` needs the voice's pitch range.
 */
import { RVC_SETTING_NEEDS } from "../contracts/rvc-setting-needs.ts";
import type { CreateConversionBody, VoiceSettings } from "../contracts/voice-conversions.ts";
import { ApiError, type FieldProblem } from "../http/errors.ts";
import { listBaseModels } from "./base-model-store.ts";
import type { VoiceRow } from "./voice-store.ts";

type Setting = keyof VoiceSettings;

const DSP_HONOURS: readonly Setting[] = ["formant_shift"];

async function rvcProblem(
	env: Pick<Env, "DB">,
	voice: VoiceRow,
	setting: Setting,
	value: unknown,
): Promise<string | null> {
	const carries = (name: string) => voice.artifacts.some((artifact) => artifact.name === name);
	const needs = RVC_SETTING_NEEDS[setting] ?? {};
	if (needs.index && !carries("index")) {
		return `voice "${voice.name}" has no feature index, so there is no index blend to set`;
	}
	// Whether the model takes pitch is read from it: by validation for account voices, by the admin tool for service
	// voices (those it created before it recorded f0 have none, and are not refused here).
	if (needs.pitch && voice.engineParams.f0 === false) {
		return `voice "${voice.name}" has a model without pitch input (f0 = 0): ${needs.pitch}, so ${setting} does not apply`;
	}
	switch (setting) {
		case "formant_shift":
			return value === 0
				? null
				: `rvc voices cannot shift formants (the voice model fixes the timbre); only 0 is accepted`;
		case "f0_method":
			if (value !== "rmvpe" || carries("rmvpe")) return null;
			return (await listBaseModels(env)).some((base) => base.name === "rmvpe")
				? null
				: "this deployment has no RMVPE base model; use f0_method yin";
		case "index_rate":
		case "protect":
		case "rms_mix_rate":
			return null;
	}
}

/** Every one of these settings the voice cannot honour, by field (`voice_settings.<name>`). */
export async function voiceSettingProblems(
	env: Pick<Env, "DB">,
	voice: VoiceRow,
	settings: VoiceSettings,
): Promise<FieldProblem[]> {
	const problems: FieldProblem[] = [];
	for (const [setting, value] of Object.entries(settings) as [Setting, unknown][]) {
		if (value === undefined) continue;
		const problem =
			voice.engine === "dsp"
				? DSP_HONOURS.includes(setting)
					? null
					: `the dsp engine of voice "${voice.name}" honours only ${DSP_HONOURS.join(", ")}`
				: await rvcProblem(env, voice, setting, value);
		if (problem) problems.push({ field: `voice_settings.${setting}`, message: problem });
	}
	return problems;
}

/** Throws a 400 `unsupported_voice_setting` naming every setting the voice cannot honour. */
export async function checkVoiceCanHonour(
	env: Pick<Env, "DB">,
	voice: VoiceRow,
	request: Pick<CreateConversionBody, "pitch_shift" | "voice_settings">,
): Promise<void> {
	const problems = await voiceSettingProblems(env, voice, request.voice_settings ?? {});
	if (request.pitch_shift === "auto" && (voice.pitchRangeLowHz === null || voice.pitchRangeHighHz === null)) {
		problems.push({
			field: "pitch_shift",
			message: `auto needs the voice's pitch range, and voice "${voice.name}" has none; choose a pitch table value`,
		});
	}
	const first = problems[0];
	if (first) {
		throw new ApiError(400, "unsupported_voice_setting", `Unsupported ${first.field}: ${first.message}`, {
			errors: problems,
		});
	}
}
