/**
 * The inputs and outputs the rvc engine runs ContentVec and RMVPE with (`models.ts`), checked on a model's metadata
 * alone: onnxruntime's as the engine loads the model, or `npm run rvc inspect`'s as an operator sets it as a base
 * model (`npm run admin -- base-model set`). Sizes a model leaves symbolic are not held against it.
 */
import { RMVPE_N_MELS } from "./mel.ts";
import { RMVPE_PITCH_BINS } from "./pitch.ts";

/** An input or output as metadata describes it; `type` is absent for one that is not a tensor. */
export interface TensorMeta {
	name: string;
	type?: string;
	shape?: ReadonlyArray<number | string>;
}

export function describeShape(shape: ReadonlyArray<number | string>): string {
	return `[${shape.join(", ")}]`;
}

/**
 * The inputs w-okada's voice changer gives its RVC exports (`server/voice_changer/RVC/onnxExporter/export2onnx.py`:
 * feats, p_len, pitch, pitchf, sid, or feats, p_len, sid without f0); its graph draws the prior's noise itself
 * (`torch.randn_like`), so the engine's `rnd` (and `noise_scale`) has nowhere to go.
 */
const W_OKADA_EXPORT_INPUTS = ["feats", "p_len", "sid"] as const;

/**
 * Why a synthesizer with these input names is w-okada's export, which cannot run here, or undefined: said by the
 * engine as it loads one, by `npm run rvc inspect` (and so by validation and `voice create`) as it reads one.
 */
export function wOkadaExportProblem(inputNames: readonly string[]): string | undefined {
	if (!W_OKADA_EXPORT_INPUTS.every((name) => inputNames.includes(name))) return undefined;
	return "this is w-okada's voice changer export, which draws the flow's noise inside the graph and takes none: upload the RVC .pth it was exported from";
}

/** What is wrong with a float32 tensor of the given rank (where both the rank and the shape are known), if anything. */
function tensorProblem(kind: "input" | "output", meta: TensorMeta, rank?: number): string | undefined {
	if (meta.type === undefined) return `${kind} "${meta.name}" is not a tensor`;
	if (meta.type !== "float32") return `${kind} "${meta.name}" is ${meta.type}, expected float32`;
	const shape = meta.shape ?? [];
	if (rank !== undefined && shape.length > 0 && shape.length !== rank) {
		return `${kind} "${meta.name}" has shape ${describeShape(shape)}, expected rank ${rank}`;
	}
	return undefined;
}

/** Why a model with these inputs and outputs cannot run as ContentVec: 16 kHz audio in, `[1, frames, dim]` out. */
export function contentVecLayoutProblem(
	inputs: readonly TensorMeta[],
	outputs: readonly TensorMeta[],
): string | undefined {
	const [input, output] = [inputs[0], outputs[0]];
	if (inputs.length !== 1 || input === undefined || output === undefined) {
		return `expected one audio input and a features output, found inputs [${inputs.map((i) => i.name).join(", ")}]`;
	}
	const inputProblem = tensorProblem("input", input);
	if (inputProblem !== undefined) return inputProblem;
	const inputShape = input.shape ?? [];
	if (inputShape.length !== 0 && inputShape.length !== 2 && inputShape.length !== 3) {
		return `input "${input.name}" has shape ${describeShape(inputShape)}, expected [1, 1, samples] or [1, samples]`;
	}
	return tensorProblem("output", output, 3);
}

/** Why a model with these inputs and outputs cannot run as RMVPE: `[1, 128, frames]` log-mel in, 360 bins out. */
export function rmvpeLayoutProblem(inputs: readonly TensorMeta[], outputs: readonly TensorMeta[]): string | undefined {
	const [input, output] = [inputs[0], outputs[0]];
	if (inputs.length !== 1 || input === undefined || output === undefined) {
		return `expected one mel input and a salience output, found inputs [${inputs.map((i) => i.name).join(", ")}]`;
	}
	const inputProblem = tensorProblem("input", input, 3);
	if (inputProblem !== undefined) return inputProblem;
	const inputShape = input.shape ?? [];
	if (typeof inputShape[1] === "number" && inputShape[1] !== RMVPE_N_MELS) {
		return `input "${input.name}" has shape ${describeShape(inputShape)}, expected [1, ${RMVPE_N_MELS}, frames]`;
	}
	const outputProblem = tensorProblem("output", output, 3);
	if (outputProblem !== undefined) return outputProblem;
	const outputShape = output.shape ?? [];
	if (typeof outputShape[2] === "number" && outputShape[2] !== RMVPE_PITCH_BINS) {
		return `output "${output.name}" has shape ${describeShape(outputShape)}, expected [1, frames, ${RMVPE_PITCH_BINS}]`;
	}
	return undefined;
}
