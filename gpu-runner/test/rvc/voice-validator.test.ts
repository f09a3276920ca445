/**
 * `validate_voice` with the real rvc engine and the committed RVC fixtures, files served over HTTP as signed GETs
 * would be: a fitting voice becomes ready (checksums, sample rate, f0, feature width, the sample's pitch range, the
 * built synthesizer cached beside the checkpoint); each kind of unusable voice fails with a message naming why.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelArtifact, VoiceValidationLease } from "../../../src/contracts/runner.ts";
import { ArtifactCache } from "../../src/artifacts/artifact-cache.ts";
import type { Engine, EngineJob } from "../../src/engines/engine.ts";
import { createRvcEngine } from "../../src/engines/rvc/index.ts";
import { SYNTHESIZER_GRAPH_VERSION } from "../../src/engines/rvc/synthesizer-graph.ts";
import { ZipArchive } from "../../src/engines/rvc/zip-archive.ts";
import { createVoiceValidator, type VoiceValidator } from "../../src/validation/voice-validator.ts";
import { FakeRunnerApi } from "../helpers/fake-runner-api.ts";
import { scratchDir } from "../helpers/scratch.ts";
import { makeWav } from "../helpers/wav-files.ts";
import { buildTinyContentVec, buildTinyRmvpe, buildTinySynthesizer } from "./support/tiny-models.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
const fixture = (name: string) => new Uint8Array(readFileSync(join(FIXTURES, name)));
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

let engine: Engine;
let api: FakeRunnerApi;
let cache: ArtifactCache;
let validate: VoiceValidator;
let bases: ModelArtifact[];
const selfTestJobs: EngineJob[] = [];

function serve(name: string, bytes: Uint8Array): string {
	const file = `${name}-${sha256(bytes).slice(0, 12)}`;
	api.artifacts.set(file, bytes);
	return `${api.baseUrl}/storage/artifact/${file}`;
}

/** A sung-like sample: a 196 Hz tone gliding up to 262 Hz over two seconds. */
function sample(): Uint8Array {
	const rate = 16_000;
	let phase = 0;
	const samples = Float32Array.from({ length: 2 * rate }, (_, i) => {
		phase += (2 * Math.PI * (196 + (66 * i) / (2 * rate))) / rate;
		return 0.4 * Math.sin(phase);
	});
	return makeWav([samples], rate, { kind: "pcm", bits: 16 });
}

function lease(files: Record<string, Uint8Array>, settings: Record<string, unknown> = {}): VoiceValidationLease {
	return {
		lease_id: crypto.randomUUID(),
		voice_id: crypto.randomUUID(),
		attempt: 1,
		lease_expires_at: new Date(Date.now() + 45_000).toISOString(),
		heartbeat_interval_seconds: 15,
		voice_name: "Mine",
		voice_settings: settings,
		files: Object.entries(files).map(([role, bytes]) => ({
			role: role as "model" | "index" | "image" | "sample",
			url: serve(role, bytes),
			size_bytes: bytes.length,
			kind: "checked by the Worker",
		})),
		base_models: bases,
	};
}

beforeAll(async () => {
	engine = createRvcEngine({ executionProviders: ["cpu"] });
	await engine.init();
	api = await new FakeRunnerApi().start();
	cache = new ArtifactCache(scratchDir("voice-validation"));
	// The engine as the validator sees it, recording the jobs it is given.
	const recording: Engine = {
		...engine,
		convert: (input, job, abort) => {
			selfTestJobs.push(job);
			return engine.convert(input, job, abort);
		},
	};
	validate = createVoiceValidator({ artifacts: cache, engine: recording });
	bases = [
		api.serveArtifact("contentvec", buildTinyContentVec()),
		api.serveArtifact("rmvpe", buildTinyRmvpe({ pitchBin: 168 })),
	];
});
afterAll(async () => {
	await api.close();
	await engine.dispose();
});

const signal = () => AbortSignal.timeout(60_000);

