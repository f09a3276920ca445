import { DspEngine } from "./dsp-engine.ts";

export { DspVoiceParams } from "./voice-params.ts";

export function createDspEngine(): DspEngine {
	return new DspEngine();
}
