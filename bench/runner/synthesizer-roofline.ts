/**
 * How fast the synthesizer could run on this machine at all, for `rvc-bench.ts`: its arithmetic counted from
 * RVC's config, and the decoder's convolutions timed alone, as the graph runs them, on this machine's cores.
 *
 * - Arithmetic: 2 FLOP per multiply-add of every weight, at the rate its layer runs (the decoder's frame rate,
 *   100 per second in RVC's configs, times each upsampling stage's factor). Elementwise work, the NSF source and
 *   the text encoder's attention products (about 0.3 GFLOP per second of window) are left out, so every figure
 *   built on it is a lower bound.
 * - Rates: `Conv` on `[1, C, rows, T]` (onnxruntime's NCHWc kernels, the synthesizer's own session options, one
 *   row per decoded piece as the engine cuts spans) per stage's width and residual kernel, on one 5.32 s window at
 *   that stage's rate, best of a few runs: a chain of five less a lone one, without the layout changes a lone one pays.
 * - Floor (`rvc-bench.ts`): the time the synthesizer would take if all of its arithmetic ran at the fastest rate any of those
 *   convolutions reached. It is onnxruntime's kernels' best on this machine, not the hardware's peak: a faster
 *   kernel (a native custom operator) would lower it, and a smaller decoder (another voice) would change the
 *   arithmetic.
 */
import "../../gpu-runner/src/engines/rvc/onnxruntime-telemetry-off.ts";
import * as ort from "onnxruntime-node";
import { sessionOptionsFor } from "../../gpu-runner/src/engines/rvc/execution-provider.ts";
import { type ConvLayer, convolutionChainModel } from "../../gpu-runner/src/engines/rvc/probe-convolution.ts";
import { NormalNoise } from "../../gpu-runner/src/engines/rvc/random.ts";
import { type SynthesizerConfig, synthesizerTensors } from "../../gpu-runner/src/engines/rvc/synthesizer-config.ts";

/** The decoder's frame rate in RVC's configs: the sample rate over the product of the upsampling rates (400-480). */
const FRAMES_PER_SECOND = 100;

export interface DecoderStage {
	channels: number;
	/** Samples per second after this stage's upsampling. */
	rate: number;
	/** FLOP per decoded second of each residual kernel's convolutions (`convs1` and `convs2`, every dilation). */
	residualByKernel: Map<number, number>;
}

export interface SynthesizerArithmetic {
	stages: DecoderStage[];
	/** FLOP per decoded second: the whole decoder. */
	decoder: number;
	/** FLOP per decoded second: the decoder outside its residual blocks (upsampling, noise and edge convolutions). */
	decoderOther: number;
	/** FLOP per second of window: the text encoder's and the flow's weights (they see the whole window). */
	encoderAndFlow: number;
}

const numel = (dims: readonly number[]) => dims.reduce((a, b) => a * b, 1);

/** FLOP per second of the synthesizer's weight products (2 per multiply-add), from its config. */
export function synthesizerArithmetic(
	config: SynthesizerConfig,
	featureDim: number,
	f0: boolean,
): SynthesizerArithmetic {
	const rates = config.upsampleRates;
	const kernels = config.resblockKernelSizes;
	const rateAfter = (stage: number) => FRAMES_PER_SECOND * rates.slice(0, stage + 1).reduce((a, b) => a * b, 1);
	let channels = config.upsampleInitialChannel;
	const stages: DecoderStage[] = rates.map((_, i) => {
		channels /= 2;
		return { channels, rate: rateAfter(i), residualByKernel: new Map(kernels.map((k) => [k, 0])) };
	});
	let decoderOther = 0;
	let encoderAndFlow = 0;
	for (const [name, { dims }] of synthesizerTensors(config, featureDim, f0)) {
		// Biases, norms, embeddings looked up by index and attention's relative embeddings multiply nothing.
		if (!name.endsWith(".weight") || dims.length < 2 || /emb_(pitch|g)|m_source/.test(name)) continue;
		const products = 2 * numel(dims);
		const part = /^dec\.(\w+)\.(\d+)/.exec(name);
		if (!name.startsWith("dec.")) encoderAndFlow += products * FRAMES_PER_SECOND;
		else if (part?.[1] === "resblocks") {
			const block = Number(part[2]);
			const stage = stages[Math.floor(block / kernels.length)];
			const kernel = kernels[block % kernels.length] as number;
			stage?.residualByKernel.set(kernel, (stage.residualByKernel.get(kernel) ?? 0) + products * stage.rate);
		} else if (part?.[1] === "ups") {
			// A transposed convolution's weights are each used once per input sample.
			const stage = Number(part[2]);
			decoderOther += products * (stage === 0 ? FRAMES_PER_SECOND : rateAfter(stage - 1));
		} else if (part?.[1] === "noise_convs") decoderOther += products * rateAfter(Number(part[2]));
		else if (name === "dec.conv_post.weight") decoderOther += products * config.sampleRate;
		else decoderOther += products * FRAMES_PER_SECOND; // conv_pre, cond
	}
	const residual = stages.reduce((s, st) => s + [...st.residualByKernel.values()].reduce((a, b) => a + b, 0), 0);
	return { stages, decoder: residual + decoderOther, decoderOther, encoderAndFlow };
}

