/**
 * Tiny ONNX stand-ins for RVC's three models, with the real tensor names, element types and shapes, built at
 * test time. They compute something checkable instead of something learned:
 * - contentvec: a 400-sample, stride-320 convolution (HuBERT's frame geometry) projected to 768 features.
 * - rmvpe: a salience bump centred on one pitch bin, scaled by a voicing gate on the loudest mel band, so
 *   loud frames decode to that bin's pitch and silent ones to unvoiced.
 * - synthesizer: an NSF-style sine source, sin(cumsum(2 pi pitchf / sample_rate)) upsampled to sample_rate/100
 *   per frame, silenced where pitchf is 0, plus a 1e-3-scaled term that reads every other input (phone,
 *   phone_lengths, pitch through a 256-entry table, ds, rnd) so they must all be fed with the right types.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { OnnxGraphBuilder } from "../../../src/engines/rvc/onnx-writer.ts";
import { scratchDir } from "../../helpers/scratch.ts";

/** Deterministic small weights in [-scale, scale]. */
export function pseudoRandom(length: number, seed: number, scale: number): Float32Array {
	let s = seed >>> 0;
	return Float32Array.from({ length }, () => {
		s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
		return (s / 2 ** 32 - 0.5) * 2 * scale;
	});
}

export interface TinyContentVecOptions {
	featureDim?: number;
	inputRank?: 2 | 3;
	/** Every feature of frame j is the mean of input samples 320j .. 320j + 399, so tests can predict it. */
	meanFeatures?: boolean;
	/**
	 * Make every run slow: this many extra tanh(h @ W) layers, 2048 wide, between the framing and the features
	 * (about 8.4 MFLOP per frame per layer; the features stay small and bounded).
	 */
	slowLayers?: number;
}

export function buildTinyContentVec(options: TinyContentVecOptions = {}): Uint8Array {
	const dim = options.featureDim ?? 768;
	const g = new OnnxGraphBuilder();
	const rank = options.inputRank ?? 3;
	const source = g.input("source", "float32", rank === 3 ? [1, 1, "samples"] : [1, "samples"]);
	const audio = rank === 3 ? source : g.node("Unsqueeze", [source, g.int64s("axes", [1])]);
	const framing = { kernel_shape: [400], strides: [320] };
	if (options.meanFeatures) {
		const mean = g.node("Conv", [audio, g.floats("mean", [1, 1, 400], new Float32Array(400).fill(1 / 400))], framing);
		const perFrame = g.node("Transpose", [mean], { perm: [0, 2, 1] });
		g.node("MatMul", [perFrame, g.floats("spread", [1, dim], new Float32Array(dim).fill(1))], {}, ["embed"]);
		g.output("embed", "float32", [1, "frames", dim]);
		return g.toModel();
	}
	const conv = g.node("Conv", [audio, g.floats("conv", [8, 1, 400], pseudoRandom(8 * 400, 1, 0.05))], framing);
	let hidden = g.node("Transpose", [g.node("Tanh", [conv])], {
		perm: [0, 2, 1],
	});
	if (options.slowLayers !== undefined && options.slowLayers > 0) {
		const width = 2048;
		hidden = g.node("MatMul", [hidden, g.floats("widen", [8, width], pseudoRandom(8 * width, 3, 0.5))]);
		const layer = g.floats("layer", [width, width], pseudoRandom(width * width, 4, 1 / width));
		for (let i = 0; i < options.slowLayers; i++) hidden = g.node("Tanh", [g.node("MatMul", [hidden, layer])]);
		hidden = g.node("MatMul", [hidden, g.floats("narrow", [width, 8], pseudoRandom(width * 8, 5, 0.5))]);
	}
	g.node("MatMul", [hidden, g.floats("proj", [8, dim], pseudoRandom(8 * dim, 2, 0.5))], {}, ["embed"]);
	g.output("embed", "float32", [1, "frames", dim]);
	return g.toModel();
}

