/**
 * `npm run bench`: figures for the runner on this machine's CPU.
 * 1. dsp engine real-time factor on one thread (child pinned with taskset when available).
 * 2. Peak RSS of the runner converting a generated 60-minute MP3 (BENCH_MP3_MINUTES to change), end to end
 *    through its real pipeline, with the source served and the output received over local HTTP.
 * 3. When the rvc engine is present: its real-time factor per stage (bench/rvc-bench.ts) and the cost of its
 *    feature retrieval per audio second on RVC-sized indexes (bench/runner/index-search-bench.ts).
 * The MP3 is generated at bench time (sox + lame from apt) in a temporary folder and deleted afterwards.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createReadStream, existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const here = import.meta.dirname;
const packageRoot = join(here, "..", "..", "gpu-runner");
const nodeArgs = ["--import", "./src/resolve-fallback.ts"];
const has = (tool: string) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;

function runChild(script: string, args: string[], pinToOneCore: boolean): string {
	const command = pinToOneCore && has("taskset") ? "taskset" : process.execPath;
	const argv =
		command === "taskset"
			? ["-c", "0", process.execPath, ...nodeArgs, script, ...args]
			: [...nodeArgs, script, ...args];
	return execFileSync(command, argv, {
		cwd: packageRoot,
		encoding: "utf8",
		stdio: ["ignore", "pipe", "inherit"],
		maxBuffer: 1 << 20,
	});
}

console.log(
	'== dsp engine, real-time factor (60 s of generated audio per case, +4 st, formant_shift 2; pitch_method "transpose", the default, and "exact") ==',
);
console.log(
	has("taskset")
		? "pinned to one core with taskset -c 0"
		: "taskset not found: not pinned (the engine itself is single-threaded)",
);
/** The default method's RTF per rate and channels, for the ratio of another method's at the same. */
const transposeRtf = new Map<string, number>();
for (const line of runChild(join(here, "dsp-rtf.ts"), [], true).trim().split("\n")) {
	const r = JSON.parse(line) as {
		sampleRate: number;
		channels: number;
		pitchMethod: string;
		processingSeconds: number;
		rtf: number;
	};
	const key = `${r.sampleRate}/${r.channels}`;
	if (r.pitchMethod === "transpose") transposeRtf.set(key, r.rtf);
	const base = transposeRtf.get(key);
	const ratio =
		r.pitchMethod !== "transpose" && base !== undefined ? `, ${(r.rtf / base).toFixed(2)}x transpose's time` : "";
	console.log(
		`  ${String(r.sampleRate).padStart(6)} Hz ${r.channels} ch ${r.pitchMethod.padEnd(9)}: ${r.processingSeconds.toFixed(2)} s for 60 s -> RTF ${r.rtf.toFixed(4)} (${(1 / r.rtf).toFixed(0)}x real time${ratio})`,
	);
}

// The rvc engine is a separate module with its own benchmark; run it here when it is present.
const rvcBench = join(here, "rvc-bench.ts");
if (existsSync(rvcBench)) {
	console.log("\n== rvc engine (bench/runner/rvc-bench.ts) ==");
	// `npm run bench -- --threads 2 --long` passes its flags to the rvc benchmark (see its header).
	execFileSync(process.execPath, [...nodeArgs, rvcBench, ...process.argv.slice(2)], {
		cwd: packageRoot,
		stdio: "inherit",
	});
	console.log("\n== rvc feature retrieval (bench/runner/index-search-bench.ts) ==");
	execFileSync(process.execPath, [...nodeArgs, join(here, "index-search-bench.ts")], {
		cwd: packageRoot,
		stdio: "inherit",
	});
}

const minutes = Number(process.env.BENCH_MP3_MINUTES ?? 60);
if (!has("sox") || !has("lame")) {
	console.log("\n== peak RSS: skipped, needs sox and lame (apt-get install -y sox lame) ==");
	process.exit(0);
}
console.log(`\n== runner peak RSS converting a generated ${minutes}-minute MP3 (44.1 kHz stereo, 128 kb/s) ==`);
const dir = mkdtempSync(join(tmpdir(), "runner-bench-"));
try {
	const mp3 = join(dir, "source.mp3");
	const generated = performance.now();
	// Voice-like test signal: a gliding tone plus pink noise, synthesised by sox and piped into lame.
	execFileSync("sh", [
		"-c",
		`sox -V1 -n -r 44100 -c 2 -b 16 -t wav - synth ${minutes * 60} sine 120-240 synth pinknoise mix vol 0.4 | lame --quiet -b 128 - "${mp3}"`,
	]);
	const mp3Bytes = statSync(mp3).size;
	console.log(
		`  generated ${(mp3Bytes / 2 ** 20).toFixed(1)} MiB in ${((performance.now() - generated) / 1000).toFixed(1)} s`,
	);

	let uploaded = 0;
	const server = createServer((request, response) => {
		if (request.method === "GET") {
			response.writeHead(200, { "content-type": "audio/mpeg", "content-length": mp3Bytes });
			createReadStream(mp3).pipe(response);
			return;
		}
		request.on("data", (chunk: Buffer) => {
			uploaded += chunk.length;
		});
		request.on("end", () => response.writeHead(200).end());
	});
	await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
	const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
	const child = await new Promise<string>((resolve, reject) => {
		const proc = spawn(
			process.execPath,
			[...nodeArgs, join(here, "convert-once.ts"), `${base}/source`, `${base}/output`, dir],
			{
				cwd: packageRoot,
				stdio: ["ignore", "pipe", "inherit"],
			},
		);
		let out = "";
		proc.stdout.on("data", (c: Buffer) => {
			out += c.toString();
		});
		proc.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`convert-once exited ${code}`))));
	});
	server.close();
	const r = JSON.parse(child.trim().split("\n").pop() ?? "{}") as {
		sourceSeconds: number;
		durationSeconds: number;
		sizeBytes: number;
		processingSeconds: number;
		realTimeFactor: number;
		rssBeforeMiB: number;
		peakRssMiB: number;
	};
	const floatsMiB = (r.sourceSeconds * 44_100 * 2 * 4) / 2 ** 20;
	console.log(
		`  converted ${(r.sourceSeconds / 60).toFixed(2)} min -> ${(r.durationSeconds / 60).toFixed(2)} min WAV (${(r.sizeBytes / 2 ** 20).toFixed(0)} MiB uploaded, ${uploaded === r.sizeBytes ? "size matches" : `MISMATCH: ${uploaded}`})`,
	);
	console.log(`  end-to-end ${r.processingSeconds.toFixed(1)} s -> RTF ${r.realTimeFactor.toFixed(4)}`);
	console.log(`  RSS after start-up ${r.rssBeforeMiB.toFixed(0)} MiB, peak ${r.peakRssMiB.toFixed(0)} MiB`);
	console.log(
		`  the whole source as float32 would be ${floatsMiB.toFixed(0)} MiB: peak RSS is ${((r.peakRssMiB / floatsMiB) * 100).toFixed(1)}% of that`,
	);
} finally {
	rmSync(dir, { recursive: true, force: true });
}
