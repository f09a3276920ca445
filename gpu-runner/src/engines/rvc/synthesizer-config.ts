/**
 * RVC's synthesizer configuration (the checkpoint's 18-item `config` list) and the tensors it implies: every
 * parameter name of `SynthesizerTrnMs{256,768}NSFsid[_nono]`'s inference path (no `enc_q`) with its shape
 * after weight norm is folded, and which of them RVC stores weight-normed (`weight_g`/`weight_v`).
 * Names and shapes follow RVC's `infer/module/models.py`, `attentions.py` and `modules.py`.
 */

import { RVC_V1_FEATURE_DIM, RVC_V2_FEATURE_DIM } from "../../../../src/contracts/runner.ts";
import { quotePickleValue } from "./pickle-reader.ts";

export type RvcVersion = "v1" | "v2";

/** ContentVec feature width each RVC version's synthesizer reads: 256 for v1, 768 for v2 (the contract's widths). */
export const FEATURE_DIMS: Record<RvcVersion, number> = { v1: RVC_V1_FEATURE_DIM, v2: RVC_V2_FEATURE_DIM };

export interface SynthesizerConfig {
	specChannels: number;
	segmentSize: number;
	/** Channels of the latent `z` (and of the `rnd` input): 192 in RVC. */
	interChannels: number;
	hiddenChannels: number;
	filterChannels: number;
	heads: number;
	layers: number;
	kernelSize: number;
	dropout: number;
	resblock: "1" | "2";
	resblockKernelSizes: number[];
	resblockDilationSizes: number[][];
	upsampleRates: number[];
	upsampleInitialChannel: number;
	upsampleKernelSizes: number[];
	/** `spk_embed_dim`; RVC replaces it with the rows of `emb_g.weight` at load, and so does the reader. */
	speakers: number;
	ginChannels: number;
	sampleRate: number;
}

/** The text encoder's relative attention window (RVC's `attentions.Encoder` default). */
export const ATTENTION_WINDOW = 10;
/** The flow's fixed shape in RVC: 4 mean-only couplings of 3 WaveNet layers, kernel 5, dilation rate 1. */
export const FLOW_COUPLINGS = 4;
export const FLOW_WAVENET_LAYERS = 3;
export const FLOW_KERNEL = 5;

/** RVC's published 40 kHz v2 configuration (`extract_small_model`), the one the benchmark times. */
export const PUBLISHED_CONFIG_40K: readonly unknown[] = [
	1025,
	32,
	192,
	192,
	768,
	2,
	6,
	3,
	0,
	"1",
	[3, 7, 11],
	[
		[1, 3, 5],
		[1, 3, 5],
		[1, 3, 5],
	],
	[10, 10, 2, 2],
	512,
	[16, 16, 4, 4],
	109,
	256,
	40000,
];

/**
 * The most encoder layers, residual block kernels and upsampling stages a config may have (RVC's have 6, 3 and 4 or
 * 5): the tensors the config implies are listed before any is read, so a config of a few bytes must not name millions.
 */
export const MAX_ENCODER_LAYERS = 64;
export const MAX_CONFIG_LIST = 16;

/** Why a config list is not RVC's: thrown by `parseSynthesizerConfig` with the field named. */
export class SynthesizerConfigError extends Error {
	constructor(message: string) {
		super(message);
		this.name = "SynthesizerConfigError";
	}
}

const FIELDS = [
	"spec_channels",
	"segment_size",
	"inter_channels",
	"hidden_channels",
	"filter_channels",
	"n_heads",
	"n_layers",
	"kernel_size",
	"p_dropout",
	"resblock",
	"resblock_kernel_sizes",
	"resblock_dilation_sizes",
	"upsample_rates",
	"upsample_initial_channel",
	"upsample_kernel_sizes",
	"spk_embed_dim",
	"gin_channels",
	"sampling_rate",
] as const;

const SAMPLE_RATES: Record<string, number> = { "32k": 32000, "40k": 40000, "48k": 48000 };

