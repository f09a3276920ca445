/**
 * Builds RVC's synthesizer as an ONNX graph from its config and weights (weight norm already folded), with the
 * inputs of RVC's ONNX export: `phone` f32 [1, F, 256|768], `phone_lengths` i64 [1], `pitch` i64 [1, F] and
 * `pitchf` f32 [1, F] (f0 models only), `ds` i64 [1], `rnd` f32 [1, inter_channels, F] -> `audio` f32
 * [1, 1, F x hop]. The graph is RVC's `infer` (`infer/module/models.py`) layer by layer:
 *
 * - text encoder: `emb_phone` (+ `emb_pitch`), x sqrt(hidden), leaky ReLU 0.1, post-norm transformer layers
 *   with relative-position attention (window 10, shared key/value embeddings, RVC's pad-and-reshape skew) and a
 *   convolutional FFN, everything masked by `phone_lengths`; projection to `m`, `logs`;
 *   `z_p = (m + exp(logs) x rnd) x mask` (`rnd` is the export's pre-scaled noise; RVC's `infer` draws
 *   `randn x 0.66666` there).
 * - flow, reversed: flip, then each mean-only coupling (a gated WaveNet conditioned on the speaker) from the
 *   last to the first.
 * - decoder: HiFi-GAN (`Generator`) for f0 = 0 models; for f0 models `GeneratorNSF`, whose harmonic source is
 *   `sin(2 pi cumsum(f0 / sr)) x 0.1` on voiced samples plus Gaussian noise (0.003 voiced, 0.1 / 3 unvoiced,
 *   a `RandomNormalLike` node as in RVC's export), merged by `l_linear` and tanh, fed into every stage through
 *   the `noise_convs`.
 *
 * The sine's phase is accumulated in float64 and reduced to one cycle before `sin`: RVC reaches the same value
 * by wrapping its float32 running sum at whole cycles, which only serves to keep the argument small.
 */
import { OnnxGraphBuilder } from "./onnx-writer.ts";
import type { Tensor } from "./rvc-checkpoint.ts";
import {
	ATTENTION_WINDOW,
	FLOW_COUPLINGS,
	FLOW_KERNEL,
	FLOW_WAVENET_LAYERS,
	type SynthesizerConfig,
	samplesPerFrame,
} from "./synthesizer-config.ts";

/** Raised whenever the graph built from the same checkpoint changes, so files built earlier are not reused. */
export const SYNTHESIZER_GRAPH_VERSION = 3;

export interface SynthesizerGraphSpec {
	config: SynthesizerConfig;
	/** ContentVec width of `phone`: 256 (v1) or 768 (v2). */
	featureDim: number;
	f0: boolean;
	/** By RVC's parameter names, weight norm folded (`rvc-checkpoint.ts`). */
	weights: ReadonlyMap<string, Tensor>;
}

export interface SynthesizerGraphOptions {
	/**
	 * The NSF source's Gaussian noise, as RVC runs it (default). Off makes the graph deterministic: RVC's
	 * `infer` with that noise zero, which the tests compare against PyTorch.
	 */
	sourceNoise?: boolean;
	/**
	 * Adds the inputs `decode_start` (i64 `[pieces]`) and `decode_frames` (i64 `[1]`): the decoder then runs on
	 * `decode_frames` frames from each start only (the text encoder, the flow and the harmonic source's phase
	 * still see every frame), so context that is cut away afterwards is not decoded, and the output is the
	 * pieces' samples one after the other. Frames further than the decoder's receptive field (11.2 to 14.5 frames
	 * for the published configs) from either end of a piece come out as decoding everything would give them.
	 * Several pieces of one span let onnxruntime's CPU provider spread the narrow decoder layers over its
	 * threads: its NCHWc convolution divides its work by rows and sets of 64 output channels, so a layer of 64
	 * channels or fewer on one row runs on one thread (`decodePieces` in `rvc-engine.ts`).
	 */
	decodeSpan?: boolean;
	/**
	 * The decoder's tensors as `[1, C, T]` (`"1d"`, RVC's layout) or `[1, C, 1, T]` (`"2d"`, default): the same
	 * arithmetic, but onnxruntime's CPU provider runs 2-D convolutions in its blocked NCHWc layout, 10-50 %
	 * faster than its 1-D convolutions for the decoder's channel counts.
	 */
	decoderLayout?: "1d" | "2d";
}

