/**
 * Cost of RVC's feature retrieval per audio second, on indexes the size RVC users hold: 768-wide v2 features,
 * an `IVF{n},Flat` index with RVC's n = min(16 sqrt(N), N / 39) and nprobe 1, and a plain Flat L2 one. The index
 * files are written here in faiss's format (clustered random vectors: each list's vectors scattered around its
 * centroid), read back with the engine's reader, and searched as the engine does: ContentVec's 50 frames per
 * second, in windows of 12 s (a 10 s chunk with 1 s of context either side), 8 neighbours, index_rate 0.75.
 *
 *   npm run bench                                   # runs this as part of the runner's benchmark
 *   node --import ./src/resolve-fallback.ts ../bench/runner/index-search-bench.ts --vectors 400000 --seconds 60
 */
import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { IndexCache } from "../../gpu-runner/src/engines/rvc/index-cache.ts";

const { values } = parseArgs({
	options: {
		vectors: { type: "string", default: "200000" },
		"flat-vectors": { type: "string", default: "100000" },
		seconds: { type: "string", default: "60" },
		threads: { type: "string" },
	},
});
const DIM = 768;
const FRAMES_PER_SECOND = 50;
const WINDOW_SECONDS = 12;
const audioSeconds = Number(values.seconds);
const threads = values.threads === undefined ? undefined : Number(values.threads);

let seed = 17;
/** Standard normal values (Box-Muller over a 32-bit LCG): fast enough for hundreds of millions. */
function fillNormal(out: Float32Array, offset: number, length: number, mean: Float32Array | undefined, scale: number) {
	for (let i = 0; i < length; i += 2) {
		seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
		const u = (seed + 1) / 2 ** 32;
		seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
		const v = seed / 2 ** 32;
		const r = Math.sqrt(-2 * Math.log(u)) * scale;
		out[offset + i] = r * Math.cos(2 * Math.PI * v) + (mean?.[i % DIM] ?? 0);
		if (i + 1 < length) out[offset + i + 1] = r * Math.sin(2 * Math.PI * v) + (mean?.[(i + 1) % DIM] ?? 0);
	}
}

