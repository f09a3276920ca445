/**
 * Real-time factor of the rvc engine with full-size models (random weights, see rvc-models.ts), built into a
 * temporary folder at run time and deleted afterwards.
 *
 *   npm run bench                              # 40 s of audio, onnxruntime's default threads
 *   npm run bench -- --seconds 20 --threads 1 --chunk-seconds 10
 *
 * RTF = processing time / audio duration (below 1 is faster than real time). Wall-clock RTF depends on what
 * else the machine runs, so the CPU time this process used per audio second and the load average are printed
 * beside it.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { AudioBlock } from "../../gpu-runner/src/engines/engine.ts";
import { createRvcEngine, type RvcChunkStats } from "../../gpu-runner/src/engines/rvc/index.ts";
import type { VoiceDescriptor } from "../../src/contracts/runner.ts";
import { type BuiltModel, buildContentVec, buildRmvpe, buildSynthesizer40k } from "./rvc-models.ts";

const { values } = parseArgs({
	options: {
		seconds: { type: "string", default: "40" },
		threads: { type: "string" },
		providers: { type: "string", default: "cuda,webgpu,cpu" },
		"chunk-seconds": { type: "string" },
	},
});
const chunkSeconds = values["chunk-seconds"] === undefined ? undefined : Number(values["chunk-seconds"]);
const seconds = Number(values.seconds);
const threads = values.threads === undefined ? undefined : Number(values.threads);
const providers = (values.providers ?? "").split(",") as ("cuda" | "webgpu" | "cpu")[];
const IN_RATE = 16000;
const OUT_RATE = 40000;

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

async function convert(
	engine: ReturnType<typeof createRvcEngine>,
	voice: VoiceDescriptor,
	artifactPaths: Map<string, string>,
	audioSeconds: number,
): Promise<number> {
	let samples = 0;
	const job = {
		voice,
		semitones: 3,
		artifactPaths,
		input: { sampleRate: IN_RATE, channels: 1 },
	};
	for await (const block of engine.convert(asAsync(speechLike(audioSeconds)), job, new AbortController().signal))
		samples += block.channels[0]?.length ?? 0;
	return samples;
}

const fmt = (n: number, digits = 2) => n.toFixed(digits);
const dir = mkdtempSync(join(tmpdir(), "rvc-bench-"));
try {
	console.log(
		`rvc engine benchmark: ${seconds} s of 16 kHz audio -> 40 kHz, ${cpus()[0]?.model ?? "cpu"} x ${availableParallelism()}, threads ${threads ?? "default"}`,
	);
	console.log("\nmodels (random weights, built now):");
	const artifactPaths = new Map<string, string>();
	for (const build of [buildContentVec, buildRmvpe, buildSynthesizer40k]) {
		const started = performance.now();
		const model: BuiltModel = build();
		const path = join(dir, `${model.name}.onnx`);
		writeFileSync(path, model.bytes);
		artifactPaths.set(model.name, path);
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

	const chunks: RvcChunkStats[] = [];
	const engine = createRvcEngine({
		executionProviders: providers,
		noiseSeed: 1,
		onChunk: (s) => chunks.push(s),
		...(threads !== undefined ? { intraOpNumThreads: threads } : {}),
	});
	const info = await engine.init();
	console.log(`\nexecution provider: ${info.executionProvider}`);
	for (const a of (info.details?.attempts ?? []) as {
		provider: string;
		outcome: string;
		reason?: string;
	}[]) {
		console.log(`  ${a.provider.padEnd(7)} ${a.outcome}${a.reason ? `: ${a.reason.slice(0, 160)}` : ""}`);
	}

	const voice: VoiceDescriptor = {
		id: "0d7f6a55-6c3f-4c1e-9d2b-7f3e1c2a9b01",
		name: "bench",
		engine: "rvc",
		params: {
			sample_rate: OUT_RATE,
			...(chunkSeconds !== undefined
				? {
						chunk_seconds: chunkSeconds,
						chunk_search_seconds: Math.min(5, chunkSeconds / 4),
					}
				: {}),
		},
		artifacts: [],
	};
	let started = performance.now();
	await convert(engine, voice, artifactPaths, 2);
	const warmup = performance.now() - started;
	chunks.length = 0;

	const loadBefore = loadavg()[0] as number;
	const cpuBefore = process.cpuUsage();
	started = performance.now();
	const outSamples = await convert(engine, voice, artifactPaths, seconds);
	const wall = (performance.now() - started) / 1000;
	const cpuUsed = process.cpuUsage(cpuBefore);
	const cpuSeconds = (cpuUsed.user + cpuUsed.system) / 1e6;
	const loadAfter = loadavg()[0] as number;
	await engine.dispose();

	const sum = (key: keyof RvcChunkStats["milliseconds"]) => chunks.reduce((s, c) => s + c.milliseconds[key], 0) / 1000;
	const stages = {
		contentvec: sum("contentvec"),
		"log-mel": sum("mel"),
		rmvpe: sum("rmvpe"),
		synthesizer: sum("synthesizer"),
	};
	const inStages = Object.values(stages).reduce((a, b) => a + b, 0);
	const converted = chunks.reduce((s, c) => s + c.windowSamples, 0) / IN_RATE;
	console.log(`\nfirst job (session load + 2 s of audio): ${fmt(warmup / 1000)} s`);
	console.log(
		`converted ${seconds} s in ${chunks.length} chunk(s), ${fmt(converted, 1)} s including context; output ${fmt(outSamples / OUT_RATE, 3)} s`,
	);
	console.log("\nstage          seconds    RTF    share");
	for (const [name, s] of Object.entries(stages))
		console.log(
			`  ${name.padEnd(12)} ${fmt(s).padStart(7)} ${fmt(s / seconds, 3).padStart(7)} ${fmt((100 * s) / wall, 1).padStart(6)}%`,
		);
	console.log(
		`  ${"other".padEnd(12)} ${fmt(wall - inStages).padStart(7)} ${fmt((wall - inStages) / seconds, 3).padStart(7)} ${fmt((100 * (wall - inStages)) / wall, 1).padStart(6)}%`,
	);
	console.log(
		`  ${"total".padEnd(12)} ${fmt(wall).padStart(7)} ${fmt(wall / seconds, 3).padStart(7)}  (${fmt(seconds / wall)}x real time)`,
	);
	console.log(
		`\nCPU time ${fmt(cpuSeconds)} s = ${fmt(cpuSeconds / seconds)} CPU-seconds per audio second; load average ${fmt(loadBefore)} -> ${fmt(loadAfter)} on ${availableParallelism()} cores`,
	);
	console.log(`peak RSS ${fmt(process.resourceUsage().maxRSS / 1024, 0)} MiB`);
	console.log(
		JSON.stringify({
			bench: "rvc",
			provider: info.executionProvider,
			threads: threads ?? "default",
			audio_seconds: seconds,
			wall_seconds: wall,
			rtf: wall / seconds,
			cpu_seconds_per_audio_second: cpuSeconds / seconds,
			chunk_seconds: chunkSeconds ?? "default",
			load_average: [loadBefore, loadAfter],
			stage_rtf: Object.fromEntries(Object.entries(stages).map(([k, v]) => [k, v / seconds])),
			peak_rss_mib: process.resourceUsage().maxRSS / 1024,
		}),
	);
} finally {
	rmSync(dir, { recursive: true, force: true });
}