export const BUMP_SIGMA_BINS = 1.5;

export function buildTinyRmvpe(options: { pitchBin: number; bins?: number }): Uint8Array {
	const bins = options.bins ?? 360;
	const g = new OnnxGraphBuilder();
	const mel = g.input("mel", "float32", [1, 128, "frames"]);
	const loudest = g.node("ReduceMax", [mel], { axes: [1], keepdims: 1 });
	// Silence is log(1e-5) = -11.5 in every band; speech-level audio has bands well above -5.
	const gate = g.node("Sigmoid", [
		g.node("Mul", [g.node("Sub", [loudest, g.scalar("floor", -5)]), g.scalar("slope", 2)]),
	]);
	const bump = Float32Array.from(
		{ length: bins },
		(_, b) => 0.9 * Math.exp(-(((b - options.pitchBin) / BUMP_SIGMA_BINS) ** 2) / 2),
	);
	const gateT = g.node("Transpose", [gate], { perm: [0, 2, 1] });
	g.node("Mul", [gateT, g.floats("bump", [bins], bump)], {}, ["salience"]);
	g.output("salience", "float32", [1, "frames", bins]);
	return g.toModel();
}

export interface TinySynthesizerOptions {
	sampleRate: number;
	featureDim?: number;
	/** Output `phone[:, frame, 0]` held for each frame's samples instead of the sine (the rest times 0). */
	echoPhone?: boolean;
	/**
	 * false: an RVC f0 = 0 model, without `pitch` and `pitchf` inputs; its output is `phone[:, frame, 0]` held
	 * for each frame's samples plus the 1e-3-scaled term of the other inputs.
	 */
	pitchInputs?: boolean;
	/** Rename inputs to build a wrong model, e.g. { pitchf: "f0" }. */
	rename?: Partial<Record<"phone" | "phone_lengths" | "pitch" | "pitchf" | "ds" | "rnd", string>>;
}

export function buildTinySynthesizer(options: TinySynthesizerOptions): Uint8Array {
	if (options.pitchInputs === false) return buildTinySynthesizerWithoutPitch(options);
	const dim = options.featureDim ?? 768;
	const upp = options.sampleRate / 100;
	const name = (n: keyof NonNullable<TinySynthesizerOptions["rename"]>): string => options.rename?.[n] ?? n;
	const g = new OnnxGraphBuilder();
	const phone = g.input(name("phone"), "float32", [1, "frames", dim]);
	const lengths = g.input(name("phone_lengths"), "int64", [1]);
	const pitch = g.input(name("pitch"), "int64", [1, "frames"]);
	const pitchf = g.input(name("pitchf"), "float32", [1, "frames"]);
	const ds = g.input(name("ds"), "int64", [1]);
	const rnd = g.input(name("rnd"), "float32", [1, 192, "frames"]);

	const axis2 = g.int64s("axes", [2]);
	const flat = g.int64s("flat", [1, -1]);
	const perFrame = g.int64s("per_frame", [1, 1, upp]);
	/** [1, frames, 1] -> [1, frames x upp], each frame's value held for upp samples. */
	const upsample = (x: string): string => g.node("Reshape", [g.node("Expand", [x, perFrame]), flat]);

	const f0 = upsample(g.node("Unsqueeze", [pitchf, axis2]));
	const phase = g.node("CumSum", [
		g.node("Mul", [f0, g.scalar("omega", (2 * Math.PI) / options.sampleRate)]),
		g.int64s("axis", [1]),
	]);
	const voiced = g.node("Cast", [g.node("Greater", [f0, g.scalar("zero", 0)])], { to: 1 });
	const sine = g.node("Mul", [g.node("Mul", [g.node("Sin", [phase]), g.scalar("amplitude", 0.5)]), voiced]);

	const fromPhone = g.node("MatMul", [phone, g.floats("phone_w", [dim, 1], pseudoRandom(dim, 3, 0.01))]);
	const fromPitch = g.node("Unsqueeze", [
		g.node("Gather", [
			g.floats(
				"pitch_table",
				[256],
				Float32Array.from({ length: 256 }, (_, i) => i / 255),
			),
			pitch,
		]),
		axis2,
	]);
	const fromSpeaker = g.node("Gather", [g.floats("speaker_table", [4], [0.1, 0.2, 0.3, 0.4]), ds]);
	const fromNoise = g.node("Transpose", [g.node("ReduceMean", [rnd], { axes: [1], keepdims: 1 })], { perm: [0, 2, 1] });
	const fromLengths = g.node("Mul", [g.node("Cast", [lengths], { to: 1 }), g.scalar("ignore", 0)]);
	const term = [fromPitch, fromSpeaker, fromNoise, fromLengths].reduce((a, b) => g.node("Add", [a, b]), fromPhone);
	const audio = options.echoPhone
		? g.node("Add", [
				upsample(
					g.node("MatMul", [
						phone,
						g.floats(
							"first",
							[dim, 1],
							Float32Array.from({ length: dim }, (_, i) => (i === 0 ? 1 : 0)),
						),
					]),
				),
				g.node("Mul", [g.node("Add", [sine, upsample(term)]), g.scalar("unused", 0)]),
			])
		: g.node("Add", [sine, g.node("Mul", [upsample(term), g.scalar("small", 1e-3)])]);
	g.node("Unsqueeze", [audio, g.int64s("axes", [1])], {}, ["audio"]);
	g.output("audio", "float32", [1, 1, "samples"]);
	return g.toModel();
}