export function parseSynthesizerConfig(list: readonly unknown[]): SynthesizerConfig {
	if (list.length !== FIELDS.length)
		throw new SynthesizerConfigError(`config has ${list.length} items, RVC's has ${FIELDS.length}`);
	const field = (i: number) => ({ name: FIELDS[i] as string, value: list[i] });
	const positive = (i: number): number => {
		const { name, value } = field(i);
		if (typeof value !== "number" || !Number.isInteger(value) || value <= 0)
			throw new SynthesizerConfigError(`config ${name} is ${quotePickleValue(value)}, expected a positive integer`);
		return value;
	};
	const positives = (i: number): number[] => {
		const { name, value } = field(i);
		if (!Array.isArray(value) || value.length === 0 || !value.every((v) => Number.isInteger(v) && v > 0))
			throw new SynthesizerConfigError(
				`config ${name} is ${quotePickleValue(value)}, expected a list of positive integers`,
			);
		return value as number[];
	};
	const dropout = list[8];
	if (typeof dropout !== "number" || dropout < 0 || dropout >= 1)
		throw new SynthesizerConfigError(`config p_dropout is ${quotePickleValue(dropout)}, expected a number in [0, 1)`);
	// RVC writes "1" or "2"; a number is taken as its text, and nothing else is (String of a list spells it out).
	const resblock = typeof list[9] === "string" || typeof list[9] === "number" ? String(list[9]) : undefined;
	if (resblock !== "1" && resblock !== "2")
		throw new SynthesizerConfigError(`config resblock is ${quotePickleValue(list[9])}, expected "1" or "2"`);
	const dilations = list[11];
	if (!Array.isArray(dilations))
		throw new SynthesizerConfigError(
			`config resblock_dilation_sizes is ${quotePickleValue(dilations)}, expected lists`,
		);
	// Before the lists are read: a pickle can make every item of a long list the same long list.
	const longest = Math.max(
		dilations.length,
		...dilations.slice(0, MAX_CONFIG_LIST).map((d: unknown) => (Array.isArray(d) ? d.length : 0)),
	);
	if (longest > MAX_CONFIG_LIST)
		throw new SynthesizerConfigError(
			`config resblock_dilation_sizes holds a list of ${longest} items, at most ${MAX_CONFIG_LIST}`,
		);
	const rawRate = list[17];
	const sampleRate = typeof rawRate === "string" ? SAMPLE_RATES[rawRate] : rawRate;
	if (typeof sampleRate !== "number" || !Number.isInteger(sampleRate) || sampleRate <= 0)
		throw new SynthesizerConfigError(
			`config sampling_rate is ${quotePickleValue(rawRate)}, expected Hz or "32k"/"40k"/"48k"`,
		);
	const config: SynthesizerConfig = {
		specChannels: positive(0),
		segmentSize: positive(1),
		interChannels: positive(2),
		hiddenChannels: positive(3),
		filterChannels: positive(4),
		heads: positive(5),
		layers: positive(6),
		kernelSize: positive(7),
		dropout,
		resblock,
		resblockKernelSizes: positives(10),
		resblockDilationSizes: dilations.map((_, j) => {
			const d = dilations[j];
			// RVC's ResBlock1 reads three dilations and ResBlock2 two, ignoring any further entries.
			const used = resblock === "1" ? 3 : 2;
			if (!Array.isArray(d) || d.length < used || !d.every((v) => Number.isInteger(v) && v > 0))
				throw new SynthesizerConfigError(
					`config resblock_dilation_sizes[${j}] is ${quotePickleValue(d)}, expected at least ${used} positive integers for resblock "${resblock}"`,
				);
			return (d as number[]).slice(0, used);
		}),
		upsampleRates: positives(12),
		upsampleInitialChannel: positive(13),
		upsampleKernelSizes: positives(14),
		speakers: positive(15),
		ginChannels: positive(16),
		sampleRate,
	};
	const problems: string[] = [];
	if (config.layers > MAX_ENCODER_LAYERS) problems.push(`n_layers is ${config.layers}, at most ${MAX_ENCODER_LAYERS}`);
	for (const [name, list] of [
		["resblock_kernel_sizes", config.resblockKernelSizes],
		["upsample_rates", config.upsampleRates],
	] as const) {
		if (list.length > MAX_CONFIG_LIST) problems.push(`${name} has ${list.length} items, at most ${MAX_CONFIG_LIST}`);
	}
	if (config.resblockDilationSizes.length !== config.resblockKernelSizes.length)
		problems.push("resblock_dilation_sizes and resblock_kernel_sizes differ in length");
	if (config.upsampleKernelSizes.length !== config.upsampleRates.length)
		problems.push("upsample_kernel_sizes and upsample_rates differ in length");
	if (config.hiddenChannels % config.heads !== 0) problems.push("hidden_channels is not a multiple of n_heads");
	if (config.interChannels % 2 !== 0) problems.push("inter_channels is odd");
	if (config.upsampleInitialChannel % 2 ** config.upsampleRates.length !== 0)
		problems.push("upsample_initial_channel does not halve once per upsampling stage");
	if (problems.length > 0) throw new SynthesizerConfigError(`config is inconsistent: ${problems.join("; ")}`);
	return config;
}

/** Output samples per 10 ms input frame: the product of the upsampling rates. */
export function samplesPerFrame(config: SynthesizerConfig): number {
	return config.upsampleRates.reduce((a, b) => a * b, 1);
}

