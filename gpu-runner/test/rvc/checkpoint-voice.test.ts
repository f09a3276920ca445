/**
 * A voice whose `synthesizer` artifact is RVC's `.pth` as published: the engine builds the ONNX graph on first
 * use, keeps it beside the checkpoint under its sha256, reuses it, and converts with the right length and rate.
 * Also the operator tool (`npm run rvc -- inspect|export`) run as a process.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import {
	copyFileSync,
	existsSync,
	readdirSync,
	readFileSync,
	rmSync,
	statSync,
	truncateSync,
	utimesSync,
	writeFileSync,
} from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import * as ort from "onnxruntime-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { VoiceDescriptor } from "../../../src/contracts/runner.ts";
import { ArtifactCache } from "../../src/artifacts/artifact-cache.ts";
import { filesHashed } from "../../src/artifacts/damaged-artifact.ts";
import type { AudioBlock, Engine } from "../../src/engines/engine.ts";
import { createRvcEngine } from "../../src/engines/rvc/index.ts";
import { synthesizerOnnxPath } from "../../src/engines/rvc/synthesizer-file.ts";
import { SYNTHESIZER_GRAPH_VERSION } from "../../src/engines/rvc/synthesizer-graph.ts";
import { permanentFailure } from "../../src/job-errors.ts";
import { scratchDir } from "../helpers/scratch.ts";
import { checksumNamedCopy } from "./support/checksum-named-copy.ts";
import { buildTinyContentVec, buildTinyRmvpe, writeModels } from "./support/tiny-models.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
const TOOL = join(import.meta.dirname, "../../src/rvc-tool.ts");
const IN_RATE = 16000;

async function* tone(seconds: number): AsyncGenerator<AudioBlock> {
	const total = Math.round(seconds * IN_RATE);
	for (let start = 0; start < total; start += 1600) {
		const block = Float32Array.from(
			{ length: Math.min(1600, total - start) },
			(_, i) => 0.3 * Math.sin((2 * Math.PI * 150 * (start + i)) / IN_RATE),
		);
		yield { sampleRate: IN_RATE, channels: [block] };
	}
}

describe("rvc engine with a .pth synthesizer", () => {
	let engine: Engine;
	let artifactPaths: Map<string, string>;
	let checkpoint: string;

	beforeAll(async () => {
		artifactPaths = writeModels({ contentvec: buildTinyContentVec(), rmvpe: buildTinyRmvpe({ pitchBin: 168 }) });
		checkpoint = checksumNamedCopy(join(FIXTURES, "v2-f0-48k.pth"), scratchDir("rvc-pth"));
		artifactPaths.set("synthesizer", checkpoint);
		engine = createRvcEngine({ noiseSeed: 7 });
		await engine.init();
	});

	afterAll(async () => {
		await engine.dispose();
	});

	const voice: VoiceDescriptor = {
		id: "2b0f8a51-7c1e-4d8b-a0a4-5b7e3c9d1f20",
		name: "pth",
		engine: "rvc",
		params: { sample_rate: 48000, chunk_seconds: 1, chunk_search_seconds: 0.2, context_seconds: 0.2 },
		artifacts: [],
	};

	const convert = async (seconds: number): Promise<{ samples: number; rate: number | undefined; peak: number }> => {
		let samples = 0;
		let rate: number | undefined;
		let peak = 0;
		const job = { voice, semitones: 0, artifactPaths, input: { sampleRate: IN_RATE, channels: 1 } };
		for await (const block of engine.convert(tone(seconds), job, new AbortController().signal)) {
			rate = block.sampleRate;
			const channel = block.channels[0] as Float32Array;
			samples += channel.length;
			for (const v of channel) peak = Math.max(peak, Math.abs(v));
		}
		return { samples, rate, peak };
	};

	it("converts with the checkpoint's rate and the input's duration", async () => {
		const result = await convert(2.5);
		expect(result.rate).toBe(48000);
		expect(result.samples).toBe(2.5 * 48000);
		expect(result.peak).toBeGreaterThan(0);
	});

	it("runs an f0 = 0 checkpoint (no pitch inputs, no rmvpe needed)", async () => {
		const dir = scratchDir("rvc-pth");
		const nono = join(dir, "nono.bin");
		copyFileSync(join(FIXTURES, "v2-nono-40k.pth"), nono);
		const paths = new Map([
			["contentvec", artifactPaths.get("contentvec") as string],
			["synthesizer", nono],
		]);
		const job = {
			voice: { ...voice, params: { ...voice.params, sample_rate: 40000 } },
			semitones: 0,
			artifactPaths: paths,
			input: { sampleRate: IN_RATE, channels: 1 },
		};
		let samples = 0;
		for await (const block of engine.convert(tone(1.5), job, new AbortController().signal)) {
			expect(block.sampleRate).toBe(40000);
			samples += block.channels[0]?.length ?? 0;
		}
		expect(samples).toBe(1.5 * 40000);
	});

	/** A fixture checkpoint copied to `dir`, as the artifact cache holds one. */
	const cachedCopy = (dir: string, file: string): string => {
		const path = join(dir, `${file}.bin`);
		copyFileSync(join(FIXTURES, file), path);
		return path;
	};

	/**
	 * With synthesizers of 1 and 3 speakers (`.pth` files, or the ONNX built from them), whose params record no count:
	 * a speaker_id past each one's speakers is refused before converting, and the last speaker converts.
	 */
	const expectSpeakersChecked = async (one: string, three: string): Promise<void> => {
		const convertWith = async (synthesizer: string, speakerId: number) => {
			const job = {
				voice: { ...voice, params: { ...voice.params, sample_rate: 40000, speaker_id: speakerId } },
				semitones: 0,
				artifactPaths: new Map([...artifactPaths, ["synthesizer", synthesizer]]),
				input: { sampleRate: IN_RATE, channels: 1 },
			};
			let samples = 0;
			for await (const block of engine.convert(tone(0.5), job, new AbortController().signal))
				samples += block.channels[0]?.length ?? 0;
			return samples;
		};
		// onnxruntime would fail the embedding lookup (a Gather node's indices) only once the first window got there.
		await expect(convertWith(one, 1)).rejects.toMatchObject({
			code: "invalid_params",
			permanent: true,
			message: expect.stringMatching(/speaker_id 1 is beyond the model's 1 speaker \(0 to 0\)/),
		});
		await expect(convertWith(three, 3)).rejects.toMatchObject({
			code: "invalid_params",
			message: expect.stringMatching(/speaker_id 3 is beyond the model's 3 speakers \(0 to 2\)/),
		});
		expect(await convertWith(three, 2)).toBe(0.5 * 40000);
	};

	it("refuses a speaker_id past the checkpoint's speakers before converting, where the params record no count", async () => {
		const dir = scratchDir("rvc-pth");
		await expectSpeakersChecked(cachedCopy(dir, "v2-f0-40k.pth"), cachedCopy(dir, "v2-f0-40k-3-speakers.pth"));
	});

	it("refuses a speaker_id past an ONNX export's speakers before converting, read from its graph", async () => {
		const dir = scratchDir("rvc-onnx-speakers");
		const one = await synthesizerOnnxPath(cachedCopy(dir, "v2-f0-40k.pth"));
		const three = await synthesizerOnnxPath(cachedCopy(dir, "v2-f0-40k-3-speakers.pth"));
		expect(one.endsWith(".onnx") && three.endsWith(".onnx")).toBe(true);
		// Before, an ONNX file said nothing of its speakers, and onnxruntime failed the job at its Gather node.
		await expectSpeakersChecked(one, three);
	});

	it("builds the ONNX once, beside the checkpoint, named by its sha256, and reuses it", async () => {
		const sha256 = createHash("sha256").update(readFileSync(checkpoint)).digest("hex");
		const built = join(checkpoint, "..", `${sha256}.synthesizer-v${SYNTHESIZER_GRAPH_VERSION}.onnx`);
		expect(existsSync(built)).toBe(true);
		const before = statSync(built).mtimeMs;
		await convert(0.5);
		expect(statSync(built).mtimeMs).toBe(before);
		// Nothing half-written left behind.
		expect(readdirSync(join(checkpoint, "..")).filter((f) => f.startsWith("."))).toEqual([]);
	});

	it("hashes a cached checkpoint and its build once per process, not at each job the artifact cache touches it", async () => {
		const bytes = readFileSync(join(FIXTURES, "v2-f0-48k.pth"));
		const server = createServer((_request, response) => response.writeHead(200).end(bytes));
		await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
		try {
			const artifact = {
				name: "synthesizer",
				url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/model.pth`,
				sha256: createHash("sha256").update(bytes).digest("hex"),
				size_bytes: bytes.length,
			};
			const cache = new ArtifactCache(scratchDir("rvc-pth-cache"));
			/** What a job does: the cache finds (and touches) the checkpoint, the engine finds its build. */
			const job = async () => {
				const hold = cache.hold();
				try {
					const path = (await hold.ensureAll([artifact], AbortSignal.timeout(30_000))).get("synthesizer") as string;
					return await synthesizerOnnxPath(path);
				} finally {
					hold.release();
				}
			};
			const built = await job();
			const graph = readFileSync(built);
			const hashed = filesHashed.count;
			for (let i = 0; i < 3; i++) expect(await job()).toBe(built);
			expect(filesHashed.count - hashed).toBe(0);

			// Removed with its checkpoint (a deleted voice), the build is made again when the voice comes back, whatever
			// inode the new download gets.
			expect(await cache.discard([artifact.sha256])).toBe(true);
			expect(existsSync(built)).toBe(false);
			expect(await job()).toBe(built);
			expect(readFileSync(built).equals(graph)).toBe(true);

			// A checkpoint damaged in place is caught by the cache, downloaded again (a new file) and checked again here.
			const path = cache.pathFor(artifact);
			writeFileSync(path, Buffer.from(bytes).fill(0, 1000, 1100));
			const before = filesHashed.count;
			expect(await job()).toBe(built);
			expect(filesHashed.count - before).toBeGreaterThanOrEqual(2);
			expect(readFileSync(path).equals(bytes)).toBe(true);
		} finally {
			server.close();
		}
	});

	it("removes graphs an earlier builder version made from the same checkpoint, and nothing else", async () => {
		const dir = scratchDir("rvc-pth");
		const bytes = readFileSync(join(FIXTURES, "v2-f0-48k.pth"));
		const sha256 = createHash("sha256").update(bytes).digest("hex");
		const path = join(dir, `${sha256}.bin`);
		writeFileSync(path, bytes);
		const planted = {
			older: [1, SYNTHESIZER_GRAPH_VERSION - 1].map((v) => `${sha256}.synthesizer-v${v}.onnx`),
			kept: [
				`${sha256}.synthesizer-v${SYNTHESIZER_GRAPH_VERSION + 1}.onnx`,
				`${"0".repeat(64)}.synthesizer-v1.onnx`,
				`${sha256}.synthesizer-vx.onnx`,
			],
		};
		for (const name of [...planted.older, ...planted.kept]) writeFileSync(join(dir, name), "an older build");
		const built = await synthesizerOnnxPath(path);
		expect(built).toBe(join(dir, `${sha256}.synthesizer-v${SYNTHESIZER_GRAPH_VERSION}.onnx`));
		expect(readdirSync(dir).sort()).toEqual(
			[`${sha256}.bin`, basename(built), `${basename(built)}.sha256`, ...planted.kept].sort(),
		);
	});

	it("removes a cached checkpoint damaged on disk, failing the job for another attempt to download it again", async () => {
		const dir = scratchDir("rvc-pth");
		const bytes = readFileSync(join(FIXTURES, "v2-f0-48k.pth"));
		const path = join(dir, `${createHash("sha256").update(bytes).digest("hex")}.bin`);
		const damaged = Buffer.from(bytes);
		damaged[damaged.length >> 1] = (damaged[damaged.length >> 1] as number) ^ 0xff; // same size, one byte changed
		writeFileSync(path, damaged);
		const error = await synthesizerOnnxPath(path).catch((e: unknown) => e);
		expect(error).toBeInstanceOf(Error);
		expect((error as Error).message).toMatch(/\(damaged on disk\): removed, to be downloaded again/);
		expect(permanentFailure(error)).toBeNull();
		expect(existsSync(path)).toBe(false);
	});

	it("builds the synthesizer again where it was damaged after it was built, or has no checksum", async () => {
		const dir = scratchDir("rvc-pth");
		const path = join(dir, "checkpoint.bin");
		copyFileSync(join(FIXTURES, "v2-f0-48k.pth"), path);
		const built = await synthesizerOnnxPath(path);
		// Damaged after it was built (cut short, here): the next process to use it builds it again.
		const whole = readFileSync(built);
		truncateSync(built, 60_000);
		const later = new Date(Date.now() + 5_000);
		utimesSync(path, later, later); // a new file to this process's memo, as it is to a new process
		expect(await synthesizerOnnxPath(path)).toBe(built);
		expect(readFileSync(built).equals(whole)).toBe(true);
		// A build from before checksums were kept is made again too.
		rmSync(`${built}.sha256`);
		writeFileSync(built, "an unchecked build");
		utimesSync(path, new Date(Date.now() + 10_000), new Date(Date.now() + 10_000));
		await synthesizerOnnxPath(path);
		expect(readFileSync(built).equals(whole)).toBe(true);
		expect(readFileSync(`${built}.sha256`, "utf8")).toBe(createHash("sha256").update(whole).digest("hex"));
	});
});

const run = promisify(execFile);

async function tool(...args: string[]): Promise<{ code: number; json: Record<string, unknown> | undefined }> {
	try {
		const { stdout } = await run(process.execPath, [TOOL, ...args]);
		return { code: 0, json: JSON.parse(stdout) };
	} catch (error) {
		const e = error as { code: number; stdout: string };
		return { code: e.code, json: e.stdout.trim() ? JSON.parse(e.stdout) : undefined };
	}
}

describe("npm run rvc", () => {
	it("inspect prints a checkpoint's facts", async () => {
		const { code, json } = await tool("inspect", join(FIXTURES, "v1-nono-32k-fp32.pth"));
		expect(code).toBe(0);
		expect(json).toMatchObject({
			kind: "rvc_checkpoint",
			version: "v1",
			f0: 0,
			sample_rate: 32000,
			speakers: 1,
			feature_dim: 256,
			dtype: "float32",
			synthesizer_inputs: ["phone", "phone_lengths", "ds", "rnd"],
		});
	});

	it("inspect prints what Applio recorded of a voice's training", async () => {
		const { code, json } = await tool("inspect", join(FIXTURES, "v2-f0-40k-applio.pth"));
		expect(code).toBe(0);
		expect(json).toMatchObject({ kind: "rvc_checkpoint", version: "v2", sample_rate: 40000, feature_dim: 768 });
		expect(json?.training).toEqual({
			model_name: "Tiny",
			epoch: 200,
			step: 4000,
			creation_date: "2026-11-24T10:00:00.000000",
			dataset_length: 1234.5,
			overtrain_info: "None",
			embedder_model: "contentvec",
			vocoder: "HiFi-GAN",
		});
		// RVC's own files record none of it.
		expect((await tool("inspect", join(FIXTURES, "v2-f0-40k.pth"))).json).not.toHaveProperty("training");
	});

	it("tells a file it cannot read or write from a refused one: exit code 2, no JSON, no stack trace", async () => {
		const dir = scratchDir("rvc-tool");
		for (const args of [
			["inspect", join(dir, "missing.pth")],
			["inspect", dir],
			["export", join(FIXTURES, "v2-f0-40k.pth"), join(dir, "no-such-folder", "out.onnx")],
		]) {
			const result = await run(process.execPath, [TOOL, ...args]).then(
				() => ({ code: 0, stderr: "" }),
				(error: { code: number; stderr: string }) => error,
			);
			expect(result.code, args.join(" ")).toBe(2);
			expect(result.stderr.trim(), args.join(" ")).toMatch(/^\/\S+: cannot be used \((ENOENT|EISDIR)\)$/);
		}
	});

	it("inspect gives the reason a file is refused, with exit code 1", async () => {
		const { code, json } = await tool("inspect", join(FIXTURES, "refused-os-system.pth"));
		expect(code).toBe(1);
		expect(json?.refused).toMatchObject({ problem: "forbidden_pickle" });
		const notAModel = await tool("inspect", join(FIXTURES, "manifest.json"));
		expect(notAModel.code).toBe(1);
		expect(notAModel.json).toMatchObject({ kind: "unknown", refused: { problem: "invalid_model" } });
	});

	it("inspect reads a faiss index, and refuses one of another type", async () => {
		const index = await tool("inspect", join(FIXTURES, "index", "added_IVF20_Flat_nprobe_1_tiny_v2.index"));
		expect(index.code).toBe(0);
		expect(index.json).toMatchObject({ kind: "faiss_index", index_type: "ivf_flat", fourcc: "IwFl", nprobe: 1 });
		const hnsw = await tool("inspect", join(FIXTURES, "index", "hnsw.index"));
		expect(hnsw.code).toBe(1);
		expect(hnsw.json).toMatchObject({ kind: "faiss_index", refused: { problem: "invalid_index" } });
	});

	it("export writes the synthesizer ONNX with RVC's inputs; inspect measures its rate", async () => {
		const out = join(scratchDir("rvc-export"), "voice.onnx");
		const exported = await tool("export", join(FIXTURES, "v2-f0-32k.pth"), out);
		expect(exported.code).toBe(0);
		expect(exported.json).toMatchObject({ kind: "rvc_checkpoint", sample_rate: 32000, exported: { file: out } });
		const session = await ort.InferenceSession.create(out);
		expect([...session.inputNames]).toEqual(["phone", "phone_lengths", "pitch", "pitchf", "ds", "rnd"]);
		await session.release();
		const inspected = await tool("inspect", out);
		expect(inspected.json).toMatchObject({
			kind: "onnx",
			role: "synthesizer",
			f0: 1,
			feature_dim: 768,
			sample_rate: 32000,
		});
	});

	it("export refuses what is not a checkpoint; bad usage exits 2", async () => {
		const out = join(scratchDir("rvc-export"), "voice.onnx");
		const refused = await tool("export", join(FIXTURES, "refused-unknown-version.pth"), out);
		expect(refused.code).toBe(1);
		expect(refused.json?.refused).toMatchObject({ problem: "unknown_version" });
		expect(existsSync(out)).toBe(false);
		expect((await tool("frobnicate")).code).toBe(2);
	});
});