/** Little-endian writer straight to a file descriptor. */
class FaissFileWriter {
	readonly #fd: number;
	constructor(path: string) {
		this.#fd = openSync(path, "w");
	}
	bytes(data: ArrayBufferView): void {
		writeSync(this.#fd, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
	}
	fourcc(code: string): void {
		this.bytes(Buffer.from(code, "latin1"));
	}
	int32(v: number): void {
		this.bytes(Int32Array.of(v));
	}
	int64(v: number): void {
		this.bytes(BigInt64Array.of(BigInt(v)));
	}
	/** faiss's index header: d, ntotal, two dummies, is_trained, metric L2. */
	header(dim: number, ntotal: number): void {
		this.int32(dim);
		this.int64(ntotal);
		this.int64(1 << 20);
		this.int64(1 << 20);
		this.bytes(Uint8Array.of(1));
		this.int32(1);
	}
	close(): void {
		closeSync(this.#fd);
	}
}

/** An RVC-style IVF{n},Flat index of `total` vectors; returns its centroids for making queries. */
function writeIvfIndex(path: string, total: number): { nlist: number; centroids: Float32Array } {
	const nlist = Math.min(Math.floor(16 * Math.sqrt(total)), Math.floor(total / 39));
	const centroids = new Float32Array(nlist * DIM);
	fillNormal(centroids, 0, centroids.length, undefined, 1);
	const sizes = Array.from(
		{ length: nlist },
		(_, l) => Math.floor(((l + 1) * total) / nlist) - Math.floor((l * total) / nlist),
	);
	const file = new FaissFileWriter(path);
	file.fourcc("IwFl");
	file.header(DIM, total);
	file.int64(nlist);
	file.int64(1);
	file.fourcc("IxF2");
	file.header(DIM, nlist);
	file.int64(nlist * DIM);
	file.bytes(centroids);
	file.bytes(Uint8Array.of(0));
	file.int64(0);
	file.fourcc("ilar");
	file.int64(nlist);
	file.int64(DIM * 4);
	file.fourcc("full");
	file.int64(nlist);
	file.bytes(BigInt64Array.from(sizes, BigInt));
	let id = 0;
	for (let l = 0; l < nlist; l++) {
		const n = sizes[l] as number;
		const vectors = new Float32Array(n * DIM);
		fillNormal(vectors, 0, vectors.length, centroids.subarray(l * DIM, (l + 1) * DIM), 0.35);
		file.bytes(vectors);
		file.bytes(BigInt64Array.from({ length: n }, () => BigInt(id++)));
	}
	file.close();
	return { nlist, centroids };
}

function writeFlatIndex(path: string, total: number, centroids: Float32Array): void {
	const file = new FaissFileWriter(path);
	file.fourcc("IxF2");
	file.header(DIM, total);
	file.int64(total * DIM);
	const clusters = centroids.length / DIM;
	const block = 4096;
	for (let start = 0; start < total; start += block) {
		const n = Math.min(block, total - start);
		const vectors = new Float32Array(n * DIM);
		for (let r = 0; r < n; r++) {
			const c = (start + r) % clusters;
			fillNormal(vectors, r * DIM, DIM, centroids.subarray(c * DIM, (c + 1) * DIM), 0.35);
		}
		file.bytes(vectors);
	}
	file.close();
}

/** Feature frames near the index's clusters, like a speaker close to the voice's training data. */
function queryFrames(count: number, centroids: Float32Array): Float32Array {
	const frames = new Float32Array(count * DIM);
	const clusters = centroids.length / DIM;
	for (let f = 0; f < count; f++) {
		const c = (f * 7919) % clusters;
		fillNormal(frames, f * DIM, DIM, centroids.subarray(c * DIM, (c + 1) * DIM), 0.5);
	}
	return frames;
}

const fmt = (n: number, digits = 2) => n.toFixed(digits);
const mib = (bytes: number) => fmt(bytes / 2 ** 20, 0);

/** Read and searched as the engine does: through its cache, which gives each index a thread of its own. */
async function measure(label: string, path: string, cache: IndexCache, centroids: Float32Array) {
	let started = performance.now();
	const { index, release } = await cache.acquire(path);
	const readSeconds = (performance.now() - started) / 1000;
	const held = index.facts.heldBytes;
	const frames = queryFrames(Math.round(audioSeconds * FRAMES_PER_SECOND), centroids);
	const perWindow = WINDOW_SECONDS * FRAMES_PER_SECOND;
	// One window first, so the sessions and the norms of a flat index are ready (as after a voice's first job).
	await index.retrieve(frames.subarray(0, perWindow * DIM), perWindow, 0.75);
	const cpuBefore = process.cpuUsage();
	started = performance.now();
	for (let f0 = 0; f0 < frames.length / DIM; f0 += perWindow) {
		const count = Math.min(perWindow, frames.length / DIM - f0);
		await index.retrieve(frames.subarray(f0 * DIM, (f0 + count) * DIM), count, 0.75);
	}
	const wall = (performance.now() - started) / 1000;
	const cpu = process.cpuUsage(cpuBefore);
	const cpuSeconds = (cpu.user + cpu.system) / 1e6;
	const result = {
		index: label,
		vectors: index.facts.ntotal,
		nlist: index.facts.nlist,
		nprobe: index.facts.nprobe,
		file_mib: statSync(path).size / 2 ** 20,
		read_seconds: readSeconds,
		held_mib: held / 2 ** 20,
		ms_per_audio_second: (1000 * wall) / audioSeconds,
		cpu_ms_per_audio_second: (1000 * cpuSeconds) / audioSeconds,
	};
	release();
	console.log(
		`  ${label.padEnd(34)} file ${mib(statSync(path).size)} MiB read in ${fmt(readSeconds, 1)} s, ${mib(held)} MiB held; retrieval ${fmt(result.ms_per_audio_second, 1)} ms per audio second (${fmt(result.cpu_ms_per_audio_second, 1)} CPU-ms)`,
	);
	return result;
}

const dir = mkdtempSync(join(tmpdir(), "index-bench-"));
try {
	const total = Number(values.vectors);
	const flatTotal = Number(values["flat-vectors"]);
	console.log(
		`feature retrieval: ${audioSeconds} s of audio (${audioSeconds * FRAMES_PER_SECOND} frames of ${DIM}), k = 8, ${WINDOW_SECONDS} s windows; ${cpus()[0]?.model ?? "cpu"} x ${availableParallelism()}, threads ${threads ?? "default"}, load ${fmt(loadavg()[0] as number)}`,
	);
	let started = performance.now();
	const ivfPath = join(dir, "ivf.index");
	const { nlist, centroids } = writeIvfIndex(ivfPath, total);
	const flatPath = join(dir, "flat.index");
	writeFlatIndex(flatPath, flatTotal, centroids);
	console.log(`  (index files generated in ${fmt((performance.now() - started) / 1000, 1)} s)`);
	started = performance.now();
	// Capacity 1, so the first index is dropped (its thread closed) before the second is read.
	const cache = new IndexCache({ count: 1 }, threads !== undefined ? { intraOpNumThreads: threads } : {});
	const results = [];
	results.push(await measure(`IVF${nlist},Flat nprobe 1, ${total} vectors`, ivfPath, cache, centroids));
	rmSync(ivfPath);
	results.push(await measure(`Flat L2, ${flatTotal} vectors`, flatPath, cache, centroids));
	await cache.clear();
	console.log(`  peak RSS ${fmt(process.resourceUsage().maxRSS / 1024, 0)} MiB`);
	console.log(
		JSON.stringify({ bench: "rvc-index", threads: threads ?? "default", audio_seconds: audioSeconds, results }),
	);
} finally {
	rmSync(dir, { recursive: true, force: true });
}
