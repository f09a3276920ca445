/**
 * Picks the execution provider at start-up by trying each candidate on its own with a small self-test model.
 * onnxruntime-node does not fall back by itself: `executionProviders: ["cuda", "cpu"]` throws when the CUDA
 * provider cannot load instead of using the CPU, so the candidates are tried one at a time. WebGPU is also timed
 * against the CPU on a convolution of the decoder's kind, and passed over where it is not faster: on a machine
 * without a GPU, WebGPU finds Mesa's lavapipe, a Vulkan driver that runs on the CPU, wherever Mesa's Vulkan
 * drivers are installed (measured: 27 s to convert what the CPU provider converts in 0.5 s).
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import "./onnxruntime-telemetry-off.ts";
import * as ort from "onnxruntime-node";
import { OnnxGraphBuilder } from "./onnx-writer.ts";
import { convolutionChainModel } from "./probe-convolution.ts";
import { NormalNoise } from "./random.ts";

export const EXECUTION_PROVIDERS = ["cuda", "webgpu", "cpu"] as const;
export type ExecutionProviderName = (typeof EXECUTION_PROVIDERS)[number];

export interface ProviderAttempt {
	provider: ExecutionProviderName;
	/**
	 * `skipped`: this onnxruntime-node build has no such provider at all (e.g. WebGPU on some platforms).
	 * `slower`: it passed its self-test but ran the probe convolution no faster than the CPU provider after it.
	 */
	outcome: "selected" | "failed" | "skipped" | "slower";
	/** Why it failed, first line of the runtime's message plus a hint where one helps. */
	reason?: string;
	milliseconds: number;
}

export interface ProviderSelection {
	provider: ExecutionProviderName;
	attempts: ProviderAttempt[];
}

export interface SessionTuning {
	/** CPU threads per session; onnxruntime's default is one per physical core. */
	intraOpNumThreads?: number;
	/** Keep freed activations in the session's CPU arena for its next run (see `sessionOptionsFor`). */
	memoryArena?: boolean;
}

/**
 * Session options for a provider: that provider alone, every graph optimisation (on the CPU the NCHWc layout
 * makes RMVPE's 2-D convolutions about 20 % cheaper), and worker threads that sleep instead of spinning
 * between kernels: spinning burns the cores that another session, another job or another process needs.
 *
 * The CPU arena is off unless `memoryArena` asks for it: with it each session keeps its largest activations
 * for good (measured: the synthesizer grew from 274 to 1291 MB over two runs of a 12 s window), so three models
 * held the sum of their peaks; without it they share one peak. The engine turns it on for the synthesizer alone
 * (`models.ts`), whose activations would otherwise be page-faulted in afresh on every run. A session with an
 * arena runs without onnxruntime's memory pattern: after the first run of each input shape the pattern plans
 * one block for all of a run's activations, which the arena, its memory split among the first run's tensors,
 * serves with a new region: the arena kept about twice its first run's size (measured: the bench's 40 s peaked
 * 20-40 MiB lower without it, at the same speed; `execution-provider.test.ts` shows the growth).
 */
export function sessionOptionsFor(
	provider: ExecutionProviderName,
	tuning: SessionTuning = {},
): ort.InferenceSession.SessionOptions {
	const executionProviders: ort.InferenceSession.SessionOptions["executionProviders"] =
		provider === "cuda" ? [{ name: "cuda", deviceId: 0 }] : [provider];
	return {
		executionProviders,
		graphOptimizationLevel: "all",
		enableCpuMemArena: tuning.memoryArena ?? false,
		...(provider === "cpu" && tuning.memoryArena === true ? { enableMemPattern: false } : {}),
		extra: { session: { intra_op: { allow_spinning: "0" }, inter_op: { allow_spinning: "0" } } },
		...(tuning.intraOpNumThreads !== undefined ? { intraOpNumThreads: tuning.intraOpNumThreads } : {}),
	};
}

const SELF_TEST_FRAMES = 64;

/**
 * y = sin(Conv1d(x) @ W): a convolution, a matrix product and an elementwise op, the kernel kinds the RVC models
 * lean on. Weights are small integers over 16 so the expected output can be computed exactly in JS.
 */