/** FLOP per second each decoder stage's residual convolutions run at alone, keyed `${channels}/${kernel}`. */
export type ConvolutionRates = Map<string, number>;

export const rateKey = (channels: number, kernel: number) => `${channels}/${kernel}`;

const WINDOW_SECONDS = 5.32;
/** Convolutions in the chain a lone one is subtracted from. */
const CHAIN = 5;
/** The middle of RVC's residual dilations (1, 3, 5). */
const PROBE_DILATION = 3;

/**
 * Times one residual convolution per stage and kernel, as the synthesizer's session would run it (an arena, the
 * given intra-op threads, the window cut into `rows` pieces), on a 5.32 s window at the stage's rate; best of
 * `runs` after one run that plans memory.
 */
export async function measureConvolutionRates(
	arithmetic: SynthesizerArithmetic,
	intraOpNumThreads: number,
	rows: number,
	runs = 4,
): Promise<ConvolutionRates> {
	const noise = new NormalNoise(7);
	const options = sessionOptionsFor("cpu", { memoryArena: true, intraOpNumThreads });
	const rates: ConvolutionRates = new Map();
	for (const stage of arithmetic.stages) {
		for (const kernel of stage.residualByKernel.keys()) {
			const C = stage.channels;
			const T = Math.round((stage.rate * WINDOW_SECONDS) / rows);
			const layer: ConvLayer = {
				channels: C,
				length: T,
				rows,
				kernel,
				dilation: PROBE_DILATION,
				weight: noise.fill(C * C * kernel, 1 / Math.sqrt(C * kernel)),
				bias: noise.fill(C, 0.1),
			};
			const x = new ort.Tensor("float32", noise.fill(C * rows * T, 1), [1, C, rows, T]);
			// One convolution and a chain of CHAIN: their difference is CHAIN - 1 convolutions without the two
			// layout changes (to NCHWc and back) that a lone one pays and the decoder, chaining them, mostly does not.
			const best: number[] = [];
			for (const depth of [1, CHAIN]) {
				const session = await ort.InferenceSession.create(convolutionChainModel(layer, depth), options);
				try {
					let fastest = Number.POSITIVE_INFINITY;
					for (let r = 0; r <= runs; r++) {
						const started = performance.now();
						await session.run({ x });
						if (r > 0) fastest = Math.min(fastest, (performance.now() - started) / 1000);
					}
					best.push(fastest);
				} finally {
					await session.release();
				}
			}
			const [one, chain] = best as [number, number];
			const seconds = (chain - one) / (CHAIN - 1);
			rates.set(rateKey(C, kernel), (2 * C * C * kernel * rows * T) / seconds);
		}
	}
	return rates;
}

/** FLOP of the synthesizer's weight products for `decodedSeconds` decoded and `windowSeconds` of windows. */
export function synthesizerFlop(arithmetic: SynthesizerArithmetic, decodedSeconds: number, windowSeconds: number) {
	return arithmetic.decoder * decodedSeconds + arithmetic.encoderAndFlow * windowSeconds;
}
