/**
 * Real-time factor, memory and start-up of the rvc engine with full-size models (random weights, see
 * rvc-models.ts), built into a temporary folder at run time and deleted afterwards. Each measured case runs in
 * its own child process, so building the models does not count in its peak RSS.
 *
 * How to run it, and every flag: `USAGE` below (`--help` prints it).
 *
 * RTF = processing time / audio duration (below 1 is faster than real time). Wall-clock RTF depends on what
 * else the machine runs, so the CPU time per audio second and the load average are printed beside it. Figures
 * are printed beside the ones they replace (BASELINE, measured before the engine's speed work) with the ratio.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { AudioBlock } from "../../gpu-runner/src/engines/engine.ts";
import { createRvcEngine, type RvcChunkStats } from "../../gpu-runner/src/engines/rvc/index.ts";
import { PUBLISHED_CONFIG_40K, parseSynthesizerConfig } from "../../gpu-runner/src/engines/rvc/synthesizer-config.ts";
import type { VoiceDescriptor } from "../../src/contracts/runner.ts";
import { type BuiltModel, buildContentVec, buildRmvpe, buildSynthesizer40k } from "./rvc-models.ts";
import { measureConvolutionRates, rateKey, synthesizerArithmetic, synthesizerFlop } from "./synthesizer-roofline.ts";

const USAGE = `Usage (from gpu-runner/):
  npm run bench                                         # everything, rvc part: 40 s of audio
  node --import ./src/resolve-fallback.ts ../bench/runner/rvc-bench.ts --threads 2 [--seconds 40] [--chunk-seconds 10]
    --jobs 8 [--job-seconds 10] [--capacity 2]        # throughput of 8 jobs at capacity 1 and 2
    --memory-minutes 1,10  (or --long: 1,10,60)       # peak RSS converting that much audio
    --contentvec-int8                                 # ContentVec with int8 matrix products
    --feature-arenas / --no-feature-arenas            # ContentVec and RMVPE keep CPU arenas or not (RUNNER_RVC_FEATURE_ARENAS;
                                                      #   default: the engine's, on where model threads share them)
    --decode-pieces N                                 # pieces per decoded span (default: one per session thread; 1: off)
    --lone-capacity 2                                 # the 40 s job alone on a runner of that capacity (default 1)
    --no-lend-threads                                 # idle model threads do not decode parts of a job's spans
    --voices 5 [--job-seconds 6] [--cached-voices N]  # jobs of 5 voices in turn (then the first again): time and
                                                      #   peak RSS per job, the engine keeping N voices' synthesizers
    --rms-mix-rate 1                                  # the voice's rms_mix_rate (default RVC's 0.25)
    --reference-graph                                 # the synthesizer as built before: 1-D decoder, whole window decoded
    --no-source-noise                                 # no Gaussian noise in the NSF source, for --compare-with
    --save-output FILE / --compare-with FILE          # the 40 s output as raw float32; error against another
    --providers cuda                                  # on a GPU machine; GPU memory from nvidia-smi
`;

const OPTIONS = {
	seconds: { type: "string", default: "40" },
	threads: { type: "string" },
	providers: { type: "string", default: "cuda,webgpu,cpu" },
	"chunk-seconds": { type: "string" },
	jobs: { type: "string" },
	"job-seconds": { type: "string", default: "10" },
	capacity: { type: "string", default: "2" },
	"memory-minutes": { type: "string" },
	long: { type: "boolean", default: false },
	"contentvec-int8": { type: "boolean", default: false },
	"feature-arenas": { type: "boolean", default: false },
	"no-feature-arenas": { type: "boolean", default: false },
	"decode-pieces": { type: "string" },
	"lone-capacity": { type: "string", default: "1" },
	"no-lend-threads": { type: "boolean", default: false },
	voices: { type: "string" },
	"cached-voices": { type: "string" },
	"rms-mix-rate": { type: "string" },
	"reference-graph": { type: "boolean", default: false },
	"no-source-noise": { type: "boolean", default: false },
	"save-output": { type: "string" },
	"compare-with": { type: "string" },
	child: { type: "string" },
	help: { type: "boolean", short: "h", default: false },
} as const;

/** The flags, or the usage on stderr and exit code 2 for one this bench does not know. */
function parseFlags() {
	try {
		return parseArgs({ options: OPTIONS }).values;
	} catch (error) {
		process.stderr.write(`${(error as Error).message}\n\n${USAGE}`);
		process.exit(2);
	}
}

