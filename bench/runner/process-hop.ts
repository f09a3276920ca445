/**
 * What the process hop of an account's uploaded synthesizer costs per run (`session-host-process.ts`): the same ONNX
 * synthesizer on a model thread (`SessionHost`) and in a model process (`ProcessSessionHost`), run in turn on the same
 * feeds, one warm-up each, then `repeats` runs each; prints the run times (ms) and their medians as one JSON line.
 * Run from gpu-runner/ (where onnxruntime-node resolves):
 *
 *     node ../bench/runner/process-hop.ts MODEL.onnx THREADS FRAMES REPEATS
 *
 * With `test/rvc/fixtures/onnx/late-matmul.onnx` at up to 1000 frames (an empty product: the run is the hop and
 * onnxruntime's own overhead, with an RVC window's tensors) the difference is the hop alone.
 */
import * as ort from "onnxruntime-node";
import { SessionHost } from "../../gpu-runner/src/engines/rvc/session-host.ts";
import { ProcessSessionHost } from "../../gpu-runner/src/engines/rvc/session-host-process.ts";

const [path, threads, framesArg, repeatsArg] = process.argv.slice(2);
const frames = Number(framesArg);
const repeats = Number(repeatsArg);
// As the engine's synthesizer session (`sessionOptionsFor`): its arena kept.
const options: ort.InferenceSession.SessionOptions = {
	executionProviders: ["cpu"],
	intraOpNumThreads: Number(threads),
	enableCpuMemArena: true,
};
let noise = 192;
const allFeeds = () => ({
	phone: new ort.Tensor(
		"float32",
		Float32Array.from({ length: frames * 768 }, (_, i) => Math.sin(i)),
		[1, frames, 768],
	),
	phone_lengths: new ort.Tensor("int64", BigInt64Array.of(BigInt(frames)), [1]),
	pitch: new ort.Tensor("int64", new BigInt64Array(frames).fill(100n), [1, frames]),
	pitchf: new ort.Tensor("float32", new Float32Array(frames).fill(200), [1, frames]),
	ds: new ort.Tensor("int64", BigInt64Array.of(0n), [1]),
	rnd: new ort.Tensor(
		"float32",
		Float32Array.from({ length: frames * noise }, (_, i) => Math.cos(i)),
		[1, noise, frames],
	),
});
const feeds = () =>
	Object.fromEntries(Object.entries(allFeeds()).filter(([name]) => sessions.thread.inputNames.includes(name)));
const hosts = {
	thread: new SessionHost(),
	process: new ProcessSessionHost({
		runLimit: () => ({ seconds: 3600, run: "" }),
		loadSeconds: 600,
		memoryBytes: 64 * 2 ** 30,
	}),
};
const sessions: Record<"thread" | "process", Awaited<ReturnType<SessionHost["create"]>>> = {
	thread: await hosts.thread.create(path as string, options),
	process: await hosts.process.create(path as string, options),
};
const declared = sessions.thread.inputMetadata.find((m) => m.name === "rnd");
if (declared?.isTensor && typeof declared.shape[1] === "number") noise = declared.shape[1];
for (const kind of ["thread", "process"] as const) await sessions[kind].run(feeds()); // warm-up
const times: Record<string, number[]> = { thread: [], process: [] };
for (let i = 0; i < repeats; i++) {
	for (const kind of ["thread", "process"] as const) {
		const f = feeds();
		const t = performance.now();
		await sessions[kind].run(f);
		times[kind]?.push(performance.now() - t);
	}
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
console.log(
	JSON.stringify({
		path,
		frames,
		threads,
		repeats,
		thread_ms: times.thread?.map(Math.round),
		process_ms: times.process?.map(Math.round),
		median_thread: median(times.thread ?? []),
		median_process: median(times.process ?? []),
	}),
);
await hosts.thread.close();
await hosts.process.close();