export interface BuiltSynthesizer {
	bytes: Uint8Array;
	parameters: number;
	/** Parameters per part: text encoder, flow, decoder. */
	parts: Record<string, number>;
}

/**
 * Frames either side of a decoded span (`decodeSpan`) beyond which the output is exact: above the decoder's
 * receptive radius, which is 11.2 to 14.5 frames for the published configs (12.4 at 40 kHz). Graphs whose
 * decoder reaches further are built without the span inputs.
 */
export const DECODE_SPAN_MARGIN_FRAMES = 16;

/** An upper bound of how many frames either side one output sample of the decoder depends on. */
export function decoderReachFrames(config: SynthesizerConfig): number {
	let reach = 3; // conv_pre, kernel 7
	let perFrame = 1;
	config.upsampleRates.forEach((rate, i) => {
		const kernel = config.upsampleKernelSizes[i] as number;
		reach += Math.ceil(kernel / rate) / perFrame;
		perFrame *= rate;
		const blocks = config.resblockKernelSizes.map((k, j) => {
			const half = (k - 1) / 2;
			const dilations = config.resblockDilationSizes[j] as number[];
			return dilations.reduce((sum, d) => sum + half * d + (config.resblock === "1" ? half : 0), 0);
		});
		// the residual blocks, and the noise convolution's stride-wide reach into the harmonic source
		reach += (Math.max(...blocks) + 1) / perFrame;
	});
	return reach + 3 / perFrame; // conv_post, kernel 7
}

const LRELU_SLOPE = 0.1;
const SINE_AMP = 0.1;
const VOICED_NOISE = 0.003;
const FLOAT = 1;
const DOUBLE = 11;
const INT64_MAX = Number.MAX_SAFE_INTEGER;

class GraphWriter {
	readonly g = new OnnxGraphBuilder();
	readonly #weights: ReadonlyMap<string, Tensor>;

	constructor(weights: ReadonlyMap<string, Tensor>) {
		this.#weights = weights;
	}

	tensor(name: string): Tensor {
		const t = this.#weights.get(name);
		if (t === undefined) throw new Error(`synthesizer weights lack ${name}`);
		return t;
	}

	weight(name: string, dims?: number[]): string {
		const t = this.tensor(name);
		return this.g.initializer(name, { type: "float32", dims: dims ?? t.dims, data: t.data });
	}

	/** `[out, in]` or `[out, in, 1]` as a MatMul operand `[in, out]`. */
	transposedWeight(name: string): string {
		const t = this.tensor(name);
		const [out, cin] = t.dims as [number, number];
		const data = new Float32Array(out * cin);
		for (let o = 0; o < out; o++) for (let i = 0; i < cin; i++) data[i * out + o] = t.data[o * cin + i] as number;
		return this.g.initializer(name, { type: "float32", dims: [cin, out], data });
	}

	node(op: string, inputs: string[], attributes: Parameters<OnnxGraphBuilder["node"]>[2] = {}): string {
		return this.g.node(op, inputs, attributes);
	}

	scalar(value: number): string {
		return this.g.scalar("c", value);
	}

	ints(values: number[]): string {
		return this.g.int64s("i", values);
	}

	/** Linear layer (or 1x1 conv) on the last axis of `[1, T, in]`. */
	linear(x: string, name: string): string {
		const y = this.node("MatMul", [x, this.transposedWeight(`${name}.weight`)]);
		return this.node("Add", [y, this.weight(`${name}.bias`)]);
	}