const values = parseFlags();
if (values.help) {
	process.stdout.write(USAGE);
	process.exit(0);
}

const IN_RATE = 16000;
const OUT_RATE = 40000;

/**
 * Figures before the speed work (issue 14), for the ratios: 2-core AMD EPYC, CPU provider, 2 threads, quiet. The
 * bench's ContentVec then wrote GELU in a form onnxruntime does not fuse (`rvc-models.ts` now writes it as
 * `torch.onnx.export` does, which it fuses), so ContentVec's ratio and the total's include that change.
 */
interface Baseline {
	rtf: number;
	synthesizer: number;
	contentvec: number;
	rmvpe: number;
	convertedSeconds?: number;
	firstJob: number;
	rss: number;
}
const BASELINE: Record<"cpu" | "cuda", Baseline> = {
	cpu: {
		rtf: 0.52,
		synthesizer: 0.41,
		contentvec: 0.073,
		rmvpe: 0.026,
		convertedSeconds: 48,
		firstJob: 6.2,
		rss: 3174,
	},
	/** H100 (main as of 05:10, 120 s of audio, /work/briefs/gpu-baseline.txt). */
	cuda: { rtf: 0.117, synthesizer: 0.056, contentvec: 0.004, rmvpe: 0.034, firstJob: 5.74, rss: 2328 },
};

interface CaseSpec {
	dir: string;
	providers: string[];
	threads?: number;
	chunkSeconds?: number;
	contentvecInt8: boolean;
	/** Unset: the engine's default. */
	featureArenas?: boolean;
	decodePieces?: number;
	/** Idle model threads decode parts of a job's spans (the engine's default) or not. */
	lendIdleThreads: boolean;
	rmsMixRate?: number;
	/** Seconds of audio per job, one entry per job; `concurrency` at a time. */
	jobs: number[];
	concurrency: number;
	/** The runner's capacity (model threads, as `RUNNER_CAPACITY` gives them); default `concurrency`. */
	capacity?: number;
	/** Job i converts with voice i mod `voices` (each its own copy of the synthesizer file); default 1. */
	voices?: number;
	/** Voices whose synthesizer each model thread keeps (`RUNNER_RVC_CACHED_VOICES`); unset: the engine's default. */
	cachedVoices?: number;
	/** Jobs state their source's length, as the runner does for files whose header gives it (`EngineJob.inputFrames`). */
	statedLength?: boolean;
	saveOutput?: string;
}

interface JobResult {
	seconds: number;
	wall: number;
	/** Resident memory when the job ended, and the process's peak so far. */
	rssMiB: number;
	peakRssMiB: number;
	/** Windows of this job decoded with lent threads (jobs one at a time only). */
	lentWindows?: number;
}

interface CaseResult {
	provider: string;
	/** Pieces per decoded span the engine chose (`decode-pieces.ts`). */
	decodePieces: number;
	/** Whether ContentVec and RMVPE kept arenas (the flag, or the engine's default). */
	featureArenas: boolean;
	/** Whether idle model threads decoded parts of the jobs' spans, and on how many threads the spans were decoded. */
	lendIdleThreads: boolean;
	synthesizerThreads: number;
	/** Windows whose span was decoded with lent threads. */
	lentWindows: number;
	startup: { init: number; prepare: number };
	firstJob: { wall: number; again: number };
	jobs: JobResult[];
	wall: number;
	cpuSeconds: number;
	load: [number, number];
	stages: Record<string, number>;
	convertedSeconds: number;
	/** Seconds the synthesizer's decoder ran on (the kept spans and their pieces' overlaps, where it decodes spans). */
	decodedSeconds: number;
	chunks: number;
	peakRssMiB: number;
	gpuMemoryMiB?: number;
}

