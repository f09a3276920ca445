/**
 * Full-size stand-ins for RVC v2's three ONNX models, with random weights, for timing only. Each follows its
 * network's architecture layer by layer (widths, depths, kernels, strides), so parameter counts and compute
 * match the real models; the few simplifications are listed per model. Built at bench time, never committed.
 */
import { OnnxGraphBuilder } from "../src/engines/rvc/onnx-writer.ts";

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

	gelu(x: string): string {
		const erf = this.g.node("Erf", [this.g.node("Mul", [x, this.g.scalar("inv_sqrt2", Math.SQRT1_2)])]);
		return this.g.node("Mul", [
			this.g.node("Mul", [x, this.g.scalar("half", 0.5)]),
			this.g.node("Add", [erf, this.g.scalar("one", 1)]),
		]);
	}

	leakyRelu(x: string, alpha: number): string {
		return this.g.node("LeakyRelu", [x], { alpha: { float: alpha } });
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

	split(x: string, axis: number, sizes: number[]): string[] {
		const outputs = sizes.map(() => this.g.fresh("split"));
		return this.g.nodeOutputs("Split", [x, this.g.int64s("split", sizes)], { axis }, outputs);
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
 * RVC v2's 40 kHz synthesizer (`SynthesizerTrnMs768NSFsid`, inference path as exported to ONNX):
 * - text encoder: phone 768 -> 192 plus a 256 x 192 pitch embedding, 6 post-norm transformer layers
 *   (192 wide, 2 heads, convolutional FFN 768 with kernel 3), projection to mean and log-scale;
 *   z = m + exp(logs) x rnd.
 * - flow, reversed: 4 mean-only coupling layers with channel flips, each a WaveNet of 3 layers (192 hidden,
 *   kernel 5) conditioned on the 256-d speaker embedding.
 * - NSF-HiFiGAN generator: conv 192 -> 512, upsampling x10, x10, x2, x2 (kernels 16, 16, 4, 4) down to
 *   32 channels, three residual blocks per stage (kernels 3, 7, 11, dilations 1, 3, 5), a harmonic sine
 *   source from pitchf injected by strided convolutions at every stage, speaker conditioning, tanh output.
 * Simplifications: the text encoder uses plain attention instead of relative-position attention
 * (window 10; about 10k fewer parameters, negligible compute at 100 frames/s), and the sine source
 * integrates phase at the audio rate instead of RVC's frame-rate trick (same op count).
 */
export function buildSynthesizer40k(): BuiltModel {
	const l = new Layers(3);
	const { g } = l;
	const sampleRate = 40000;
	const rates = [10, 10, 2, 2];
	const kernels = [16, 16, 4, 4];
	const upp = rates.reduce((a, b) => a * b, 1);
	const phone = g.input("phone", "float32", [1, "frames", 768]);
	const lengths = g.input("phone_lengths", "int64", [1]);
	const pitch = g.input("pitch", "int64", [1, "frames"]);
	const pitchf = g.input("pitchf", "float32", [1, "frames"]);
	const ds = g.input("ds", "int64", [1]);
	const rnd = g.input("rnd", "float32", [1, 192, "frames"]);
	// x_mask = sequence_mask(phone_lengths): frame index < length, [1, 1, frames].
	const ones = g.node("Add", [g.node("Mul", [pitchf, g.scalar("zero_f", 0)]), g.scalar("one_f", 1)]);
	const index = g.node("Sub", [g.node("CumSum", [ones, g.int64s("axis", [1])]), g.scalar("one_i", 1)]);
	const mask = g.node("Unsqueeze", [
		g.node("Cast", [g.node("Less", [index, g.node("Cast", [lengths], { to: 1 })])], { to: 1 }),
		g.int64s("axes", [1]),
	]);

	const speaker = g.node("Unsqueeze", [
		g.node("Gather", [l.weight("emb_g", [109, 256], 1), ds]),
		g.int64s("axes", [2]),
	]);

	// Text encoder.
	const before = g.parameterCount;
	let x = g.node("Add", [l.linear(phone, 768, 192), g.node("Gather", [l.weight("emb_pitch", [256, 192], 1), pitch])]);
	x = l.leakyRelu(g.node("Mul", [x, g.scalar("sqrt_hidden", Math.sqrt(192))]), 0.1);
	for (let layer = 0; layer < 6; layer++) {
		x = l.layerNorm(g.node("Add", [x, l.selfAttention(x, 192, 2)]), 192);
		const ffn = l.conv1d(g.node("Relu", [l.conv1d(l.transpose(x, [0, 2, 1]), 192, 768, 3, { pad: 1 })]), 768, 192, 3, {
			pad: 1,
		});
		x = l.layerNorm(g.node("Add", [x, l.transpose(ffn, [0, 2, 1])]), 192);
	}
	const [m, logs] = l.split(l.conv1d(l.transpose(x, [0, 2, 1]), 192, 384, 1), 1, [192, 192]) as [string, string];
	let z = g.node("Mul", [g.node("Add", [m, g.node("Mul", [g.node("Exp", [logs]), rnd])]), mask]);
	const encoderParameters = g.parameterCount - before;

	// Flow, reversed.
	const flowStart = g.parameterCount;
	const flip = g.int64s(
		"flip",
		Array.from({ length: 192 }, (_, i) => 191 - i),
	);
	for (let layer = 0; layer < 4; layer++) {
		z = g.node("Gather", [z, flip], { axis: 1 });
		const [x0, x1] = l.split(z, 1, [96, 96]) as [string, string];
		let h = l.conv1d(x0, 96, 192, 1);
		const conditions = l.split(l.conv1d(speaker, 256, 2 * 192 * 3, 1), 1, [384, 384, 384]);
		let skip: string | undefined;
		for (let i = 0; i < 3; i++) {
			const pre = g.node("Add", [l.conv1d(h, 192, 384, 5, { pad: 2 }), conditions[i] as string]);
			const [a, b] = l.split(pre, 1, [192, 192]) as [string, string];
			const acts = g.node("Mul", [g.node("Tanh", [a]), g.node("Sigmoid", [b])]);
			if (i < 2) {
				const [res, s] = l.split(l.conv1d(acts, 192, 384, 1), 1, [192, 192]) as [string, string];
				h = g.node("Add", [h, res]);
				skip = skip === undefined ? s : g.node("Add", [skip, s]);
			} else {
				skip = g.node("Add", [skip as string, l.conv1d(acts, 192, 192, 1)]);
			}
		}
		z = g.node("Mul", [
			g.node("Concat", [x0, g.node("Sub", [x1, l.conv1d(skip as string, 192, 96, 1)])], { axis: 1 }),
			mask,
		]);
	}
	const flowParameters = g.parameterCount - flowStart;

	// NSF generator.
	const generatorStart = g.parameterCount;
	const f0 = l.reshape(
		g.node("Expand", [g.node("Unsqueeze", [pitchf, g.int64s("axes", [2])]), g.int64s("per_frame", [1, 1, upp])]),
		[1, -1],
	);
	const phase = g.node("CumSum", [g.node("Mul", [f0, g.scalar("inv_rate", 1 / sampleRate)]), g.int64s("axis", [1])]);
	const sine = g.node("Mul", [
		g.node("Sin", [g.node("Mul", [phase, g.scalar("two_pi", 2 * Math.PI)])]),
		g.scalar("sine_amp", 0.1),
	]);
	const voiced = g.node("Cast", [g.node("Greater", [f0, g.scalar("zero", 0)])], { to: 1 });
	const noiseAmp = g.node("Add", [
		g.node("Mul", [voiced, g.scalar("voiced_noise", 0.003 - 0.1 / 3)]),
		g.scalar("unvoiced_noise", 0.1 / 3),
	]);
	const noise = g.node("Mul", [g.node("RandomNormalLike", [sine], { scale: { float: 1 } }), noiseAmp]);
	const excitation = g.node("Unsqueeze", [
		g.node("Add", [g.node("Mul", [sine, voiced]), noise]),
		g.int64s("axes", [1]),
	]);
	const harmonic = g.node("Tanh", [
		g.node("Add", [g.node("Mul", [excitation, l.weight("l_linear_w", [1], 1)]), l.weight("l_linear_b", [1], 1)]),
	]);

	let y = g.node("Add", [l.conv1d(z, 192, 512, 7, { pad: 3 }), l.conv1d(speaker, 256, 512, 1)]);
	let channels = 512;
	for (let stage = 0; stage < 4; stage++) {
		const rate = rates[stage] as number;
		const kernel = kernels[stage] as number;
		const out = channels / 2;
		y = g.node(
			"ConvTranspose",
			[
				l.leakyRelu(y, 0.1),
				l.weight("up_w", [channels, out, kernel], channels * kernel),
				l.weight("up_b", [out], channels * kernel),
			],
			{
				kernel_shape: [kernel],
				strides: [rate],
				pads: [(kernel - rate) / 2, (kernel - rate) / 2],
			},
		);
		const strideF0 = rates.slice(stage + 1).reduce((a, b) => a * b, 1);
		const source =
			stage < 3
				? l.conv1d(harmonic, 1, out, strideF0 * 2, {
						stride: strideF0,
						pad: strideF0 / 2,
					})
				: l.conv1d(harmonic, 1, out, 1);
		y = g.node("Add", [y, source]);
		let sum: string | undefined;
		for (const k of [3, 7, 11]) {
			let r = y;
			for (const dilation of [1, 3, 5]) {
				const t = l.conv1d(l.leakyRelu(r, 0.1), out, out, k, {
					dilation,
					pad: (dilation * (k - 1)) / 2,
				});
				r = g.node("Add", [r, l.conv1d(l.leakyRelu(t, 0.1), out, out, k, { pad: (k - 1) / 2 })]);
			}
			sum = sum === undefined ? r : g.node("Add", [sum, r]);
		}
		y = g.node("Mul", [sum as string, g.scalar("third", 1 / 3)]);
		channels = out;
	}
	y = g.node("Tanh", [l.conv1d(l.leakyRelu(y, 0.01), channels, 1, 7, { pad: 3, bias: false })], {}, ["audio"]);
	g.output("audio", "float32", [1, 1, "samples"]);
	const generatorParameters = g.parameterCount - generatorStart;
	return {
		name: "synthesizer",
		bytes: g.toModel(),
		parameters: g.parameterCount,
		parts: {
			text_encoder: encoderParameters,
			flow: flowParameters,
			nsf_generator: generatorParameters,
		},
		description:
			"RVC v2 40 kHz SynthesizerTrnMs768NSFsid inference path: text encoder, reversed flow, NSF-HiFiGAN [10,10,2,2]",
	};
}