function buildTinySynthesizerWithoutPitch(options: TinySynthesizerOptions): Uint8Array {
	const dim = options.featureDim ?? 768;
	const upp = options.sampleRate / 100;
	const g = new OnnxGraphBuilder();
	const phone = g.input("phone", "float32", [1, "frames", dim]);
	const lengths = g.input("phone_lengths", "int64", [1]);
	const ds = g.input("ds", "int64", [1]);
	const rnd = g.input("rnd", "float32", [1, 192, "frames"]);
	const upsample = (x: string): string =>
		g.node("Reshape", [g.node("Expand", [x, g.int64s("per_frame", [1, 1, upp])]), g.int64s("flat", [1, -1])]);
	const first = g.node("MatMul", [
		phone,
		g.floats(
			"first",
			[dim, 1],
			Float32Array.from({ length: dim }, (_, i) => (i === 0 ? 1 : 0)),
		),
	]);
	const fromSpeaker = g.node("Gather", [g.floats("speaker_table", [4], [0.1, 0.2, 0.3, 0.4]), ds]);
	const fromNoise = g.node("Transpose", [g.node("ReduceMean", [rnd], { axes: [1], keepdims: 1 })], { perm: [0, 2, 1] });
	const fromLengths = g.node("Mul", [g.node("Cast", [lengths], { to: 1 }), g.scalar("ignore", 0)]);
	const term = g.node("Add", [g.node("Add", [fromSpeaker, fromNoise]), fromLengths]);
	const audio = g.node("Add", [upsample(first), g.node("Mul", [upsample(term), g.scalar("small", 1e-3)])]);
	g.node("Unsqueeze", [audio, g.int64s("axes", [1])], {}, ["audio"]);
	g.output("audio", "float32", [1, 1, "samples"]);
	return g.toModel();
}

/** Writes models into a fresh temporary folder and returns their paths by artifact name. */
export function writeModels(models: Record<string, Uint8Array>): Map<string, string> {
	const dir = scratchDir("rvc-test");
	const paths = new Map<string, string>();
	for (const [artifact, bytes] of Object.entries(models)) {
		const path = join(dir, `${artifact}.onnx`);
		writeFileSync(path, bytes);
		paths.set(artifact, path);
	}
	return paths;
}