/** Speech-like test input: a gliding harmonic voice with syllable-rate amplitude, breath noise and pauses. */
function* speechLike(totalSeconds: number): Generator<AudioBlock> {
	let seed = 9;
	const noise = () => {
		seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
		return seed / 2 ** 32 - 0.5;
	};
	let phase = 0;
	const total = Math.round(totalSeconds * IN_RATE);
	for (let start = 0; start < total; start += IN_RATE / 2) {
		const block = new Float32Array(Math.min(IN_RATE / 2, total - start));
		for (let i = 0; i < block.length; i++) {
			const t = (start + i) / IN_RATE;
			const f0 = 140 + 40 * Math.sin(2 * Math.PI * 0.3 * t);
			phase += (2 * Math.PI * f0) / IN_RATE;
			const syllables = Math.max(0, Math.sin(2 * Math.PI * 3 * t));
			const pause = t % 7 > 6.2 ? 0 : 1;
			let voice = 0;
			for (let h = 1; h <= 12; h++) voice += Math.sin(h * phase) / h;
			block[i] = pause * (0.15 * syllables * voice + 0.01 * noise());
		}
		yield { sampleRate: IN_RATE, channels: [block] };
	}
}

async function* asAsync(blocks: Iterable<AudioBlock>): AsyncGenerator<AudioBlock> {
	yield* blocks;
}

const gpuMemoryMiB = (): number | undefined => {
	const smi = spawnSync("nvidia-smi", ["--query-gpu=memory.used", "--format=csv,noheader,nounits"], {
		encoding: "utf8",
	});
	return smi.status === 0 ? Number(smi.stdout.trim().split("\n")[0]) : undefined;
};

