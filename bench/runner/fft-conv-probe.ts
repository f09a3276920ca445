/**
 * Would a fast convolution built from onnxruntime's own operators make the synthesizer's decoder cheaper? The
 * decoder's residual blocks are 99 % of its arithmetic: 1-D convolutions of kernel 3, 7 and 11 (dilated 1, 3 and
 * 5) at 256, 128, 64 and 32 channels. This probe times one such layer, on one 5.32 s window at each stage's
 * sample rate, two ways:
 *
 * - direct: `Conv` on `[1, C, 1, T]`, as the synthesizer graph runs it (onnxruntime's NCHWc kernels);
 * - fft: overlap-save in tiles of `m` outputs, every step a stock operator on time-major `[T, C]`: a `Gather` of
 *   the tiles (dilation handled by tiling each phase of the dilated grid), real DFTs as `MatMul`s, the channel
 *   mixing as four batched `MatMul`s per bin (complex arithmetic in real products), the inverse DFT as two
 *   `MatMul`s and a `Gather` back into time order. The bias rides on the DC bin.
 *
 * The fft side leaves out what the decoder would also pay to use it: moving between time-major and the
 * channel-major layout of its other layers. Its times are a lower bound on that path's cost. The direct side, a
 * lone `Conv`, pays onnxruntime's change into NCHWc and back, which the decoder's chained convolutions mostly do
 * not (synthesizer-roofline.ts measures without it): its times are an upper bound, so the ratios below flatter
 * the fft side.
 *
 *   node --import ./src/resolve-fallback.ts ../bench/runner/fft-conv-probe.ts [--threads 2] [--tile 22]
 *
 * Measured on a 2-core AMD EPYC (Zen 5), 2 threads, tile 22: the fft side is 1.74x faster for kernel 11 at 256
 * channels, where the window is short, but at 128 channels and below its memory-bound steps (tiles, transforms,
 * gathers) cost about as much as the arithmetic they save: 1.12-1.21x for kernel 11, slower for kernel 3 and 7.
 * Taking the faster side for every layer would save 9 % of the residual blocks' time, before the layout changes.
 */
import { availableParallelism, cpus } from "node:os";
import { parseArgs } from "node:util";
import "../../gpu-runner/src/engines/rvc/onnxruntime-telemetry-off.ts";
import * as ort from "onnxruntime-node";
import { sessionOptionsFor } from "../../gpu-runner/src/engines/rvc/execution-provider.ts";
import { OnnxGraphBuilder } from "../../gpu-runner/src/engines/rvc/onnx-writer.ts";
import { type ConvLayer, convolutionChainModel } from "../../gpu-runner/src/engines/rvc/probe-convolution.ts";

const { values } = parseArgs({
	options: {
		threads: { type: "string", default: "2" },
		tile: { type: "string", default: "22" },
		runs: { type: "string", default: "5" },
	},
});
const threads = Number(values.threads);
const tile = Number(values.tile);
const runs = Number(values.runs);
for (const [flag, value] of [
	["--threads", threads],
	["--tile", tile],
	["--runs", runs],
] as const) {
	if (!Number.isInteger(value) || value < 1) throw new Error(`${flag} must be a whole number of 1 or more`);
}

/** The 40 kHz v2 decoder's stages after each upsampling: channels and samples per second. */
const STAGES = [
	{ channels: 256, rate: 1000 },
	{ channels: 128, rate: 10000 },
	{ channels: 64, rate: 20000 },
	{ channels: 32, rate: 40000 },
];
/** `convs1` of the residual blocks: kernel and its largest dilation. */
const LAYERS = [
	{ kernel: 3, dilation: 5 },
	{ kernel: 7, dilation: 5 },
	{ kernel: 11, dilation: 5 },
];
const WINDOW_SECONDS = 5.32;

let seed = 5;
const uniform = (length: number, scale: number) =>
	Float32Array.from({ length }, () => {
		seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
		return (seed / 2 ** 32 - 0.5) * scale;
	});

