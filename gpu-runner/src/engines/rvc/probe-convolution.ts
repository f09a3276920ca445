/**
 * A convolution of the synthesizer decoder's kind, as its graph runs it: `Conv` on `[1, C, rows, T]` (onnxruntime's
 * CPU provider runs it in NCHWc), same padding, chained `depth` times with the same weights. Provider selection
 * times it to pass over a GPU provider slower than the CPU (`execution-provider.ts`); the benchmark times it to
 * find this machine's convolution speed (`bench/runner/synthesizer-roofline.ts`).
 */
import { OnnxGraphBuilder } from "./onnx-writer.ts";

/** One 1-D convolution: `channels` in and out, kernel and dilation, on `rows` rows of `length` samples. */
export interface ConvLayer {
	channels: number;
	/** Samples per row. */
	length: number;
	/** Rows of one run (`[1, C, rows, length]`): the engine decodes a span as one row per piece. Default 1. */
	rows?: number;
	kernel: number;
	dilation: number;
	weight: Float32Array;
	bias: Float32Array;
}

/** The ONNX model of `depth` such convolutions in a row: input `x` and output `y`, both `[1, C, rows, length]`. */
export function convolutionChainModel(l: ConvLayer, depth = 1): Uint8Array {
	const g = new OnnxGraphBuilder();
	const rows = l.rows ?? 1;
	const pad = ((l.kernel - 1) * l.dilation) >> 1;
	const w = g.floats("w", [l.channels, l.channels, 1, l.kernel], l.weight);
	const b = g.floats("b", [l.channels], l.bias);
	let x = g.input("x", "float32", [1, l.channels, rows, l.length]);
	for (let i = 0; i < depth; i++) {
		x = g.node(
			"Conv",
			[x, w, b],
			{ kernel_shape: [1, l.kernel], pads: [0, pad, 0, pad], dilations: [1, l.dilation] },
			i === depth - 1 ? ["y"] : undefined,
		);
	}
	g.output("y", "float32", [1, l.channels, rows, l.length]);
	return g.toModel();
}
