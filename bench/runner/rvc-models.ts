/**
 * Full-size stand-ins for RVC v2's three ONNX models, with random weights, for timing only. Each follows its
 * network's architecture layer by layer (widths, depths, kernels, strides), so parameter counts and compute
 * match the real models; the few simplifications are listed per model. Built at bench time, never committed.
 */
import { OnnxGraphBuilder } from "../../gpu-runner/src/engines/rvc/onnx-writer.ts";
import type { Tensor } from "../../gpu-runner/src/engines/rvc/rvc-checkpoint.ts";
import {
	PUBLISHED_CONFIG_40K,
	parseSynthesizerConfig,
	synthesizerTensors,
} from "../../gpu-runner/src/engines/rvc/synthesizer-config.ts";
import {
	buildSynthesizerGraph,
	type SynthesizerGraphOptions,
} from "../../gpu-runner/src/engines/rvc/synthesizer-graph.ts";

export interface BuiltModel {
	name: string;
	bytes: Uint8Array;
	parameters: number;
	/** Parameters of a named part, e.g. the synthesizer's generator. */
	parts?: Record<string, number>;
	description: string;
}

/** Layer helpers over a graph builder, with uniform random weights scaled by 1/sqrt(fan-in). */
class Layers {
	readonly g = new OnnxGraphBuilder();
	#state: number;

	constructor(seed: number) {
		this.#state = seed >>> 0;
	}

	random(length: number, scale: number): Float32Array {
		const out = new Float32Array(length);
		let s = this.#state;
		for (let i = 0; i < length; i++) {
			s ^= s << 13;
			s ^= s >>> 17;
			s ^= s << 5;
			out[i] = ((s >>> 0) / 4294967296 - 0.5) * 2 * scale;
		}
		this.#state = s >>> 0 || 1;
		return out;
	}

	weight(prefix: string, dims: number[], fanIn: number): string {
		const length = dims.reduce((a, b) => a * b, 1);
		return this.g.floats(prefix, dims, this.random(length, 1 / Math.sqrt(fanIn)));
	}

	constant(prefix: string, dims: number[], value: number): string {
		return this.g.floats(prefix, dims, new Float32Array(dims.reduce((a, b) => a * b, 1)).fill(value));
	}

	conv1d(
		x: string,
		cin: number,
		cout: number,
		k: number,
		o: {
			stride?: number;
			pad?: number;
			dilation?: number;
			groups?: number;
			bias?: boolean;
		} = {},
	): string {
		const groups = o.groups ?? 1;
		const inputs = [x, this.weight("conv_w", [cout, cin / groups, k], (cin / groups) * k)];
		if (o.bias ?? true) inputs.push(this.weight("conv_b", [cout], cin * k));
		return this.g.node("Conv", inputs, {
			kernel_shape: [k],
			strides: [o.stride ?? 1],
			pads: [o.pad ?? 0, o.pad ?? 0],
			dilations: [o.dilation ?? 1],
			group: groups,
		});
	}

	conv2d(x: string, cin: number, cout: number, k: number, pad: number): string {
		return this.g.node(
			"Conv",
			[x, this.weight("conv2d_w", [cout, cin, k, k], cin * k * k), this.weight("conv2d_b", [cout], cin * k * k)],
			{
				kernel_shape: [k, k],
				pads: [pad, pad, pad, pad],
			},
		);
	}

	linear(x: string, din: number, dout: number, bias = true): string {
		const y = this.g.node("MatMul", [x, this.weight("linear_w", [din, dout], din)]);
		return bias ? this.g.node("Add", [y, this.weight("linear_b", [dout], din)]) : y;
	}

	layerNorm(x: string, dim: number): string {
		return this.g.node("LayerNormalization", [x, this.constant("ln_g", [dim], 1), this.constant("ln_b", [dim], 0)], {
			axis: -1,
			epsilon: { float: 1e-5 },
		});
	}

	/** GELU as `torch.onnx.export` writes `F.gelu` (torch 1.13 at opsets 11, 14 and 17): ((erf(x / sqrt 2) + 1) x) 0.5. */
	gelu(x: string): string {
		const erf = this.g.node("Erf", [this.g.node("Div", [x, this.g.scalar("sqrt2", Math.SQRT2)])]);
		const scaled = this.g.node("Mul", [x, this.g.node("Add", [erf, this.g.scalar("one", 1)])]);
		return this.g.node("Mul", [scaled, this.g.scalar("half", 0.5)]);
	}

	transpose(x: string, perm: number[]): string {
		return this.g.node("Transpose", [x], { perm });
	}