function fftGraph(l: ConvLayer, m: number): Uint8Array {
	const { channels: C, length: T, kernel: k, dilation: d } = l;
	const n = m + k - 1;
	const bins = Math.floor(n / 2) + 1;
	const half = (k - 1) >> 1;
	// Tiles: phase f of the dilated grid, tile q: outputs f + d(qm + i), inputs f + d(qm + i + j - half).
	const tiles: [number, number][] = [];
	for (let f = 0; f < d; f++) for (let q = 0; q * m < Math.ceil((T - f) / d); q++) tiles.push([f, q]);
	const Q = tiles.length;
	const gather = new BigInt64Array(n * Q);
	for (let j = 0; j < n; j++) {
		tiles.forEach(([f, q], c) => {
			const t = f + d * (q * m + j - half);
			gather[j * Q + c] = BigInt(t >= 0 && t < T ? t : T); // row T is the zero row
		});
	}
	const scatter = new BigInt64Array(T);
	tiles.forEach(([f, q], c) => {
		for (let i = 0; i < m; i++) {
			const t = f + d * (q * m + i);
			if (t < T) scatter[t] = BigInt(i * Q + c);
		}
	});
	const angle = (b: number, j: number) => (2 * Math.PI * b * j) / n;
	const forwardRe = new Float32Array(bins * n);
	const forwardIm = new Float32Array(bins * n);
	for (let b = 0; b < bins; b++) {
		for (let j = 0; j < n; j++) {
			forwardRe[b * n + j] = Math.cos(angle(b, j));
			forwardIm[b * n + j] = -Math.sin(angle(b, j));
		}
	}
	// Cross-correlation: each bin's weight is the conjugate transform of the kernel, as [in, out] for X @ W.
	const wRe = new Float32Array(bins * C * C);
	const wIm = new Float32Array(bins * C * C);
	for (let b = 0; b < bins; b++) {
		for (let o = 0; o < C; o++) {
			for (let c = 0; c < C; c++) {
				let re = 0;
				let im = 0;
				for (let j = 0; j < k; j++) {
					const w = l.weight[(o * C + c) * k + j] as number;
					re += w * Math.cos(angle(b, j));
					im += w * Math.sin(angle(b, j));
				}
				wRe[b * C * C + c * C + o] = re;
				wIm[b * C * C + c * C + o] = im;
			}
		}
	}
	const inverseRe = new Float32Array(m * bins);
	const inverseIm = new Float32Array(m * bins);
	for (let b = 0; b < bins; b++) {
		const weight = b === 0 || 2 * b === n ? 1 / n : 2 / n;
		for (let i = 0; i < m; i++) {
			inverseRe[i * bins + b] = weight * Math.cos(angle(b, i));
			inverseIm[i * bins + b] = -weight * Math.sin(angle(b, i));
		}
	}
	const dcBias = new Float32Array(bins * C);
	for (let o = 0; o < C; o++) dcBias[o] = n * (l.bias[o] as number);

	const g = new OnnxGraphBuilder();
	const ints = (v: number[]) => g.int64s("shape", v);
	const x = g.input("x", "float32", [T, C]);
	const padded = g.node("Concat", [x, g.floats("zero", [1, C], new Float32Array(C))], { axis: 0 });
	const gathered = g.node("Gather", [padded, g.initializer("tiles", { type: "int64", dims: [n, Q], data: gather })], {
		axis: 0,
	});
	const flat = g.node("Reshape", [gathered, ints([n, Q * C])]);
	const spectrum = (f: Float32Array, name: string) =>
		g.node("Reshape", [g.node("MatMul", [g.floats(name, [bins, n], f), flat]), ints([bins, Q, C])]);
	const xRe = spectrum(forwardRe, "dft_re");
	const xIm = spectrum(forwardIm, "dft_im");
	const re = g.floats("w_re", [bins, C, C], wRe);
	const im = g.floats("w_im", [bins, C, C], wIm);
	const yRe = g.node("Sum", [
		g.node("MatMul", [xRe, re]),
		g.node("Neg", [g.node("MatMul", [xIm, im])]),
		g.floats("dc_bias", [bins, 1, C], dcBias),
	]);
	const yIm = g.node("Add", [g.node("MatMul", [xIm, re]), g.node("MatMul", [xRe, im])]);
	const back = (f: Float32Array, name: string, y: string) =>
		g.node("MatMul", [g.floats(name, [m, bins], f), g.node("Reshape", [y, ints([bins, Q * C])])]);
	const rows = g.node("Reshape", [
		g.node("Add", [back(inverseRe, "idft_re", yRe), back(inverseIm, "idft_im", yIm)]),
		ints([m * Q, C]),
	]);
	g.node("Gather", [rows, g.initializer("order", { type: "int64", dims: [T], data: scatter })], { axis: 0 }, ["y"]);
	g.output("y", "float32", [T, C]);
	return g.toModel();
}

