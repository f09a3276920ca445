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

/**
 * An rvc voice's params with the pitch tracker its conversions use where neither the conversion's settings nor the
 * voice's defaults name one: RMVPE where its model comes with the job (the voice's own `rmvpe` or the deployment's
 * base model), else the built-in YIN, so that a model with pitch input runs in a deployment without RMVPE instead
 * of failing each conversion at the runner for a file nobody asked for. A model without pitch input (`f0` false)
 * tracks no pitch and is left as it is. The Worker applies it to every conversion's lease, the runner's validation
 * to its self-test, so a voice is tested as it will run.
 */
export function withPitchTracker(
	params: Record<string, unknown>,
	settings: { f0_method?: unknown } | null | undefined,
	carriesRmvpe: boolean,
): Record<string, unknown> {
	if (carriesRmvpe || params.f0 === false || params.f0_method !== undefined || settings?.f0_method !== undefined) {
		return params;
	}
	return { ...params, f0_method: "yin" };
}

/**
 * The params of an rvc voice that state facts of its model, read from the model file (by validation, or by the admin
 * tool), not chosen: a conversion takes them from the model its lease carries, and `--params` may not set them
 * (`sample_rate` aside: an ONNX export whose probe cannot measure its rate is given it, and it must agree).
 */
export const RVC_MODEL_FACTS: readonly string[] = ["sample_rate", "f0", "feature_dim", "speakers"];