describe("voice validation", () => {
	it("makes a fitting .pth + .index + sample ready, with checksums, model facts and the sample's pitch range", async () => {
		const model = fixture("v2-f0-40k.pth");
		const index = fixture("index/voice-v2-768.index");
		const report = await validate(lease({ model, index, sample: sample() }, { index_rate: 0.5 }), signal());
		expect(report).toMatchObject({
			outcome: "ready",
			model: { sample_rate: 40_000, f0: true, feature_dim: 768, version: "v2" },
		});
		if (report.outcome !== "ready") return;
		expect(report.files).toEqual(
			expect.arrayContaining([
				{ role: "model", sha256: sha256(model), size_bytes: model.length },
				{ role: "index", sha256: sha256(index), size_bytes: index.length },
			]),
		);
		// The glide spans 196..262 Hz: the 10th..90th percentiles lie inside it.
		expect(report.pitch_range_hz?.low).toBeGreaterThan(190);
		expect(report.pitch_range_hz?.high).toBeLessThan(270);
		expect(report.pitch_range_hz?.high).toBeGreaterThan(report.pitch_range_hz?.low ?? Number.POSITIVE_INFINITY);
		// The self-test is a transient job: the engine keeps none of this voice's models or index after it.
		expect(selfTestJobs.length).toBeGreaterThan(0);
		expect(selfTestJobs.every((job) => job.transient === true)).toBe(true);
		// The checkpoint sits in the cache under its checksum, its synthesizer built beside it for later conversions.
		expect(existsSync(join(cache.dir, `${sha256(model)}.bin`))).toBe(true);
		expect(existsSync(join(cache.dir, `${sha256(model)}.synthesizer-v${SYNTHESIZER_GRAPH_VERSION}.onnx`))).toBe(true);
	});

	it("fails RVC's trained_ index, which holds no features, naming the added_ one to use", async () => {
		// As published: the archive holds both, the trained_ one written by faiss before the features were added.
		const archive = ZipArchive.open(fixture("archive/published-voice.zip"));
		const trained = archive.read("Aurora/trained_IVF4_Flat_nprobe_1_Aurora_v2.index");
		const report = await validate(lease({ model: fixture("v2-f0-40k.pth"), index: trained }), signal());
		expect(report).toMatchObject({ outcome: "failed", problem: "invalid_index" });
		expect(report.outcome === "failed" && report.message).toMatch(
			/^The index file cannot be used: .*holds no vectors \(RVC writes a trained_\*\.index, .*: use the added_ one\)$/,
		);
	});

	it("fails an index whose width is not the model's feature width", async () => {
		const report = await validate(
			lease({ model: fixture("v1-f0-40k.pth"), index: fixture("index/voice-v2-768.index") }),
			signal(),
		);
		expect(report).toMatchObject({ outcome: "failed", problem: "index_width_mismatch" });
		expect(report.outcome === "failed" && report.message).toMatch(
			/^The index holds 768-wide features but the model reads 256-wide ones/,
		);
	});

	it("refuses an index of another width from its header, without reading its body", async () => {
		// Cut just past the header: reading the body would refuse it as truncated, not as of the wrong width.
		const cut = fixture("index/voice-v2-768.index").subarray(0, 64);
		const wide = await validate(lease({ model: fixture("v1-f0-40k.pth"), index: cut }), signal());
		expect(wide).toMatchObject({ outcome: "failed", problem: "index_width_mismatch" });
		expect(wide.outcome === "failed" && wide.message).toMatch(
			/^The index holds 768-wide features but the model reads 256-wide ones/,
		);
		// An index of the model's width is still read through, and its damaged body refused as before.
		const fitting = fixture("index/voice-v1-256.index");
		const damaged = await validate(
			lease({ model: fixture("v1-f0-40k.pth"), index: fitting.subarray(0, Math.floor(fitting.length / 2)) }),
			signal(),
		);
		expect(damaged).toMatchObject({ outcome: "failed", problem: "invalid_index" });
		expect(damaged.outcome === "failed" && damaged.message).toMatch(/^The index file cannot be used: .*truncated/);
	});

	it("fails a model the deployment's ContentVec cannot feed, saying which generation of model it takes", async () => {
		// A v1 model reads 256-wide features; the base ContentVec gives 768-wide ones.
		const report = await validate(lease({ model: fixture("v1-nono-32k-fp32.pth") }), signal());
		expect(report).toEqual({
			outcome: "failed",
			problem: "unsupported_feature_width",
			message:
				"The model reads 256-wide features (RVC v1), but this service extracts 768-wide ones (RVC v2) for every voice: use a model trained as RVC v2",
		});
	});

	it("runs a v1 model on the deployment's contentvec_v1, which a v2 model's validation does not download", async () => {
		const v1ContentVec = buildTinyContentVec({ featureDim: 256 });
		const withV1 = [...bases, api.serveArtifact("contentvec_v1", v1ContentVec)];
		const downloaded = () => existsSync(join(cache.dir, `${sha256(v1ContentVec)}.bin`));

		const v2 = await validate({ ...lease({ model: fixture("v2-f0-40k.pth") }), base_models: withV1 }, signal());
		expect(v2).toMatchObject({ outcome: "ready", model: { feature_dim: 768, version: "v2" } });
		expect(downloaded()).toBe(false);

		const v1 = await validate({ ...lease({ model: fixture("v1-f0-40k.pth") }), base_models: withV1 }, signal());
		expect(v1).toMatchObject({ outcome: "ready", model: { feature_dim: 256, version: "v1" } });
		// The self-test converted through the 256-wide ContentVec, given to the engine as its `contentvec`.
		expect(selfTestJobs.at(-1)?.artifactPaths.get("contentvec")).toBe(join(cache.dir, `${sha256(v1ContentVec)}.bin`));
	});

	it("makes an Applio voice ready, and fails one trained on another embedder or with another decoder", async () => {
		// Applio's files: weight norm under PyTorch 2's parametrization names, its training facts beside RVC's keys.
		const applio = await validate(
			lease({ model: fixture("v2-f0-40k-applio.pth"), index: fixture("index/voice-v2-768.index"), sample: sample() }),
			signal(),
		);
		expect(applio).toMatchObject({ outcome: "ready", model: { sample_rate: 40_000, f0: true, version: "v2" } });

		const hubert = await validate(lease({ model: fixture("refused-embedder-chinese-hubert.pth") }), signal());
		expect(hubert).toMatchObject({ outcome: "failed", problem: "unsupported_embedder" });
		expect(hubert.outcome === "failed" && hubert.message).toMatch(
			/^The model file cannot be used: this voice was trained on "chinese-hubert-base" features/,
		);
		const refinegan = await validate(lease({ model: fixture("refused-vocoder-refinegan.pth") }), signal());
		expect(refinegan).toMatchObject({ outcome: "failed", problem: "unsupported_vocoder" });
		expect(refinegan.outcome === "failed" && refinegan.message).toMatch(/decoder is "RefineGAN"/);
	});

	it("fails w-okada's voice changer export as that, asking for the .pth it was exported from", async () => {
		// Its inputs (export2onnx.py): feats, p_len, pitch, pitchf, sid; the noise is drawn inside, so no rnd.
		const model = buildTinySynthesizer({
			sampleRate: 40_000,
			rename: { phone: "feats", phone_lengths: "p_len", ds: "sid", rnd: "noise_drawn_inside" },
		});
		const okada = await validate(lease({ model }), signal());
		expect(okada).toMatchObject({ outcome: "failed", problem: "invalid_model" });
		expect(okada.outcome === "failed" && okada.message).toMatch(
			/^The model file cannot be used: this is w-okada's voice changer export, .*: upload the RVC \.pth it was exported from$/,
		);
	});

	it("makes RVC's ONNX export ready, and fails graphs with control flow or others' operators before running them", async () => {
		// export-onnx.py: the tiny v2 40 kHz synthesizer exported by PyTorch as RVC's exporter does.
		const exported = await validate(lease({ model: fixture("onnx/rvc-export-v2-f0-40k.onnx") }), signal());
		expect(exported).toMatchObject({ outcome: "ready", model: { sample_rate: 40_000, f0: true, feature_dim: 768 } });

		// make-hostile-onnx.py: each runs in onnxruntime on the probe's 4 frames in milliseconds; the Loop's trip count
		// is 1000 x frames^3, so a conversion's window would hold the runner's model thread for days.
		const before = selfTestJobs.length;
		for (const [name, op] of [
			["loop-frames.onnx", 'control-flow operator "Loop"'],
			["if-input.onnx", 'control-flow operator "If"'],
			["contrib-op.onnx", 'operator "FastGelu" (node "gelu") of domain "com.microsoft"'],
		]) {
			const report = await validate(lease({ model: fixture(`hostile/${name}`) }), signal());
			expect(report, name).toMatchObject({ outcome: "failed", problem: "invalid_model" });
			expect(report.outcome === "failed" && report.message, name).toContain(
				`The model file cannot be used: the ONNX graph holds the ${op}`,
			);
		}
		// None of them reached the engine's self-test.
		expect(selfTestJobs.length).toBe(before);
	});

	it("fails a synthesizer whose cost grows faster with the input than RVC's, before any self-test", async () => {
		const before = selfTestJobs.length;
		// Standard operators only, nothing on the probe's 4 frames: a product of (10 x frames)^2 matrices, and an Expand
		// to [frames, frames, 640] floats, whose cost at a conversion's window would be hours or hundreds of GB.
		for (const name of ["quadratic-matmul.onnx", "quadratic-expand.onnx"]) {
			const report = await validate(lease({ model: fixture(`onnx/${name}`) }), signal());
			expect(report, name).toMatchObject({ outcome: "failed", problem: "too_large" });
			expect(report.outcome === "failed" && report.message, name).toMatch(
				/^The model file cannot be used: the synthesizer's (run time|memory) grows faster with the input than an RVC synthesizer's: carried out to the engine's longest (CPU|CUDA) window/,
			);
		}
		expect(selfTestJobs.length).toBe(before);
	});

	it("fails a truncated checkpoint, a pickle that would call something, and bytes that are no model", async () => {
		const truncated = await validate(lease({ model: fixture("refused-truncated.pth") }), signal());
		expect(truncated).toMatchObject({ outcome: "failed", problem: "truncated_archive" });
		expect(truncated.outcome === "failed" && truncated.message).toMatch(/^The model file cannot be used: .*truncated/i);

		const hostile = await validate(lease({ model: fixture("refused-os-system.pth") }), signal());
		expect(hostile.outcome).toBe("failed");

		const text = await validate(lease({ model: new TextEncoder().encode("not a model") }), signal());
		expect(text).toMatchObject({ outcome: "failed" });
	});

	it("names no runner file path when the index or the model cannot be read", async () => {
		// Of the model's width (one of another width is refused from its header before it is read).
		const whole = fixture("index/voice-v2-768.index");
		const index = await validate(
			lease({ model: fixture("v2-f0-40k.pth"), index: whole.subarray(0, Math.floor(whole.length / 2)) }),
			signal(),
		);
		expect(index).toMatchObject({ outcome: "failed" });
		const indexMessage = index.outcome === "failed" ? index.message : "";
		expect(indexMessage).toMatch(/^The index file cannot be used: feature index: truncated/);
		expect(indexMessage).not.toMatch(/\/|\.bin/);

		const cut = fixture("v2-f0-40k.pth");
		const model = await validate(lease({ model: cut.subarray(0, Math.floor(cut.length * 0.6)) }), signal());
		expect(model).toMatchObject({ outcome: "failed" });
		expect(model.outcome === "failed" && model.message).not.toMatch(/\/tmp|\.bin/);
	});

	it("retries, rather than fails, a voice whose sample could not be downloaded", async () => {
		const broken = lease({ model: fixture("v2-f0-40k.pth"), sample: sample() });
		const file = broken.files.find((f) => f.role === "sample");
		if (file) file.url = `${api.baseUrl}/storage/artifact/gone-for-now`;
		// A storage answer (404, 5xx) or a broken connection is no fault of the voice's files: thrown, so the lease
		// loop reports it as transient and the validation is tried again.
		await expect(validate(broken, signal())).rejects.toThrow(/source download answered HTTP 404/);
	});

	it("validates a pitch model with yin where the deployment has no RMVPE model, as its conversions run", async () => {
		const withoutRmvpe = bases.filter((base) => base.name !== "rmvpe");
		selfTestJobs.length = 0;
		const report = await validate(
			{ ...lease({ model: fixture("v2-f0-40k.pth") }), base_models: withoutRmvpe },
			signal(),
		);
		expect(report).toMatchObject({ outcome: "ready", model: { f0: true } });
		expect(selfTestJobs.map((job) => job.voice.params.f0_method)).toEqual(["yin"]);
		// With RMVPE in the deployment, the self-test tracks pitch with it, as conversions do.
		selfTestJobs.length = 0;
		expect(await validate(lease({ model: fixture("v2-f0-40k.pth") }), signal())).toMatchObject({ outcome: "ready" });
		expect(selfTestJobs.map((job) => job.voice.params.f0_method)).toEqual([undefined]);
		// A default that names rmvpe where there is none fails, saying what to use instead.
		const named = await validate(
			{ ...lease({ model: fixture("v2-f0-40k.pth") }, { f0_method: "rmvpe" }), base_models: withoutRmvpe },
			signal(),
		);
		expect(named).toMatchObject({ outcome: "failed", problem: "settings" });
		if (named.outcome === "failed") expect(named.message).toContain('use f0_method "yin"');
	});

	it("fails settings the model cannot honour, and a sample that does not decode", async () => {
		const noIndex = await validate(lease({ model: fixture("v2-f0-40k.pth") }, { index_rate: 0.5 }), signal());
		expect(noIndex).toMatchObject({
			outcome: "failed",
			message: "voice_settings.index_rate needs a feature index, and this voice has none",
		});
		// A model without pitch input tells no unvoiced frames apart, so there is nothing for protect to keep.
		const noPitch = await validate(
			lease({ model: fixture("v2-nono-40k.pth"), index: fixture("index/voice-v2-768.index") }, { protect: 0.2 }),
			signal(),
		);
		expect(noPitch).toEqual({
			outcome: "failed",
			problem: "settings",
			message: "voice_settings.protect does not apply: this model has no pitch input (f0 = 0)",
		});
		const formants = await validate(lease({ model: fixture("v2-f0-40k.pth") }, { formant_shift: 3 }), signal());
		expect(formants).toMatchObject({ outcome: "failed", problem: "settings" });
		const badSample = await validate(
			lease({ model: fixture("v2-f0-40k.pth"), sample: new TextEncoder().encode("RIFF....WAVEnot really") }),
			signal(),
		);
		expect(badSample).toMatchObject({ outcome: "failed", problem: "invalid_sample" });
	});
});