	/**
	 * Conv1d on `[1, C, T]` with torch's padding (`[left, right]`), stride and dilation; with `planar`, the same
	 * convolution on `[1, C, 1, T]` (kernel `[1, k]`).
	 */
	conv(
		x: string,
		name: string,
		o: { pad?: [number, number]; stride?: number; dilation?: number; planar?: boolean } = {},
	): string {
		const w = this.tensor(`${name}.weight`);
		const [out, cin, k] = w.dims as [number, number, number];
		const inputs = [x, this.weight(`${name}.weight`, o.planar ? [out, cin, 1, k] : undefined)];
		if (this.#weights.has(`${name}.bias`)) inputs.push(this.weight(`${name}.bias`));
		const [left, right] = o.pad ?? [0, 0];
		return this.node(
			"Conv",
			inputs,
			o.planar
				? {
						kernel_shape: [1, k],
						pads: [0, left, 0, right],
						strides: [1, o.stride ?? 1],
						dilations: [1, o.dilation ?? 1],
					}
				: { kernel_shape: [k], pads: [left, right], strides: [o.stride ?? 1], dilations: [o.dilation ?? 1] },
		);
	}

	leakyRelu(x: string, alpha: number): string {
		return this.node("LeakyRelu", [x], { alpha: { float: alpha } });
	}

	/** Pads with a dynamic pads vector built from constant and computed 1-element pieces. */
	pad(x: string, pieces: (number | string)[]): string {
		const pads = this.node(
			"Concat",
			pieces.map((p) => (typeof p === "number" ? this.ints([p]) : p)),
			{ axis: 0 },
		);
		return this.node("Pad", [x, pads]);
	}

	reshape(x: string, pieces: (number | string)[]): string {
		const shape = this.node(
			"Concat",
			pieces.map((p) => (typeof p === "number" ? this.ints([p]) : p)),
			{ axis: 0 },
		);
		return this.node("Reshape", [x, shape]);
	}

	/** `0, 1, ..., end - 1` (int64) for a 1-element int64 vector `end`. */
	range(end: string): string {
		const scalar = (v: string) => this.node("Squeeze", [v, this.ints([0])]);
		return this.node("Range", [scalar(this.ints([0])), scalar(end), scalar(this.ints([1]))]);
	}

	slice(x: string, starts: string, ends: string, axes: number[]): string {
		return this.node("Slice", [x, starts, ends, this.ints(axes)]);
	}

	concatInts(pieces: (number | string)[]): string {
		return this.node(
			"Concat",
			pieces.map((p) => (typeof p === "number" ? this.ints([p]) : p)),
			{ axis: 0 },
		);
	}
}

/** Frame-count values (1-element int64 vectors) that the relative attention's reshapes need. */
interface Lengths {
	t: string;
	tMinus1: string;
	twoT: string;
	twoTMinus1: string;
	/** Rows of the padded relative-embedding table to keep: `[start]`, `[start + 2T - 1]`. */
	relStart: string;
	relEnd: string;
	/** Padding of the table on each side: `max(T - (window + 1), 0)`. */
	relPad: string;
}

function textEncoder(
	w: GraphWriter,
	spec: SynthesizerGraphSpec,
	inputs: { phone: string; pitch?: string },
	mask: { channels: string; frames: string; pairsMasked: string },
	lengths: Lengths,
): { m: string; logs: string } {
	const { config } = spec;
	const hidden = config.hiddenChannels;
	const heads = config.heads;
	const headDim = hidden / heads;
	const { g } = w;
	let x = w.linear(inputs.phone, "enc_p.emb_phone");
	if (inputs.pitch !== undefined)
		x = w.node("Add", [x, w.node("Gather", [w.weight("enc_p.emb_pitch.weight"), inputs.pitch])]);
	x = w.leakyRelu(w.node("Mul", [x, w.scalar(Math.sqrt(hidden))]), 0.1);
	// Residual stream as [1, T, hidden]; masked on entry to the encoder and again inside it (as RVC does).
	x = w.node("Mul", [w.node("Mul", [x, mask.frames]), mask.frames]);

	const relativeTable = (name: string): string =>
		w.slice(w.pad(w.weight(name), [0, lengths.relPad, 0, 0, lengths.relPad, 0]), lengths.relStart, lengths.relEnd, [1]);
	const heads4 = (t: string): string =>
		w.node("Transpose", [w.reshape(t, [0, 0, heads, headDim])], { perm: [0, 2, 1, 3] });

	for (let l = 0; l < config.layers; l++) {
		const prefix = `enc_p.encoder.attn_layers.${l}`;
		const q = w.node("Div", [heads4(w.linear(x, `${prefix}.conv_q`)), w.scalar(Math.sqrt(headDim))]);
		const k = heads4(w.linear(x, `${prefix}.conv_k`));
		const v = heads4(w.linear(x, `${prefix}.conv_v`));
		let scores = w.node("MatMul", [q, w.node("Transpose", [k], { perm: [0, 1, 3, 2] })]);
		// Relative logits [1, h, T, 2T-1] to absolute [1, h, T, T]: pad a column, flatten, pad T-1, view as
		// [T+1, 2T-1], keep the first T rows from column T-1 on.
		const relativeLogits = w.node("MatMul", [
			q,
			w.node("Transpose", [relativeTable(`${prefix}.emb_rel_k`)], { perm: [0, 2, 1] }),
		]);
		let skewed = w.reshape(w.pad(relativeLogits, [0, 0, 0, 0, 0, 0, 0, 1]), [0, 0, -1]);
		skewed = w.reshape(w.pad(skewed, [0, 0, 0, 0, 0, lengths.tMinus1]), [0, 0, -1, lengths.twoTMinus1]);
		skewed = w.slice(skewed, w.concatInts([0, lengths.tMinus1]), w.concatInts([lengths.t, lengths.twoTMinus1]), [2, 3]);
		scores = w.node("Add", [scores, skewed]);
		scores = w.node("Where", [mask.pairsMasked, w.scalar(-1e4), scores]);
		const weights = w.node("Softmax", [scores], { axis: -1 });
		let context = w.node("MatMul", [weights, v]);
		// Absolute weights [1, h, T, T] to relative [1, h, T, 2T-1]: pad T-1 columns, flatten, pad T in front,
		// view as [T, 2T], drop the first column.
		let relative = w.reshape(w.pad(weights, [0, 0, 0, 0, 0, 0, 0, lengths.tMinus1]), [0, 0, -1]);
		relative = w.reshape(w.pad(relative, [0, 0, lengths.t, 0, 0, 0]), [0, 0, -1, lengths.twoT]);
		relative = w.slice(relative, w.ints([1]), w.ints([INT64_MAX]), [3]);
		context = w.node("Add", [context, w.node("MatMul", [relative, relativeTable(`${prefix}.emb_rel_v`)])]);
		const merged = w.reshape(w.node("Transpose", [context], { perm: [0, 2, 1, 3] }), [0, 0, hidden]);
		x = layerNorm(w, w.node("Add", [x, w.linear(merged, `${prefix}.conv_o`)]), `enc_p.encoder.norm_layers_1.${l}`);

		const ffn = `enc_p.encoder.ffn_layers.${l}`;
		const k0 = config.kernelSize;
		const same: [number, number] = [(k0 - 1) >> 1, k0 >> 1];
		let y = w.node("Transpose", [w.node("Mul", [x, mask.frames])], { perm: [0, 2, 1] });
		y = w.node("Relu", [w.conv(y, `${ffn}.conv_1`, { pad: same })]);
		y = w.node("Mul", [w.conv(w.node("Mul", [y, mask.channels]), `${ffn}.conv_2`, { pad: same }), mask.channels]);
		x = layerNorm(
			w,
			w.node("Add", [x, w.node("Transpose", [y], { perm: [0, 2, 1] })]),
			`enc_p.encoder.norm_layers_2.${l}`,
		);
	}
	x = w.node("Mul", [x, mask.frames]);
	const stats = w.node("Transpose", [w.node("Mul", [w.linear(x, "enc_p.proj"), mask.frames])], { perm: [0, 2, 1] });
	const inter = config.interChannels;
	const [m, logs] = g.nodeOutputs("Split", [stats, w.ints([inter, inter])], { axis: 1 }, [
		g.fresh("m"),
		g.fresh("logs"),
	]) as [string, string];
	return { m, logs };
}

function layerNorm(w: GraphWriter, x: string, name: string): string {
	return w.node("LayerNormalization", [x, w.weight(`${name}.gamma`), w.weight(`${name}.beta`)], {
		axis: -1,
		epsilon: { float: 1e-5 },
	});
}

/** RVC's `WN`: gated dilated convolutions conditioned on the speaker embedding. */
function waveNet(w: GraphWriter, x: string, mask: string, speaker: string, prefix: string, hidden: number): string {
	const conditions = w.g.nodeOutputs(
		"Split",
		[w.conv(speaker, `${prefix}.cond_layer`), w.ints(Array(FLOW_WAVENET_LAYERS).fill(2 * hidden))],
		{ axis: 1 },
		Array.from({ length: FLOW_WAVENET_LAYERS }, () => w.g.fresh("cond")),
	);
	let h = x;
	let output: string | undefined;
	const pad = (FLOW_KERNEL - 1) / 2;
	for (let i = 0; i < FLOW_WAVENET_LAYERS; i++) {
		const pre = w.node("Add", [w.conv(h, `${prefix}.in_layers.${i}`, { pad: [pad, pad] }), conditions[i] as string]);
		const [a, b] = w.g.nodeOutputs("Split", [pre, w.ints([hidden, hidden])], { axis: 1 }, [
			w.g.fresh("a"),
			w.g.fresh("b"),
		]) as [string, string];
		const acts = w.node("Mul", [w.node("Tanh", [a]), w.node("Sigmoid", [b])]);
		const resSkip = w.conv(acts, `${prefix}.res_skip_layers.${i}`);
		if (i < FLOW_WAVENET_LAYERS - 1) {
			const [res, skip] = w.g.nodeOutputs("Split", [resSkip, w.ints([hidden, hidden])], { axis: 1 }, [
				w.g.fresh("res"),
				w.g.fresh("skip"),
			]) as [string, string];
			h = w.node("Mul", [w.node("Add", [h, res]), mask]);
			output = output === undefined ? skip : w.node("Add", [output, skip]);
		} else output = output === undefined ? resSkip : w.node("Add", [output, resSkip]);
	}
	return w.node("Mul", [output as string, mask]);
}

function reversedFlow(w: GraphWriter, spec: SynthesizerGraphSpec, z: string, mask: string, speaker: string): string {
	const inter = spec.config.interChannels;
	const half = inter / 2;
	const flip = w.ints(Array.from({ length: inter }, (_, i) => inter - 1 - i));
	let x = z;
	for (let k = FLOW_COUPLINGS - 1; k >= 0; k--) {
		x = w.node("Gather", [x, flip], { axis: 1 });
		const prefix = `flow.flows.${2 * k}`;
		const [x0, x1] = w.g.nodeOutputs("Split", [x, w.ints([half, half])], { axis: 1 }, [
			w.g.fresh("x0"),
			w.g.fresh("x1"),
		]) as [string, string];
		const h = w.node("Mul", [w.conv(x0, `${prefix}.pre`), mask]);
		const m = w.node("Mul", [
			w.conv(waveNet(w, h, mask, speaker, `${prefix}.enc`, spec.config.hiddenChannels), `${prefix}.post`),
			mask,
		]);
		x = w.node("Concat", [x0, w.node("Mul", [w.node("Sub", [x1, m]), mask])], { axis: 1 });
	}
	return x;
}

/** RVC's `SourceModuleHnNSF` (one harmonic): excitation `[1, 1, F x hop]` from `pitchf`. */
function harmonicSource(w: GraphWriter, config: SynthesizerConfig, pitchf: string, noise: boolean): string {
	const hop = samplesPerFrame(config);
	const f0 = w.reshape(w.node("Expand", [w.node("Unsqueeze", [pitchf, w.ints([2])]), w.ints([1, 1, hop])]), [1, -1]);
	const increment = w.node("Div", [f0, w.scalar(config.sampleRate)]);
	const phase = w.node("CumSum", [w.node("Cast", [increment], { to: DOUBLE }), w.ints([1])]);
	const cycle = w.node("Cast", [w.node("Sub", [phase, w.node("Floor", [phase])])], { to: FLOAT });
	const sine = w.node("Mul", [w.node("Sin", [w.node("Mul", [cycle, w.scalar(2 * Math.PI)])]), w.scalar(SINE_AMP)]);
	const voiced = w.node("Cast", [w.node("Greater", [f0, w.scalar(0)])], { to: FLOAT });
	let excitation = w.node("Mul", [sine, voiced]);
	if (noise) {
		const amplitude = w.node("Add", [
			w.node("Mul", [voiced, w.scalar(VOICED_NOISE - SINE_AMP / 3)]),
			w.scalar(SINE_AMP / 3),
		]);
		excitation = w.node("Add", [
			excitation,
			w.node("Mul", [w.node("RandomNormalLike", [sine], { scale: { float: 1 } }), amplitude]),
		]);
	}
	const merged = w.node("Add", [
		w.node("Mul", [excitation, w.weight("dec.m_source.l_linear.weight", [])]),
		w.weight("dec.m_source.l_linear.bias", []),
	]);
	return w.node("Unsqueeze", [w.node("Tanh", [merged]), w.ints([1])]);
}

/**
 * `length` steps of `x` `[1, C, T]` from each of `starts` (`[N]`), as `[1, C, N, length]`: the pieces as rows.
 * `length` is a 1-element vector.
 */
function gatherPieces(w: GraphWriter, x: string, starts: string, length: string): string {
	const indices = w.node("Add", [
		w.node("Unsqueeze", [starts, w.ints([1])]),
		w.node("Unsqueeze", [w.range(length), w.ints([0])]),
	]);
	return w.node("Gather", [x, indices], { axis: 2 });
}

/**
 * HiFi-GAN or NSF decoder on `z` `[1, C, T]` (and the harmonic source `[1, 1, T x hop]`), to `audio` `[1, 1, samples]`.
 * With `pieces`, `z` and the source come as rows of pieces (`[1, C, N, T]`, `gatherPieces`), which the planar
 * layout convolves as they are and the 1-D one as a batch; the audio is the pieces' samples one after the other.
 */
function decoder(
	w: GraphWriter,
	spec: SynthesizerGraphSpec,
	layout: "1d" | "2d",
	frames: { z: string; speaker: string; harmonic?: string; pieces: boolean },
): string {
	const { config } = spec;
	const planar = layout === "2d";
	// Into the layout's shape: planar `[1, C, rows, T]`, 1-D `[batch, C, T]` (pieces are rows, or the batch).
	const lift = (t: string): string => {
		if (planar) return frames.pieces ? t : w.node("Unsqueeze", [t, w.ints([2])]);
		return frames.pieces ? w.node("Squeeze", [w.node("Transpose", [t], { perm: [2, 1, 0, 3] }), w.ints([2])]) : t;
	};
	const z = lift(frames.z);
	const speaker = planar ? w.node("Unsqueeze", [frames.speaker, w.ints([2])]) : frames.speaker;
	const harmonic = frames.harmonic === undefined ? undefined : lift(frames.harmonic);
	let x = w.node("Add", [w.conv(z, "dec.conv_pre", { pad: [3, 3], planar }), w.conv(speaker, "dec.cond", { planar })]);
	const kernels = config.resblockKernelSizes.length;
	const stages = config.upsampleRates.length;
	for (let i = 0; i < stages; i++) {
		const rate = config.upsampleRates[i] as number;
		const kernel = config.upsampleKernelSizes[i] as number;
		const p = Math.floor((kernel - rate) / 2);
		const up = w.tensor(`dec.ups.${i}.weight`).dims as [number, number, number];
		x = w.node(
			"ConvTranspose",
			[
				w.leakyRelu(x, LRELU_SLOPE),
				w.weight(`dec.ups.${i}.weight`, planar ? [up[0], up[1], 1, up[2]] : undefined),
				w.weight(`dec.ups.${i}.bias`),
			],
			planar
				? { kernel_shape: [1, kernel], strides: [1, rate], pads: [0, p, 0, p] }
				: { kernel_shape: [kernel], strides: [rate], pads: [p, p] },
		);
		if (harmonic !== undefined) {
			const stride = config.upsampleRates.slice(i + 1).reduce((a, b) => a * b, 1);
			const source =
				i + 1 < stages
					? w.conv(harmonic, `dec.noise_convs.${i}`, {
							stride,
							pad: [Math.floor(stride / 2), Math.floor(stride / 2)],
							planar,
						})
					: w.conv(harmonic, `dec.noise_convs.${i}`, { planar });
			x = w.node("Add", [x, source]);
		}
		let sum: string | undefined;
		config.resblockKernelSizes.forEach((k, j) => {
			const block = `dec.resblocks.${i * kernels + j}`;
			const dilations = config.resblockDilationSizes[j] as number[];
			let r = x;
			dilations.forEach((d, m) => {
				const dilated: [number, number] = [((k - 1) * d) >> 1, ((k - 1) * d) >> 1];
				const plain: [number, number] = [(k - 1) >> 1, (k - 1) >> 1];
				let t = w.leakyRelu(r, LRELU_SLOPE);
				if (config.resblock === "1") {
					t = w.conv(t, `${block}.convs1.${m}`, { pad: dilated, dilation: d, planar });
					t = w.conv(w.leakyRelu(t, LRELU_SLOPE), `${block}.convs2.${m}`, { pad: plain, planar });
				} else t = w.conv(t, `${block}.convs.${m}`, { pad: dilated, dilation: d, planar });
				r = w.node("Add", [t, r]);
			});
			sum = sum === undefined ? r : w.node("Add", [sum, r]);
		});
		x = w.node("Div", [sum as string, w.scalar(kernels)]);
	}
	const post = w.conv(w.leakyRelu(x, 0.01), "dec.conv_post", { pad: [3, 3], planar });
	if (frames.pieces) return w.g.node("Reshape", [w.node("Tanh", [post]), w.ints([1, 1, -1])], {}, ["audio"]);
	if (!planar) return w.g.node("Tanh", [post], {}, ["audio"]);
	return w.g.node("Squeeze", [w.node("Tanh", [post]), w.ints([2])], {}, ["audio"]);
}

export function buildSynthesizerGraph(
	spec: SynthesizerGraphSpec,
	options: SynthesizerGraphOptions = {},
): BuiltSynthesizer {
	const w = new GraphWriter(spec.weights);
	const { g } = w;
	const { config } = spec;
	const phone = g.input("phone", "float32", [1, "frames", spec.featureDim]);
	const phoneLengths = g.input("phone_lengths", "int64", [1]);
	const pitch = spec.f0 ? g.input("pitch", "int64", [1, "frames"]) : undefined;
	const pitchf = spec.f0 ? g.input("pitchf", "float32", [1, "frames"]) : undefined;
	const ds = g.input("ds", "int64", [1]);
	const rnd = g.input("rnd", "float32", [1, config.interChannels, "frames"]);

	// sequence_mask(phone_lengths): frame index < length.
	const t = w.slice(w.node("Shape", [phone]), w.ints([1]), w.ints([2]), [0]);
	const frameIndex = w.range(t);
	const valid = w.node("Less", [frameIndex, phoneLengths]);
	const validFloat = w.node("Cast", [valid], { to: FLOAT });
	const mask = {
		channels: w.reshape(validFloat, [1, 1, -1]),
		frames: w.reshape(validFloat, [1, -1, 1]),
		pairsMasked: w.node("Not", [
			w.node("And", [w.node("Unsqueeze", [valid, w.ints([1])]), w.node("Unsqueeze", [valid, w.ints([0])])]),
		]),
	};
	const tMinus1 = w.node("Sub", [t, w.ints([1])]);
	const twoT = w.node("Mul", [t, w.ints([2])]);
	const twoTMinus1 = w.node("Sub", [twoT, w.ints([1])]);
	const relStart = w.node("Max", [w.node("Sub", [w.ints([ATTENTION_WINDOW + 1]), t]), w.ints([0])]);
	const lengths: Lengths = {
		t,
		tMinus1,
		twoT,
		twoTMinus1,
		relStart,
		relEnd: w.node("Add", [relStart, twoTMinus1]),
		relPad: w.node("Max", [w.node("Sub", [t, w.ints([ATTENTION_WINDOW + 1])]), w.ints([0])]),
	};

	const speaker = w.node("Unsqueeze", [w.node("Gather", [w.weight("emb_g.weight"), ds]), w.ints([2])]);
	const speakerParameters = g.parameterCount;
	const { m, logs } = textEncoder(w, spec, pitch === undefined ? { phone } : { phone, pitch }, mask, lengths);
	const encoderParameters = g.parameterCount - speakerParameters;
	const zp = w.node("Mul", [w.node("Add", [m, w.node("Mul", [w.node("Exp", [logs]), rnd])]), mask.channels]);
	const z = reversedFlow(w, spec, zp, mask.channels, speaker);
	const flowParameters = g.parameterCount - speakerParameters - encoderParameters;
	let harmonic = pitchf === undefined ? undefined : harmonicSource(w, config, pitchf, options.sourceNoise ?? true);
	let decoded = w.node("Mul", [z, mask.channels]);
	const pieces = options.decodeSpan === true && decoderReachFrames(config) <= DECODE_SPAN_MARGIN_FRAMES;
	if (pieces) {
		const starts = g.input("decode_start", "int64", ["pieces"]);
		const length = g.input("decode_frames", "int64", [1]);
		decoded = gatherPieces(w, decoded, starts, length);
		if (harmonic !== undefined) {
			const hop = w.ints([samplesPerFrame(config)]);
			harmonic = gatherPieces(w, harmonic, w.node("Mul", [starts, hop]), w.node("Mul", [length, hop]));
		}
	}
	decoder(w, spec, options.decoderLayout ?? "2d", {
		z: decoded,
		speaker,
		pieces,
		...(harmonic !== undefined ? { harmonic } : {}),
	});
	g.output("audio", "float32", [1, 1, "samples"]);
	return {
		bytes: g.toModel({ producer: "voice-conversion gpu-runner rvc checkpoint" }),
		parameters: g.parameterCount,
		parts: {
			speaker_embedding: speakerParameters,
			text_encoder: encoderParameters,
			flow: flowParameters,
			[spec.f0 ? "nsf_generator" : "generator"]:
				g.parameterCount - speakerParameters - encoderParameters - flowParameters,
		},
	};
}