async function timed(session: ort.InferenceSession, input: ort.Tensor): Promise<{ ms: number; y: Float32Array }> {
	let best = Number.POSITIVE_INFINITY;
	let y: Float32Array = new Float32Array(0);
	for (let r = 0; r <= runs; r++) {
		const started = performance.now();
		y = (await session.run({ x: input })).y?.data as Float32Array;
		if (r > 0) best = Math.min(best, performance.now() - started); // the first run plans memory
	}
	return { ms: best, y };
}

const options = sessionOptionsFor("cpu", { memoryArena: true, intraOpNumThreads: threads });
console.log(
	`fft convolution probe: ${cpus()[0]?.model ?? "cpu"} x ${availableParallelism()}, ${threads} threads, tile ${tile}, one ${WINDOW_SECONDS} s window, best of ${runs}`,
);
let directTotal = 0;
let fasterTotal = 0;
console.log("channels  kernel  dilation   samples   direct ms   fft ms   direct/fft   max abs error   SNR dB");
for (const stage of STAGES) {
	for (const { kernel, dilation } of LAYERS) {
		const C = stage.channels;
		const T = Math.round(stage.rate * WINDOW_SECONDS);
		const layer: ConvLayer = {
			channels: C,
			length: T,
			kernel,
			dilation,
			weight: uniform(C * C * kernel, 2 / Math.sqrt(C * kernel)),
			bias: uniform(C, 0.2),
		};
		const signal = uniform(C * T, 2);
		const timeMajor = new Float32Array(T * C);
		for (let c = 0; c < C; c++) for (let t = 0; t < T; t++) timeMajor[t * C + c] = signal[c * T + t] as number;
		const direct = await ort.InferenceSession.create(convolutionChainModel(layer), options);
		const fft = await ort.InferenceSession.create(fftGraph(layer, tile), options);
		const a = await timed(direct, new ort.Tensor("float32", signal, [1, C, 1, T]));
		const b = await timed(fft, new ort.Tensor("float32", timeMajor, [T, C]));
		await Promise.all([direct.release(), fft.release()]);
		directTotal += a.ms;
		fasterTotal += Math.min(a.ms, b.ms);
		let maxError = 0;
		let power = 0;
		let noise = 0;
		for (let c = 0; c < C; c++) {
			for (let t = 0; t < T; t++) {
				const want = a.y[c * T + t] as number;
				const error = Math.abs(want - (b.y[t * C + c] as number));
				maxError = Math.max(maxError, error);
				power += want * want;
				noise += error * error;
			}
		}
		console.log(
			`${String(C).padStart(8)}  ${String(kernel).padStart(6)}  ${String(dilation).padStart(8)}  ${String(T).padStart(8)}  ${a.ms.toFixed(1).padStart(10)}  ${b.ms.toFixed(1).padStart(7)}  ${(a.ms / b.ms).toFixed(2).padStart(11)}  ${maxError.toExponential(1).padStart(14)}  ${(10 * Math.log10(power / noise)).toFixed(1).padStart(7)}`,
		);
	}
}
console.log(
	`the faster of the two for every layer: ${fasterTotal.toFixed(1)} ms against ${directTotal.toFixed(1)} ms direct (${(100 * (1 - fasterTotal / directTotal)).toFixed(1)} % less), before any change of layout`,
);