function selfTestModel(): {
	model: Uint8Array;
	input: Float32Array;
	expected: Float32Array;
} {
	const g = new OnnxGraphBuilder();
	const x = g.input("x", "float32", [1, 4, SELF_TEST_FRAMES]);
	const kernel = Float32Array.from({ length: 8 * 4 * 3 }, (_, i) => ((i % 7) - 3) / 16);
	const conv = g.node("Conv", [x, g.floats("kernel", [8, 4, 3], kernel)], {
		kernel_shape: [3],
		pads: [1, 1],
	});
	const projection = Float32Array.from({ length: 8 * 5 }, (_, i) => ((i % 5) - 2) / 16);
	const transposed = g.node("Transpose", [conv], { perm: [0, 2, 1] });
	const product = g.node("MatMul", [transposed, g.floats("projection", [8, 5], projection)]);
	g.node("Sin", [product], {}, ["y"]);
	g.output("y", "float32", [1, SELF_TEST_FRAMES, 5]);

	const input = Float32Array.from({ length: 4 * SELF_TEST_FRAMES }, (_, i) => Math.sin(i * 0.37));
	const expected = new Float32Array(SELF_TEST_FRAMES * 5);
	for (let t = 0; t < SELF_TEST_FRAMES; t++) {
		const hidden = new Float64Array(8);
		for (let o = 0; o < 8; o++) {
			for (let c = 0; c < 4; c++) {
				for (let k = 0; k < 3; k++) {
					const src = t + k - 1;
					if (src < 0 || src >= SELF_TEST_FRAMES) continue;
					hidden[o] =
						(hidden[o] as number) +
						(kernel[(o * 4 + c) * 3 + k] as number) * (input[c * SELF_TEST_FRAMES + src] as number);
				}
			}
		}
		for (let j = 0; j < 5; j++) {
			let sum = 0;
			for (let o = 0; o < 8; o++) sum += (hidden[o] as number) * (projection[o * 5 + j] as number);
			expected[t * 5 + j] = Math.sin(sum);
		}
	}
	return { model: g.toModel(), input, expected };
}

function describeFailure(provider: ExecutionProviderName, error: unknown): string {
	const message = (error instanceof Error ? error.message : String(error)).split("\n")[0]?.trim() ?? "unknown error";
	if (provider === "cuda" && /Failed to load|shared library|providers_cuda|providers_shared/i.test(message)) {
		return `${message} (the CUDA provider libraries are not installed: install onnxruntime-node with ONNXRUNTIME_NODE_INSTALL=cuda12 in the image, on a CUDA 12 + cuDNN 9 base)`;
	}
	return message;
}

/**
 * On Linux, the CUDA provider library onnxruntime would need and cannot find beside its own (it loads them from
 * the directory of `libonnxruntime.so`, `bin/napi-v6/linux/<arch>/` in onnxruntime-node); undefined when both
 * are there, or elsewhere. Checked first so that a CPU-only runner does not have onnxruntime print its load
 * failure as an error line on every start.
 */
export function missingCudaLibrary(): string | undefined {
	if (process.platform !== "linux") return undefined;
	const entry = createRequire(import.meta.url).resolve("onnxruntime-node");
	const directory = join(dirname(entry), "..", "bin", "napi-v6", process.platform, process.arch);
	for (const library of ["libonnxruntime_providers_shared.so", "libonnxruntime_providers_cuda.so"]) {
		if (!existsSync(join(directory, library))) return join(directory, library);
	}
	return undefined;
}

async function selfTest(provider: ExecutionProviderName): Promise<void> {
	if (provider === "cuda") {
		const missing = missingCudaLibrary();
		if (missing !== undefined) throw new Error(`Failed to load shared library ${missing}: no such file`);
	}
	const { model, input, expected } = selfTestModel();
	// The failure is reported in the attempt; keep the runtime from also printing it as an error.
	const session = await ort.InferenceSession.create(model, {
		...sessionOptionsFor(provider),
		logSeverityLevel: 4,
	});
	try {
		const result = await session.run({
			x: new ort.Tensor("float32", input, [1, 4, SELF_TEST_FRAMES]),
		});
		const y = result.y?.data;
		if (!(y instanceof Float32Array) || y.length !== expected.length)
			throw new Error("self-test returned no output of the expected size");
		let worst = 0;
		for (let i = 0; i < y.length; i++) worst = Math.max(worst, Math.abs((y[i] as number) - (expected[i] as number)));
		// Loose enough for TF32 or fp16 accumulation on a GPU; a broken kernel is far off.
		if (!(worst < 1e-2)) throw new Error(`self-test output differs from the reference by ${worst}`);
	} finally {
		await session.release();
	}
}

/**
 * The probe: four chained 64-channel convolutions of kernel 7, dilation 3, on 8,000 samples (1.8 GFLOP), the
 * decoder's middle stage. A GPU runs it in a few milliseconds, two CPU cores in about 12.
 */