/** One measured case, in this (child) process. */
async function runCase(spec: CaseSpec): Promise<CaseResult> {
	const chunks: RvcChunkStats[] = [];
	const capacity = spec.capacity ?? spec.concurrency;
	let recording = false;
	const engine = createRvcEngine({
		executionProviders: spec.providers as ("cuda" | "webgpu" | "cpu")[],
		noiseSeed: 1,
		contentvecInt8: spec.contentvecInt8,
		...(spec.featureArenas !== undefined ? { featureArenas: spec.featureArenas } : {}),
		...(spec.decodePieces !== undefined ? { decodePieces: spec.decodePieces } : {}),
		lendIdleThreads: spec.lendIdleThreads,
		...(spec.cachedVoices !== undefined ? { cachedVoices: spec.cachedVoices } : {}),
		onChunk: (s) => {
			if (recording) chunks.push(s);
		},
		// As the runner does with RUNNER_CAPACITY: one model thread per job, the threads divided among them.
		capacity,
		...(spec.threads !== undefined
			? { intraOpNumThreads: Math.max(1, Math.floor(spec.threads / Math.min(capacity, spec.threads))) }
			: {}),
	});
	const artifactPaths = new Map(
		["contentvec", "rmvpe", "synthesizer"].map((name) => [name, join(spec.dir, `${name}.onnx`)]),
	);
	/** Voice k's files: its own copy of the synthesizer, which the engine loads as a voice of its own. */
	const pathsOf = (k: number) =>
		k === 0 ? artifactPaths : new Map(artifactPaths).set("synthesizer", join(spec.dir, `synthesizer-${k}.onnx`));
	const voice: VoiceDescriptor = {
		id: "0d7f6a55-6c3f-4c1e-9d2b-7f3e1c2a9b01",
		name: "bench",
		engine: "rvc",
		params: {
			sample_rate: OUT_RATE,
			...(spec.rmsMixRate !== undefined ? { rms_mix_rate: spec.rmsMixRate } : {}),
			...(spec.chunkSeconds !== undefined
				? { chunk_seconds: spec.chunkSeconds, chunk_search_seconds: Math.min(5, spec.chunkSeconds / 4) }
				: {}),
		},
		artifacts: [],
		// The engine's own graph, as a `.pth` voice or a service voice runs it: on the model thread, not in the process
		// of an account's uploaded ONNX (`session-host-process.ts`), whose memory this process's RSS would not count.
		account_voice: false,
	};
	const convert = async (seconds: number, output?: Float32Array[], paths = artifactPaths): Promise<number> => {
		const started = performance.now();
		const job = {
			voice,
			semitones: 3,
			artifactPaths: paths,
			input: { sampleRate: IN_RATE, channels: 1 },
			...(spec.statedLength ? { inputFrames: Math.round(seconds * IN_RATE) } : {}),
		};
		const signal = new AbortController().signal;
		for await (const block of engine.convert(asAsync(speechLike(seconds)), job, signal)) {
			output?.push(block.channels[0] as Float32Array);
		}
		return (performance.now() - started) / 1000;
	};

	let started = performance.now();
	const info = await engine.init();
	const init = (performance.now() - started) / 1000;
	started = performance.now();
	await engine.prepare?.(voice, artifactPaths);
	const prepare = (performance.now() - started) / 1000;
	// The runner's first job after start (its sessions were prepared at start), then the same job again.
	const firstJob = { wall: await convert(2), again: await convert(2) };

	recording = true;
	const output: Float32Array[] = [];
	const load0 = loadavg()[0] as number;
	const cpuBefore = process.cpuUsage();
	started = performance.now();
	const jobs: JobResult[] = [];
	const queue = spec.jobs.map((seconds, i) => ({ seconds, i }));
	await Promise.all(
		Array.from({ length: spec.concurrency }, async () => {
			for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
				const keep = next.i === 0 && spec.saveOutput !== undefined && spec.jobs.length === 1;
				const paths = pathsOf(next.i % (spec.voices ?? 1));
				const before = chunks.length;
				const wall = await convert(next.seconds, keep ? output : undefined, paths);
				jobs.push({
					seconds: next.seconds,
					wall,
					rssMiB: process.memoryUsage().rss / 2 ** 20,
					peakRssMiB: process.resourceUsage().maxRSS / 1024,
					...(spec.concurrency === 1
						? { lentWindows: chunks.slice(before).filter((c) => c.synthesizerThreads > 1).length }
						: {}),
				});
			}
		}),
	);
	const wall = (performance.now() - started) / 1000;
	const used = process.cpuUsage(cpuBefore);
	const load1 = loadavg()[0] as number;
	const gpu = gpuMemoryMiB();
	await engine.dispose();
	if (spec.saveOutput !== undefined) {
		const all = new Float32Array(output.reduce((n, b) => n + b.length, 0));
		let offset = 0;
		for (const b of output) {
			all.set(b, offset);
			offset += b.length;
		}
		writeFileSync(spec.saveOutput, new Uint8Array(all.buffer));
	}
	const sum = (key: keyof RvcChunkStats["milliseconds"]) => chunks.reduce((s, c) => s + c.milliseconds[key], 0) / 1000;
	return {
		provider: info.executionProvider,
		decodePieces: Number(info.details?.decode_pieces ?? 1),
		featureArenas: info.details?.feature_arenas === true,
		lendIdleThreads: info.details?.lend_idle_threads === true,
		synthesizerThreads: chunks.reduce((most, c) => Math.max(most, c.synthesizerThreads), 1),
		lentWindows: chunks.filter((c) => c.synthesizerThreads > 1).length,
		startup: { init, prepare },
		firstJob,
		jobs,
		wall,
		cpuSeconds: (used.user + used.system) / 1e6,
		load: [load0, load1],
		stages: {
			contentvec: sum("contentvec"),
			"log-mel": sum("mel"),
			rmvpe: sum("rmvpe"),
			synthesizer: sum("synthesizer"),
		},
		convertedSeconds: chunks.reduce((s, c) => s + c.windowSamples, 0) / IN_RATE,
		decodedSeconds: chunks.reduce((s, c) => s + c.decodedFrames, 0) / 100,
		chunks: chunks.length,
		peakRssMiB: process.resourceUsage().maxRSS / 1024,
		...(gpu !== undefined ? { gpuMemoryMiB: gpu } : {}),
	};
}

if (values.child !== undefined) {
	console.log(JSON.stringify(await runCase(JSON.parse(values.child) as CaseSpec)));
	process.exit(0);
}

function runChild(spec: CaseSpec): Promise<CaseResult> {
	return new Promise((resolve, reject) => {
		const child = spawn(
			process.execPath,
			["--import", "./src/resolve-fallback.ts", import.meta.filename, "--child", JSON.stringify(spec)],
			{
				cwd: join(import.meta.dirname, "..", "..", "gpu-runner"),
				stdio: ["ignore", "pipe", "inherit"],
				// As the runner's image sets them (gpu-runner/Dockerfile): glibc would keep freed model-loading
				// buffers in its heap (returned at once, RSS is what is in use), and large blocks get huge pages.
				env: {
					...process.env,
					MALLOC_MMAP_THRESHOLD_: process.env.MALLOC_MMAP_THRESHOLD_ ?? "131072",
					GLIBC_TUNABLES: process.env.GLIBC_TUNABLES ?? "glibc.malloc.hugetlb=1",
				},
			},
		);
		let out = "";
		child.stdout.on("data", (c: Buffer) => {
			out += c.toString();
		});
		child.on("exit", (code) =>
			code === 0
				? resolve(JSON.parse(out.trim().split("\n").pop() ?? "{}") as CaseResult)
				: reject(new Error(`bench child exited ${code}`)),
		);
	});
}