	reshape(x: string, shape: number[]): string {
		return this.g.node("Reshape", [x, this.g.int64s("shape", shape)]);
	}

	/** Multi-head self-attention on `[1, frames, dim]`. */
	selfAttention(x: string, dim: number, heads: number): string {
		const headDim = dim / heads;
		const split = (t: string, perm: number[]) => this.transpose(this.reshape(t, [0, 0, heads, headDim]), perm);
		const q = split(this.linear(x, dim, dim), [0, 2, 1, 3]);
		const k = split(this.linear(x, dim, dim), [0, 2, 3, 1]);
		const v = split(this.linear(x, dim, dim), [0, 2, 1, 3]);
		const scores = this.g.node("Mul", [this.g.node("MatMul", [q, k]), this.g.scalar("scale", 1 / Math.sqrt(headDim))]);
		const context = this.g.node("MatMul", [this.g.node("Softmax", [scores], { axis: -1 }), v]);
		return this.linear(this.reshape(this.transpose(context, [0, 2, 1, 3]), [0, 0, dim]), dim, dim);
	}
}

/**
 * ContentVec as RVC v2 uses it: HuBERT-base, output of transformer layer 12 (768-d, no final projection).
 * Feature encoder: 7 convolutions of 512 channels (kernel 10/3/3/3/3/2/2, stride 5/2/2/2/2/2/2, no bias;
 * per-channel group norm after the first, as instance norm), GELU; layer norm; projection 512 -> 768;
 * convolutional positional embedding (kernel 128, 16 groups); layer norm; 12 post-norm transformer layers
 * (768 wide, 12 heads, feed-forward 3072, GELU). Simplification: the positional convolution's weight norm is
 * folded into a plain weight, as an export does.
 */
export function buildContentVec(): BuiltModel {
	const l = new Layers(1);
	const { g } = l;
	const source = g.input("source", "float32", [1, 1, "samples"]);
	let x = l.conv1d(source, 1, 512, 10, { stride: 5, bias: false });
	x = l.gelu(
		g.node("InstanceNormalization", [x, l.constant("gn_g", [512], 1), l.constant("gn_b", [512], 0)], {
			epsilon: { float: 1e-5 },
		}),
	);
	for (const [k, stride] of [
		[3, 2],
		[3, 2],
		[3, 2],
		[3, 2],
		[2, 2],
		[2, 2],
	] as const)
		x = l.gelu(l.conv1d(x, 512, 512, k, { stride, bias: false }));
	x = l.linear(l.layerNorm(l.transpose(x, [0, 2, 1]), 512), 512, 768);
	let position = l.conv1d(l.transpose(x, [0, 2, 1]), 768, 768, 128, {
		pad: 64,
		groups: 16,
	});
	// An even kernel with padding 64 gives one frame too many; fairseq's SamePad drops the last.
	position = g.node("Slice", [position, g.int64s("starts", [0]), g.int64s("ends", [-1]), g.int64s("axes", [2])]);
	x = l.layerNorm(g.node("Add", [x, l.transpose(l.gelu(position), [0, 2, 1])]), 768);
	for (let layer = 0; layer < 12; layer++) {
		x = l.layerNorm(g.node("Add", [x, l.selfAttention(x, 768, 12)]), 768);
		x = l.layerNorm(g.node("Add", [x, l.linear(l.gelu(l.linear(x, 768, 3072)), 3072, 768)]), 768);
	}
	g.node("Identity", [x], {}, ["embed"]);
	g.output("embed", "float32", [1, "frames", 768]);
	return {
		name: "contentvec",
		bytes: g.toModel(),
		parameters: g.parameterCount,
		description:
			"HuBERT-base layout to layer 12: 7-conv feature encoder, conv positional embedding, 12 x (768, 12 heads, FFN 3072)",
	};
}

/**
 * RMVPE (`E2E(4, 1, (2, 2))` in RVC's rmvpe.py): a deep U-Net over the [frames x 128] log-mel image with 5
 * encoder levels (16..256 channels, 4 residual conv blocks each, 2x2 average pooling), 4 intermediate
 * residual stages of 4 blocks at 512 channels, 5 decoder levels (transposed convolutions, skip
 * concatenation, 4 blocks each), a 3-channel output conv, a bidirectional GRU (384 -> 2 x 256) and a
 * 360-bin sigmoid head. Simplification: batch norms are folded into the convolutions' biases, as ONNX
 * export with constant folding does.
 */