export interface TensorSpec {
	/** Shape after folding weight norm; -1 where any size goes (the speaker count of `emb_g`). */
	dims: number[];
	/** RVC stores it as `<name minus .weight>.weight_g` / `.weight_v`. */
	weightNormed: boolean;
}

/** Every tensor the inference path reads, by RVC's parameter name. */
export function synthesizerTensors(
	config: SynthesizerConfig,
	featureDim: number,
	f0: boolean,
): Map<string, TensorSpec> {
	const specs = new Map<string, TensorSpec>();
	const add = (name: string, dims: number[], weightNormed = false) => specs.set(name, { dims, weightNormed });
	const conv = (prefix: string, out: number, cin: number, kernel: number, weightNormed = false, bias = true) => {
		add(`${prefix}.weight`, [out, cin, kernel], weightNormed);
		if (bias) add(`${prefix}.bias`, [out]);
	};
	const hidden = config.hiddenChannels;
	const inter = config.interChannels;

	add("enc_p.emb_phone.weight", [hidden, featureDim]);
	add("enc_p.emb_phone.bias", [hidden]);
	if (f0) add("enc_p.emb_pitch.weight", [256, hidden]);
	for (let l = 0; l < config.layers; l++) {
		const attention = `enc_p.encoder.attn_layers.${l}`;
		for (const c of ["conv_q", "conv_k", "conv_v", "conv_o"]) conv(`${attention}.${c}`, hidden, hidden, 1);
		add(`${attention}.emb_rel_k`, [1, 2 * ATTENTION_WINDOW + 1, hidden / config.heads]);
		add(`${attention}.emb_rel_v`, [1, 2 * ATTENTION_WINDOW + 1, hidden / config.heads]);
		for (const norm of ["norm_layers_1", "norm_layers_2"]) {
			add(`enc_p.encoder.${norm}.${l}.gamma`, [hidden]);
			add(`enc_p.encoder.${norm}.${l}.beta`, [hidden]);
		}
		conv(`enc_p.encoder.ffn_layers.${l}.conv_1`, config.filterChannels, hidden, config.kernelSize);
		conv(`enc_p.encoder.ffn_layers.${l}.conv_2`, hidden, config.filterChannels, config.kernelSize);
	}
	conv("enc_p.proj", 2 * inter, hidden, 1);

	for (let k = 0; k < FLOW_COUPLINGS; k++) {
		const coupling = `flow.flows.${2 * k}`;
		conv(`${coupling}.pre`, hidden, inter / 2, 1);
		conv(`${coupling}.enc.cond_layer`, 2 * hidden * FLOW_WAVENET_LAYERS, config.ginChannels, 1, true);
		for (let i = 0; i < FLOW_WAVENET_LAYERS; i++) {
			conv(`${coupling}.enc.in_layers.${i}`, 2 * hidden, hidden, FLOW_KERNEL, true);
			const out = i < FLOW_WAVENET_LAYERS - 1 ? 2 * hidden : hidden;
			conv(`${coupling}.enc.res_skip_layers.${i}`, out, hidden, 1, true);
		}
		conv(`${coupling}.post`, inter / 2, hidden, 1);
	}

	add("emb_g.weight", [-1, config.ginChannels]);
	const initial = config.upsampleInitialChannel;
	conv("dec.conv_pre", initial, inter, 7);
	conv("dec.cond", initial, config.ginChannels, 1);
	if (f0) {
		add("dec.m_source.l_linear.weight", [1, 1]);
		add("dec.m_source.l_linear.bias", [1]);
	}
	const kernels = config.resblockKernelSizes.length;
	let channels = initial;
	config.upsampleRates.forEach((_, i) => {
		const out = channels / 2;
		add(`dec.ups.${i}.weight`, [channels, out, config.upsampleKernelSizes[i] as number], true);
		add(`dec.ups.${i}.bias`, [out]);
		if (f0) {
			const stride = config.upsampleRates.slice(i + 1).reduce((a, b) => a * b, 1);
			conv(`dec.noise_convs.${i}`, out, 1, i + 1 < config.upsampleRates.length ? 2 * stride : 1);
		}
		config.resblockKernelSizes.forEach((kernel, j) => {
			const block = `dec.resblocks.${i * kernels + j}`;
			const dilations = config.resblockDilationSizes[j] as number[];
			dilations.forEach((_, m) => {
				if (config.resblock === "1") {
					conv(`${block}.convs1.${m}`, out, out, kernel, true);
					conv(`${block}.convs2.${m}`, out, out, kernel, true);
				} else conv(`${block}.convs.${m}`, out, out, kernel, true);
			});
		});
		channels = out;
	});
	conv("dec.conv_post", 1, channels, 7, false, false);
	return specs;
}