const fmt = (n: number, digits = 2) => n.toFixed(digits);
/** "new (was old, x ratio)": the ratio is old / new, so above 1 is better for times and sizes. */
const versus = (value: number, before: number | undefined, digits = 3) =>
	before === undefined
		? fmt(value, digits)
		: `${fmt(value, digits)} (was ${fmt(before, digits)}, ${fmt(before / value, 2)}x)`;

const seconds = Number(values.seconds);
const threads = values.threads === undefined ? undefined : Number(values.threads);
const chunkSeconds = values["chunk-seconds"] === undefined ? undefined : Number(values["chunk-seconds"]);
const providers = (values.providers ?? "").split(",");
const contentvecInt8 = values["contentvec-int8"] ?? false;
if (values["feature-arenas"] && values["no-feature-arenas"])
	throw new Error("--feature-arenas and --no-feature-arenas contradict each other");
const featureArenas = values["feature-arenas"] ? true : values["no-feature-arenas"] ? false : undefined;
const decodePieces = values["decode-pieces"] === undefined ? undefined : Number(values["decode-pieces"]);
if (decodePieces !== undefined && !(Number.isInteger(decodePieces) && decodePieces >= 1))
	throw new Error(`--decode-pieces takes a whole number of pieces, 1 or more (got ${values["decode-pieces"]})`);
const loneCapacity = Number(values["lone-capacity"]);
if (!(Number.isInteger(loneCapacity) && loneCapacity >= 1))
	throw new Error(`--lone-capacity takes a whole number of jobs, 1 or more (got ${values["lone-capacity"]})`);
const lendIdleThreads = !values["no-lend-threads"];
const voiceCount = values.voices === undefined ? 0 : Number(values.voices);
const cachedVoices = values["cached-voices"] === undefined ? undefined : Number(values["cached-voices"]);
for (const [flag, n] of [
	["--voices", values.voices === undefined ? 1 : voiceCount],
	["--cached-voices", cachedVoices ?? 1],
] as const)
	if (!(Number.isInteger(n) && n >= 1)) throw new Error(`${flag} takes a whole number, 1 or more (got ${n})`);