export function buildRmvpe(): BuiltModel {
	const l = new Layers(2);
	const { g } = l;
	const mel = g.input("mel", "float32", [1, 128, "frames"]);
	let x = g.node("Unsqueeze", [l.transpose(mel, [0, 2, 1]), g.int64s("axes", [1])]);
	x = g.node("Add", [g.node("Mul", [x, g.scalar("bn_scale", 1)]), g.scalar("bn_shift", 0)]);
	const convBlockRes = (input: string, cin: number, cout: number): string => {
		const h = g.node("Relu", [l.conv2d(g.node("Relu", [l.conv2d(input, cin, cout, 3, 1)]), cout, cout, 3, 1)]);
		return g.node("Add", [h, cin === cout ? input : l.conv2d(input, cin, cout, 1, 0)]);
	};
	const skips: string[] = [];
	let cin = 1;
	let c = 16;
	for (let level = 0; level < 5; level++) {
		for (let b = 0; b < 4; b++) x = convBlockRes(x, b === 0 ? cin : c, c);
		skips.push(x);
		x = g.node("AveragePool", [x], { kernel_shape: [2, 2], strides: [2, 2] });
		cin = c;
		c *= 2;
	}
	for (let stage = 0; stage < 4; stage++) {
		for (let b = 0; b < 4; b++) x = convBlockRes(x, stage === 0 && b === 0 ? 256 : 512, 512);
	}
	cin = 512;
	for (let level = 0; level < 5; level++) {
		const cout = cin / 2;
		const up = g.node(
			"ConvTranspose",
			[x, l.weight("deconv_w", [cin, cout, 3, 3], cin * 9), l.weight("deconv_b", [cout], cin * 9)],
			{
				kernel_shape: [3, 3],
				strides: [2, 2],
				pads: [1, 1, 1, 1],
				output_padding: [1, 1],
			},
		);
		x = g.node("Concat", [g.node("Relu", [up]), skips[4 - level] as string], {
			axis: 1,
		});
		x = convBlockRes(x, 2 * cout, cout);
		for (let b = 1; b < 4; b++) x = convBlockRes(x, cout, cout);
		cin = cout;
	}
	x = l.conv2d(x, 16, 3, 3, 1);
	// [1, 3, T, 128] -> [T, 1, 384] (sequence-major for the GRU).
	x = l.transpose(l.reshape(l.transpose(x, [0, 2, 1, 3]), [0, 0, 384]), [1, 0, 2]);
	const gruOut = g.node(
		"GRU",
		[
			x,
			l.weight("gru_w", [2, 768, 384], 384),
			l.weight("gru_r", [2, 768, 256], 256),
			l.weight("gru_b", [2, 1536], 256),
		],
		{
			hidden_size: 256,
			direction: "bidirectional",
			linear_before_reset: 1,
		},
	);
	// Y is [T, 2, 1, 256] -> [1, T, 512], forward and backward features side by side.
	x = l.reshape(l.transpose(gruOut, [2, 0, 1, 3]), [0, 0, 512]);
	g.node("Sigmoid", [l.linear(x, 512, 360)], {}, ["salience"]);
	g.output("salience", "float32", [1, "frames", 360]);
	return {
		name: "rmvpe",
		bytes: g.toModel(),
		parameters: g.parameterCount,
		description: "RMVPE E2E(4,1,(2,2)): U-Net 16..512 channels, 4 res blocks per level, BiGRU 384->2x256, 360 bins",
	};
}

/**
 * RVC v2's 40 kHz synthesizer with the published config (`extract_small_model`'s "40k"), built by the engine's
 * own builder (`src/engines/rvc/synthesizer-graph.ts`, the graph a `.pth` voice runs) from random weights of
 * the shapes that config implies, so the bench times exactly what voices run.
 */
export function buildSynthesizer40k(options: SynthesizerGraphOptions = { decodeSpan: true }): BuiltModel {
	const random = new Layers(3);
	const config = parseSynthesizerConfig(PUBLISHED_CONFIG_40K);
	const weights = new Map<string, Tensor>();
	for (const [name, spec] of synthesizerTensors(config, 768, true)) {
		const dims = spec.dims.map((d) => (d === -1 ? config.speakers : d));
		const length = dims.reduce((a, b) => a * b, 1);
		const fanIn = dims.length > 1 ? length / (dims[0] as number) : 1;
		weights.set(name, { dims, data: random.random(length, 1 / Math.sqrt(fanIn)) });
	}
	const built = buildSynthesizerGraph({ config, featureDim: 768, f0: true, weights }, options);
	return {
		name: "synthesizer",
		bytes: built.bytes,
		parameters: built.parameters,
		parts: built.parts,
		description:
			"RVC v2 40 kHz SynthesizerTrnMs768NSFsid inference path: relative-attention text encoder, reversed flow, NSF-HiFiGAN [10,10,2,2]",
	};
}