const PROBE = { channels: 64, length: 8000, kernel: 7, dilation: 3, depth: 4 } as const;

/** The probe's best time on `provider` in milliseconds, of three runs after one that loads and plans. */
async function probeMilliseconds(provider: ExecutionProviderName): Promise<number> {
	const { channels: C, length: T, kernel: K, depth } = PROBE;
	const noise = new NormalNoise(1);
	const model = convolutionChainModel(
		{ ...PROBE, weight: noise.fill(C * C * K, 1 / Math.sqrt(C * K)), bias: noise.fill(C, 0.1) },
		depth,
	);
	const session = await ort.InferenceSession.create(model, { ...sessionOptionsFor(provider), logSeverityLevel: 4 });
	try {
		const x = new ort.Tensor("float32", noise.fill(C * T, 1), [1, C, 1, T]);
		let best = Number.POSITIVE_INFINITY;
		for (let run = 0; run < 4; run++) {
			const started = performance.now();
			await session.run({ x });
			if (run > 0) best = Math.min(best, performance.now() - started);
		}
		return best;
	} finally {
		await session.release();
	}
}

/**
 * Why `provider`, which passed its self-test, should be passed over for the CPU provider after it in the order,
 * or undefined where it should not. Only WebGPU is timed: CUDA runs on NVIDIA GPUs alone, and the CPU is the CPU.
 */
async function slowerThanCpu(
	provider: ExecutionProviderName,
	rest: readonly ExecutionProviderName[],
): Promise<string | undefined> {
	if (provider !== "webgpu" || !rest.includes("cpu")) return undefined;
	const own = await probeMilliseconds(provider);
	const cpu = await probeMilliseconds("cpu");
	if (own < cpu) return undefined;
	return `ran the probe convolution (${PROBE.depth} x ${PROBE.channels} channels, kernel ${PROBE.kernel}, ${PROBE.length} samples) in ${own.toFixed(1)} ms where the CPU provider took ${cpu.toFixed(1)} ms: its adapter is a software one (such as Mesa's lavapipe) or a GPU slower than this CPU`;
}

/** Selections made in this process, by order: what the machine offers does not change while it runs. */
const selections = new Map<string, Promise<ProviderSelection>>();

/**
 * Tries each provider in `order` alone; returns the first that passes (and, for WebGPU, beats the CPU provider
 * after it), with every attempt. Throws if none does. Made once per process and order (WebGPU's adapter alone
 * takes seconds to set up); a failure is not kept.
 */
export function selectExecutionProvider(
	order: readonly ExecutionProviderName[] = EXECUTION_PROVIDERS,
): Promise<ProviderSelection> {
	const key = order.join(",");
	let selection = selections.get(key);
	if (selection === undefined) {
		selection = trySelectExecutionProvider(order);
		selections.set(key, selection);
		selection.catch(() => selections.delete(key));
	}
	return selection;
}

async function trySelectExecutionProvider(order: readonly ExecutionProviderName[]): Promise<ProviderSelection> {
	const attempts: ProviderAttempt[] = [];
	// Providers the binary knows about; CUDA is listed (as not bundled) even when its libraries are absent,
	// so it is still tried and its load error reported.
	const known = new Set(ort.listSupportedBackends().map((b) => b.name));
	for (const [index, provider] of order.entries()) {
		const started = performance.now();
		if (!known.has(provider)) {
			attempts.push({
				provider,
				outcome: "skipped",
				reason: "not in this onnxruntime-node build",
				milliseconds: 0,
			});
			continue;
		}
		try {
			await selfTest(provider);
			const slower = await slowerThanCpu(provider, order.slice(index + 1));
			if (slower !== undefined) {
				attempts.push({ provider, outcome: "slower", reason: slower, milliseconds: performance.now() - started });
				continue;
			}
			attempts.push({
				provider,
				outcome: "selected",
				milliseconds: performance.now() - started,
			});
			return { provider, attempts };
		} catch (error) {
			attempts.push({
				provider,
				outcome: "failed",
				reason: describeFailure(provider, error),
				milliseconds: performance.now() - started,
			});
		}
	}
	const summary = attempts.map((a) => `${a.provider}: ${a.reason}`).join("; ");
	throw new NoExecutionProviderError(
		`no execution provider passed its self-test (${summary || "none tried"})`,
		attempts,
	);
}

export class NoExecutionProviderError extends Error {
	readonly attempts: ProviderAttempt[];

	constructor(message: string, attempts: ProviderAttempt[]) {
		super(message);
		this.name = "NoExecutionProviderError";
		this.attempts = attempts;
	}
}
