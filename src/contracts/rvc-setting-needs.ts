/**
 * What an `rvc` voice's setting needs to have any effect, as RVC's pipeline applies it
 * (`infer/modules/vc/pipeline.py`): `index`, a feature index (the blend the setting sets); `pitch`, a model with pitch
 * input (f0 = 1), with the reason a model without one cannot honour it. A setting that would do nothing is refused
 * rather than silently ignored. One rule for the API (`voice-capabilities.ts`), the runner's validation of an
 * account's voice, and the admin tool's service voices; each words its refusal for its own reader.
 */
export interface RvcSettingNeeds {
	index?: true;
	pitch?: string;
}

export const RVC_SETTING_NEEDS: Readonly<Record<string, RvcSettingNeeds>> = {
	index_rate: { index: true },
	f0_method: { pitch: "it tracks no pitch" },
	protect: { index: true, pitch: "it tells no unvoiced frames apart" },
};