const dir = mkdtempSync(join(tmpdir(), "rvc-bench-"));
const base = {
	dir,
	providers,
	contentvecInt8,
	...(featureArenas !== undefined ? { featureArenas } : {}),
	...(decodePieces !== undefined ? { decodePieces } : {}),
	lendIdleThreads,
	...(threads !== undefined ? { threads } : {}),
	...(chunkSeconds !== undefined ? { chunkSeconds } : {}),
	...(values["rms-mix-rate"] !== undefined ? { rmsMixRate: Number(values["rms-mix-rate"]) } : {}),
};
const graphOptions = {
	sourceNoise: !values["no-source-noise"],
	...(values["reference-graph"] ? { decoderLayout: "1d" as const } : { decodeSpan: true }),
};
try {
	console.log(
		`rvc engine benchmark: ${seconds} s of 16 kHz audio -> 40 kHz, ${cpus()[0]?.model ?? "cpu"} x ${availableParallelism()}, threads ${threads ?? "default"}${contentvecInt8 ? ", ContentVec int8" : ""}${featureArenas === undefined ? "" : featureArenas ? ", feature arenas" : ", no feature arenas"}${decodePieces !== undefined ? `, decode pieces ${decodePieces}` : ""}${loneCapacity > 1 ? `, the 40 s job alone at capacity ${loneCapacity}` : ""}${lendIdleThreads ? "" : ", no lent threads"}`,
	);
	console.log("\nmodels (random weights, built now):");
	for (const build of [buildContentVec, buildRmvpe, () => buildSynthesizer40k(graphOptions)]) {
		const started = performance.now();
		const model: BuiltModel = build();
		writeFileSync(join(dir, `${model.name}.onnx`), model.bytes);
		// Other voices' synthesizers for --voices: copies, each a file (and so a session) of its own.
		if (model.name === "synthesizer")
			for (let k = 1; k < voiceCount; k++) writeFileSync(join(dir, `synthesizer-${k}.onnx`), model.bytes);
		const parts = model.parts
			? ` (${Object.entries(model.parts)
					.map(([k, v]) => `${k} ${fmt(v / 1e6)}M`)
					.join(", ")})`
			: "";
		console.log(
			`  ${model.name.padEnd(12)} ${fmt(model.parameters / 1e6)}M params${parts}, ${fmt(model.bytes.length / 2 ** 20, 1)} MiB, built in ${fmt((performance.now() - started) / 1000, 1)} s`,
		);
		console.log(`  ${"".padEnd(12)} ${model.description}`);
	}

	const main = await runChild({
		...base,
		jobs: [seconds],
		concurrency: 1,
		capacity: loneCapacity,
		...(values["save-output"] ? { saveOutput: values["save-output"] } : {}),
	});
	const was = main.provider === "cuda" ? BASELINE.cuda : main.provider === "cpu" ? BASELINE.cpu : undefined;
	console.log(`\nexecution provider: ${main.provider}`);
	console.log(
		`start-up: provider self-test ${fmt(main.startup.init)} s, sessions created and warmed (prepare) ${fmt(main.startup.prepare)} s`,
	);
	const firstOverhead = main.firstJob.wall - main.firstJob.again;
	console.log(
		`first job after start (2 s of audio): ${fmt(main.firstJob.wall)} s, the same job again ${fmt(main.firstJob.again)} s: ${fmt(firstOverhead)} s beyond its conversion (before: ${was ? `${was.firstJob} s including session load` : "n/a"})`,
	);
	const wall = main.wall;
	console.log(
		`converted ${seconds} s in ${main.chunks} chunk(s), ${versus(main.convertedSeconds, seconds === 40 ? was?.convertedSeconds : undefined, 1)} s including context, ${fmt(main.decodedSeconds, 1)} s decoded`,
	);
	console.log("\nstage          seconds    RTF");
	const inStages = Object.values(main.stages).reduce((a, b) => a + b, 0);
	for (const [name, s] of Object.entries(main.stages)) {
		const before = was?.[name as keyof typeof was];
		console.log(
			`  ${name.padEnd(12)} ${fmt(s).padStart(7)}   ${versus(s / seconds, typeof before === "number" ? before : undefined)}`,
		);
	}
	console.log(`  ${"other".padEnd(12)} ${fmt(wall - inStages).padStart(7)}   ${fmt((wall - inStages) / seconds, 3)}`);
	console.log(
		`  ${"total".padEnd(12)} ${fmt(wall).padStart(7)}   ${versus(wall / seconds, was?.rtf)}  (${fmt(seconds / wall)}x real time)`,
	);
	console.log(
		`\nCPU time ${fmt(main.cpuSeconds)} s = ${fmt(main.cpuSeconds / seconds)} CPU-seconds per audio second; load average ${fmt(main.load[0])} -> ${fmt(main.load[1])} on ${availableParallelism()} cores`,
	);
	console.log(`peak RSS ${versus(main.peakRssMiB, was?.rss, 0)} MiB`);
	if (loneCapacity > 1)
		console.log(
			`a runner of capacity ${loneCapacity}: spans decoded on up to ${main.synthesizerThreads} model thread(s)${main.lendIdleThreads ? " (idle threads lent)" : ""}`,
		);
	if (main.gpuMemoryMiB !== undefined) console.log(`GPU memory in use (nvidia-smi) ${main.gpuMemoryMiB} MiB`);

	// How far the synthesizer is from what this machine's convolution kernels allow (synthesizer-roofline.ts).
	let roofline: Record<string, unknown> | undefined;
	if (main.provider === "cpu" && values["reference-graph"] === false) {
		const arithmetic = synthesizerArithmetic(parseSynthesizerConfig(PUBLISHED_CONFIG_40K), 768, true);
		const rates = await measureConvolutionRates(arithmetic, threads ?? availableParallelism(), main.decodePieces);
		const flop = synthesizerFlop(arithmetic, main.decodedSeconds, main.convertedSeconds);
		// All of its arithmetic at the fastest rate any of its convolutions reached alone here.
		const best = Math.max(...rates.values());
		const floor = flop / best;
		const synthesizer = main.stages.synthesizer ?? Number.NaN;
		const others = wall - synthesizer;
		const g = (x: number) => fmt(x / 1e9, 1);
		console.log(
			`\nsynthesizer arithmetic (2 FLOP per weight multiply-add): decoder ${g(arithmetic.decoder)} GFLOP per decoded second (${g(arithmetic.decoder - arithmetic.decoderOther)} in residual blocks), text encoder and flow ${g(arithmetic.encoderAndFlow)} per window second`,
		);
		console.log(
			`  this run: ${fmt(main.decodedSeconds, 1)} s decoded, ${fmt(main.convertedSeconds, 1)} s of windows = ${fmt(flop / 1e9, 0)} GFLOP in ${fmt(synthesizer)} s = ${g(flop / synthesizer)} GFLOP/s (${g(flop / seconds)} GFLOP per audio second)`,
		);
		console.log(
			`  residual convolutions alone here (${threads ?? availableParallelism()} threads, one 5.32 s window in ${main.decodePieces} piece(s), dilation 3), GFLOP/s: ${arithmetic.stages
				.map(
					(st) =>
						`${st.channels} ch ${[...st.residualByKernel.keys()].map((k) => `k${k} ${g(rates.get(rateKey(st.channels, k)) ?? 0)}`).join(" ")}`,
				)
				.join("; ")}`,
		);
		console.log(
			`  all of it at the fastest of those rates would take ${fmt(floor)} s = RTF ${fmt(floor / seconds, 3)} (this run ${fmt(synthesizer / seconds, 3)}, at ${fmt((100 * floor) / synthesizer, 0)} % of that speed); with the other stages as this run measured them (RTF ${fmt(others / seconds, 3)}), the conversion would then be at RTF ${fmt((floor + others) / seconds, 3)}`,
		);
		// The issue's CPU target: even with every other stage free, the synthesizer alone would have to run this fast.
		const targetRtf = 0.3;
		const needed = flop / (targetRtf * seconds);
		console.log(
			`  RTF ${targetRtf} in all would need the synthesizer's arithmetic at ${g(needed)} GFLOP/s or more with every other stage taking no time: ${fmt(needed / best)}x the fastest convolution here`,
		);
		roofline = {
			bench: "rvc-synthesizer-roofline",
			synthesizer_gflop_per_audio_second: flop / seconds / 1e9,
			synthesizer_gflops: flop / synthesizer / 1e9,
			synthesizer_floor_rtf: floor / seconds,
			conversion_floor_rtf: (floor + others) / seconds,
			gflops_needed_for_rtf_0_3: needed / 1e9,
			residual_conv_gflops: Object.fromEntries([...rates].map(([k, v]) => [k, v / 1e9])),
		};
	}

	if (values["compare-with"] !== undefined && values["save-output"] !== undefined) {
		const a = new Float32Array(readFileSync(values["save-output"]).buffer.slice(0));
		const b = new Float32Array(readFileSync(values["compare-with"]).buffer.slice(0));
		let maxError = 0;
		let signal = 0;
		let error = 0;
		for (let i = 0; i < Math.min(a.length, b.length); i++) {
			const d = (a[i] as number) - (b[i] as number);
			maxError = Math.max(maxError, Math.abs(d));
			signal += (b[i] as number) ** 2;
			error += d * d;
		}
		console.log(
			`output against ${values["compare-with"]}: ${a.length} vs ${b.length} samples, max abs error ${maxError.toExponential(2)}, SNR ${fmt(10 * Math.log10(signal / error), 1)} dB`,
		);
	}

	const jobCount = values.jobs === undefined ? 0 : Number(values.jobs);
	if (jobCount > 0) {
		const jobSeconds = Number(values["job-seconds"]);
		const capacity = Number(values.capacity);
		console.log(`\n${jobCount} jobs of ${jobSeconds} s (${main.provider}):`);
		const alone = await runChild({ ...base, jobs: Array(jobCount).fill(jobSeconds), concurrency: 1 });
		const together = await runChild({ ...base, jobs: Array(jobCount).fill(jobSeconds), concurrency: capacity });
		const meanAlone = alone.jobs.reduce((s, j) => s + j.wall, 0) / alone.jobs.length;
		for (const [label, r] of [
			["capacity 1", alone],
			[`capacity ${capacity}`, together],
		] as const) {
			const slowest = Math.max(...r.jobs.map((j) => j.wall));
			const mean = r.jobs.reduce((sum, j) => sum + j.wall, 0) / r.jobs.length;
			console.log(
				`  ${label.padEnd(11)} ${fmt((jobCount * jobSeconds) / r.wall)} audio s per wall s, ${fmt(r.cpuSeconds / (jobCount * jobSeconds))} CPU-s per audio s; slowest job ${fmt(slowest)} s = ${fmt(slowest / meanAlone)}x a job alone (${fmt(meanAlone)} s), mean ${fmt(mean / meanAlone)}x; load ${fmt(r.load[0])} -> ${fmt(r.load[1])}; peak RSS ${fmt(r.peakRssMiB, 0)} MiB${r.featureArenas ? "; feature arenas" : ""}${r.lendIdleThreads ? `; ${r.lentWindows} of ${r.chunks} windows with lent threads` : ""}${r.gpuMemoryMiB !== undefined ? `; GPU memory ${r.gpuMemoryMiB} MiB` : ""}`,
			);
		}
	}

	if (voiceCount > 0) {
		const jobSeconds = Number(values["job-seconds"]);
		const r = await runChild({
			...base,
			jobs: Array(voiceCount + 1).fill(jobSeconds),
			concurrency: 1,
			capacity: loneCapacity,
			statedLength: true,
			voices: voiceCount,
			...(cachedVoices !== undefined ? { cachedVoices } : {}),
		});
		console.log(
			`\n${voiceCount} voices in turn, then the first again, ${jobSeconds} s each (${main.provider}, capacity ${loneCapacity}, ${cachedVoices ?? "default"} voice(s) kept per model thread):`,
		);
		for (const [i, job] of r.jobs.entries()) {
			console.log(
				`  voice ${(i % voiceCount) + 1}: ${fmt(job.wall)} s, RSS ${fmt(job.rssMiB, 0)} MiB, peak ${fmt(job.peakRssMiB, 0)} MiB${job.lentWindows !== undefined ? `, ${job.lentWindows} window(s) with lent threads` : ""}`,
			);
		}
	}

	const minutes = values.long ? [1, 10, 60] : (values["memory-minutes"]?.split(",").map(Number) ?? []);
	if (minutes.length > 0) console.log(`\npeak RSS by length (${main.provider}, all three models loaded):`);
	for (const m of minutes) {
		const r = await runChild({ ...base, jobs: [m * 60], concurrency: 1 });
		console.log(
			`  ${String(m).padStart(3)} min: peak RSS ${versus(r.peakRssMiB, was?.rss, 0)} MiB, RTF ${fmt(r.wall / (m * 60), 3)}, load ${fmt(r.load[0])} -> ${fmt(r.load[1])}`,
		);
	}

	// The rvc line stays the last: runs are compared by it.
	if (roofline !== undefined) console.log(JSON.stringify(roofline));
	console.log(
		JSON.stringify({
			bench: "rvc",
			provider: main.provider,
			threads: threads ?? "default",
			audio_seconds: seconds,
			wall_seconds: wall,
			rtf: wall / seconds,
			cpu_seconds_per_audio_second: main.cpuSeconds / seconds,
			chunk_seconds: chunkSeconds ?? "default",
			load_average: main.load,
			stage_rtf: Object.fromEntries(Object.entries(main.stages).map(([k, v]) => [k, v / seconds])),
			peak_rss_mib: main.peakRssMiB,
			first_job_overhead_seconds: firstOverhead,
			...(main.gpuMemoryMiB !== undefined ? { gpu_memory_mib: main.gpuMemoryMiB } : {}),
			contentvec_int8: contentvecInt8,
			feature_arenas: main.featureArenas,
			decode_pieces: main.decodePieces,
			runner_capacity: loneCapacity,
			lend_idle_threads: main.lendIdleThreads,
		}),
	);
} finally {
	rmSync(dir, { recursive: true, force: true });
}
