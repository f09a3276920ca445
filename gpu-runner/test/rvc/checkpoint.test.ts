/**
 * RVC `.pth` checkpoints written by real PyTorch (`fixtures/generate.py`, committed with their reference
 * outputs): every kind loads, weight norm folds to PyTorch's values, the synthesizer built from a checkpoint
 * computes what PyTorch's forward pass of RVC's architecture computes, and every bad file is refused with its
 * problem named.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { crc32, deflateRawSync } from "node:zlib";
import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import { DEFLATED } from "../../../src/contracts/zip-directory.ts";
import { ddpn08Layout } from "../../src/engines/rvc/checkpoint-provenance.ts";
import { type PickleError, readPickle } from "../../src/engines/rvc/pickle-reader.ts";
import { type RvcCheckpoint, RvcCheckpointError, readRvcCheckpoint } from "../../src/engines/rvc/rvc-checkpoint.ts";
import { PUBLISHED_CONFIG_40K, parseSynthesizerConfig } from "../../src/engines/rvc/synthesizer-config.ts";
import { buildSynthesizerGraph } from "../../src/engines/rvc/synthesizer-graph.ts";
import { centralHeader, endRecord, localHeader } from "./support/zip-headers.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");

interface CheckpointFixture {
	file: string;
	version: string;
	f0: number;
	sr: string;
	sample_rate: number;
	speakers: number;
	speaker_id: number;
	phone_lengths: number;
	feature_dim: number;
	inter_channels: number;
	dtype: string;
	audio: string;
	audio_samples: number;
	folded: Record<string, { file: string; dims: number[] }>;
}

const manifest = JSON.parse(readFileSync(join(FIXTURES, "manifest.json"), "utf8")) as {
	frames: number;
	inputs: Record<string, { phone: string }>;
	pitch: number[];
	pitchf: number[];
	checkpoints: Record<string, CheckpointFixture>;
	refused: Record<string, string>;
	read_as_base: Record<string, string>;
};

const bytesOf = (file: string) => new Uint8Array(readFileSync(join(FIXTURES, file)));
const floatsOf = (file: string) => new Float32Array(bytesOf(file).buffer);
const maxAbsDifference = (a: Float32Array, b: Float32Array) =>
	a.reduce((max, v, i) => Math.max(max, Math.abs(v - (b[i] as number))), 0);

/**
 * onnxruntime against PyTorch, both float32, same weights and inputs: the largest difference measured over the
 * fixtures is 5.6e-6, Applio's (outputs up to ~1 in magnitude); the bound leaves room for other CPUs' kernels.
 */
const OUTPUT_TOLERANCE = 2e-5;
/** Folding in float64 and rounding once, against PyTorch's float32 `_weight_norm`: measured at most 1.2e-7. */
const FOLD_TOLERANCE = 1e-6;

async function runSynthesizer(bytes: Uint8Array, fixture: CheckpointFixture, f0: boolean): Promise<ort.Tensor> {
	const frames = manifest.frames;
	const session = await ort.InferenceSession.create(bytes);
	try {
		const feeds: Record<string, ort.Tensor> = {
			phone: new ort.Tensor("float32", floatsOf(manifest.inputs[String(fixture.feature_dim)]?.phone as string), [
				1,
				frames,
				fixture.feature_dim,
			]),
			phone_lengths: new ort.Tensor("int64", BigInt64Array.of(BigInt(fixture.phone_lengths)), [1]),
			ds: new ort.Tensor("int64", BigInt64Array.of(BigInt(fixture.speaker_id)), [1]),
			rnd: new ort.Tensor("float32", new Float32Array(fixture.inter_channels * frames), [
				1,
				fixture.inter_channels,
				frames,
			]),
		};
		if (f0) {
			feeds.pitch = new ort.Tensor("int64", BigInt64Array.from(manifest.pitch.map(BigInt)), [1, frames]);
			feeds.pitchf = new ort.Tensor("float32", Float32Array.from(manifest.pitchf), [1, frames]);
		}
		expect([...session.inputNames].sort()).toEqual(Object.keys(feeds).sort());
		return (await session.run(feeds)).audio as ort.Tensor;
	} finally {
		await session.release();
	}
}

/** A zip of one deflated entry `name` holding `content`, whose headers state `statedSize` bytes and their CRC. */
function oneEntryZip(entry: string, content: Uint8Array, statedSize: number): Uint8Array {
	const name = new TextEncoder().encode(entry);
	const data = deflateRawSync(content, { level: 9 });
	const fields = { method: DEFLATED, compressedSize: data.length, size: statedSize, nameLength: name.length };
	const local = localHeader(fields);
	const central = centralHeader({ ...fields, crc: crc32(content.subarray(0, statedSize)) });
	const end = endRecord({
		count: 1,
		size: central.length + name.length,
		offset: local.length + name.length + data.length,
	});
	return new Uint8Array(Buffer.concat([local, name, data, central, name, end]));
}

describe("RVC checkpoints written by PyTorch", () => {
	for (const [name, fixture] of Object.entries(manifest.checkpoints)) {
		describe(name, () => {
			let checkpoint: RvcCheckpoint;

			it("loads with its version, f0, rate, speakers and element type", () => {
				checkpoint = readRvcCheckpoint(bytesOf(fixture.file));
				expect({
					version: checkpoint.version,
					f0: checkpoint.f0 ? 1 : 0,
					sr: checkpoint.sr,
					sampleRate: checkpoint.config.sampleRate,
					speakers: checkpoint.speakers,
					featureDim: checkpoint.featureDim,
					dtype: checkpoint.dtype,
				}).toEqual({
					version: fixture.version,
					f0: fixture.f0,
					sr: fixture.sr,
					sampleRate: fixture.sample_rate,
					speakers: fixture.speakers,
					featureDim: fixture.feature_dim,
					dtype: fixture.dtype,
				});
				expect([...checkpoint.weights.keys()].some((k) => k.includes("enc_q") || k.endsWith("_g"))).toBe(false);
			});

			it("folds weight norm to PyTorch's weights", () => {
				for (const [weight, reference] of Object.entries(fixture.folded)) {
					const folded = checkpoint.weights.get(weight);
					expect(folded?.dims, weight).toEqual(reference.dims);
					expect(maxAbsDifference(folded?.data as Float32Array, floatsOf(reference.file)), weight).toBeLessThan(
						FOLD_TOLERANCE,
					);
				}
			});

			it("gives each tensor an array of its own, not one another tensor or the file's bytes hold", () => {
				const file = bytesOf(fixture.file);
				const arrays = [...readRvcCheckpoint(file).weights.values()].map((tensor) => tensor.data);
				expect(new Set(arrays).size).toBe(arrays.length);
				expect(new Set(arrays.map((data) => data.buffer)).size).toBe(arrays.length);
				expect(arrays.some((data) => data.buffer === file.buffer)).toBe(false);
			});

			it("reads the same tensors from bytes held at an odd offset (its storages then unaligned)", () => {
				// torch.save aligns each storage in the file, and the reader takes aligned ones as they lie; bytes that
				// start at an odd address (a file held inside a larger buffer) are copied out first.
				const file = bytesOf(fixture.file);
				const shifted = new Uint8Array(file.length + 1).subarray(1);
				shifted.set(file);
				const moved = readRvcCheckpoint(shifted);
				expect([...moved.weights.keys()]).toEqual([...checkpoint.weights.keys()]);
				for (const [weight, tensor] of checkpoint.weights) {
					expect(moved.weights.get(weight), weight).toEqual(tensor);
				}
			});

			it(`builds a synthesizer whose output matches PyTorch's forward pass within ${OUTPUT_TOLERANCE}`, async () => {
				const { bytes } = buildSynthesizerGraph(checkpoint, { sourceNoise: false });
				const audio = await runSynthesizer(bytes, fixture, checkpoint.f0);
				expect(audio.dims).toEqual([1, 1, fixture.audio_samples]);
				const reference = floatsOf(fixture.audio);
				// The reference is not silence or a constant, so a match means something.
				expect(Math.max(...reference.map(Math.abs))).toBeGreaterThan(0.1);
				expect(maxAbsDifference(audio.data as Float32Array, reference)).toBeLessThan(OUTPUT_TOLERANCE);
			});

			if (fixture.f0 === 1) {
				it("keeps RVC's source noise by default: same length, finite, not the noiseless output", async () => {
					const { bytes } = buildSynthesizerGraph(checkpoint);
					const audio = await runSynthesizer(bytes, fixture, true);
					expect(audio.dims).toEqual([1, 1, fixture.audio_samples]);
					const difference = maxAbsDifference(audio.data as Float32Array, floatsOf(fixture.audio));
					expect(difference).toBeGreaterThan(0);
					expect(Number.isFinite(difference)).toBe(true);
				});
			}
		});
	}
});

describe("forks' files that record ContentVec and HiFi-GAN in their own words, or RVC's config in theirs", () => {
	// Applio's of late 2024 (embedder_model "None"), Vietnamese-RVC's (vocoder "Default", its NSF HiFi-GAN), and
	// ddPn08's rvc-webui's (a 19-item config with emb_channels, its features' layer recorded apart from `version`).
	for (const [name, base] of Object.entries(manifest.read_as_base)) {
		it(`${name} reads as ${base}, the file it was made from`, () => {
			const expected = readRvcCheckpoint(bytesOf(`${base}.pth`));
			const read = readRvcCheckpoint(bytesOf(`${name}.pth`));
			const { version, f0, featureDim, config, speakers } = expected;
			expect(read).toMatchObject({ version, f0, featureDim, config, speakers });
			expect(read.weights.size).toBe(expected.weights.size);
			for (const [tensor, { dims, data }] of expected.weights) {
				expect(read.weights.get(tensor)?.dims, tensor).toEqual(dims);
				expect(read.weights.get(tensor)?.data, tensor).toEqual(data);
			}
		});
	}
});

describe("refused checkpoints", () => {
	const messages: Record<string, RegExp> = {
		"refused-os-system": /pickle imports posix\.system, which is not allowed/,
		"refused-no-weight": /no "weight" dict \(keys: config, info, sr, f0, version\)/,
		"refused-list": /the pickle holds a list, not a dict/,
		"refused-plain-zip": /expected one <name>\/data\.pkl, found 0/,
		"refused-truncated": /archive is truncated/,
		"refused-unknown-version": /unknown RVC version "v3"/,
		"refused-config-mismatch": /config hidden_channels is 12 but enc_p\.emb_phone\.weight is \[8, 768\]/,
		"refused-missing-tensor": /lacks tensor dec\.conv_post\.weight/,
		"refused-misshapen-tensor": /tensor dec\.cond\.bias is \[15\], the config implies \[16\]/,
		"refused-embedder-chinese-hubert":
			/trained on "chinese-hubert-base" features \(its embedder_model\); this service extracts ContentVec features/,
		"refused-vocoder-refinegan": /decoder is "RefineGAN" \(its vocoder\); this service runs RVC's HiFi-GAN decoder/,
		"refused-undeclared-mrf-decoder": /decoder is MRF HiFi-GAN \(tensor dec\.(upsamples|mrfs)\./,
		"refused-ddpn08-japanese-hubert":
			/trained on "hubert-base-japanese" features \(its embedder_name\); this service extracts ContentVec features/,
		"refused-ddpn08-768-layer-9":
			/768-wide features of embedder layer 9 \(its embedder_output_layer\); this service extracts ContentVec's layer 12/,
	};
	for (const [name, problem] of Object.entries(manifest.refused)) {
		it(`${name}: ${problem}`, () => {
			const error = (() => {
				try {
					readRvcCheckpoint(bytesOf(`${name}.pth`));
				} catch (e) {
					return e;
				}
			})();
			expect(error).toBeInstanceOf(RvcCheckpointError);
			expect((error as RvcCheckpointError).problem).toBe(problem);
			expect((error as RvcCheckpointError).permanent).toBe(true);
			expect((error as RvcCheckpointError).code).toBe("invalid_model");
			expect((error as Error).message).toMatch(messages[name] as RegExp);
		});
	}

	it("refuses an entry that inflates past its stated size without inflating the rest (a deflate bomb)", () => {
		// A 64 KiB archive whose data.pkl states 1000 bytes and inflates to 64 MiB.
		const bytes = oneEntryZip("bomb/data.pkl", new Uint8Array(64 * 1024 * 1024), 1000);
		expect(() => readRvcCheckpoint(bytes)).toThrow(/zip entry bomb\/data\.pkl inflates past its stated 1000 bytes/);
	});

	it("refuses an archive whose tensor data was altered (CRC-32)", () => {
		const bytes = bytesOf("v2-f0-40k.pth");
		const text = new TextDecoder("latin1").decode(bytes);
		// The first stored tensor's data follows its local header name ".../data/0" and alignment padding.
		const at = text.indexOf("v2-f0-40k/data/0") + 200;
		bytes[at] = (bytes[at] as number) ^ 0xff;
		expect(() => readRvcCheckpoint(bytes)).toThrow(/fails its CRC-32 check/);
		// A fault of the file, refused as one (a permanent RvcCheckpointError), not an internal error to retry.
		const { error } = refusal(bytes);
		expect(error).toBeInstanceOf(RvcCheckpointError);
		expect((error as RvcCheckpointError).problem).toBe("not_a_checkpoint");
		expect((error as Error).message).toMatch(
			/^tensor storage v2-f0-40k\/data\/\d+ unreadable: zip entry .* fails its CRC-32 check$/,
		);
	});
});

describe("synthesizer config", () => {
	const withResblock = (resblock: string, dilations: number[][]) => {
		const list = [...PUBLISHED_CONFIG_40K];
		list[9] = resblock;
		list[11] = dilations;
		return list;
	};

	it("reads the dilations each residual block uses and ignores further ones, as RVC's modules do", () => {
		expect(
			parseSynthesizerConfig(
				withResblock("2", [
					[1, 3, 5],
					[1, 3, 5],
					[1, 3, 5],
				]),
			).resblockDilationSizes,
		).toEqual([
			[1, 3],
			[1, 3],
			[1, 3],
		]);
		expect(
			parseSynthesizerConfig(
				withResblock("1", [
					[1, 3, 5, 7],
					[1, 3, 5],
					[1, 3, 5],
				]),
			).resblockDilationSizes[0],
		).toEqual([1, 3, 5]);
	});

	it("refuses fewer dilations than a residual block uses", () => {
		expect(() =>
			parseSynthesizerConfig(
				withResblock("1", [
					[1, 3],
					[1, 3],
					[1, 3],
				]),
			),
		).toThrow(/resblock_dilation_sizes\[0\] is \[1,3\], expected at least 3 positive integers for resblock "1"/);
	});
});

describe("pickle reader", () => {
	const allow = { globals: new Map<string, unknown>() };
	const pickle = (text: string) => Uint8Array.from(text, (c) => c.charCodeAt(0));

	it("reads plain data", () => {
		// {"a": [1, 2.5, True, None], "b": ("x",)}
		const value = readPickle(
			pickle(
				"\x80\x02}q\x00(X\x01\x00\x00\x00a]q\x01(K\x01G@\x04\x00\x00\x00\x00\x00\x00\x88NeX\x01\x00\x00\x00bX\x01\x00\x00\x00x\x85u.",
			),
			allow,
		) as Map<string, unknown>;
		expect(value.get("a")).toEqual([1, 2.5, true, null]);
		expect((value.get("b") as { items: unknown[] }).items).toEqual(["x"]);
	});

	it("refuses a global outside the allow-list by name, before calling anything", () => {
		expect(() => readPickle(pickle("\x80\x02cbuiltins\neval\nX\x04\x00\x00\x001+1\x85R."), allow)).toThrow(
			/pickle imports builtins\.eval, which is not allowed/,
		);
		expect(() => readPickle(pickle("\x80\x04\x8c\x02os\x8c\x06system\x93."), allow)).toThrow(/imports os\.system/);
	});

	it("appends a million items at once (APPENDS)", () => {
		// [None] * 1_000_000 as one MARK ... APPENDS: 1 MB.
		const n = 1_000_000;
		const bytes = new Uint8Array(4 + n + 2);
		bytes.set([0x80, 0x02, 0x5d, 0x28]);
		bytes.fill(0x4e, 4, 4 + n);
		bytes.set([0x65, 0x2e], 4 + n);
		const list = readPickle(bytes, allow) as unknown[];
		expect(list.length).toBe(n);
		expect(list.every((item) => item === null)).toBe(true);
	});

	it("refuses opcodes outside its set by name", () => {
		const error = (() => {
			try {
				readPickle(pickle("\x80\x02(X\x01\x00\x00\x00ai__main__\nEvil\n."), allow);
			} catch (e) {
				return e as PickleError;
			}
		})();
		expect(error?.kind).toBe("unsupported_opcode");
		expect(error?.message).toMatch(/opcode INST \(0x69\)/);
	});
});

/** What `readRvcCheckpoint` throws for `bytes`, and how long it took. */
function refusal(bytes: Uint8Array): { error: unknown; ms: number } {
	const started = performance.now();
	try {
		readRvcCheckpoint(bytes);
	} catch (error) {
		return { error, ms: performance.now() - started };
	}
	return { error: undefined, ms: performance.now() - started };
}

/** A tuple of two copies of a tuple of two copies ... `depth` deep, one object per level, as a pickle's memo shares it. */
function sharedNesting(depth: number): unknown[] {
	let value: unknown[] = [];
	for (let i = 0; i < depth; i++) value = [value, value];
	return value;
}

// Files of a few hundred bytes to a few hundred KB (test/rvc/fixtures/make-hostile-checkpoints.py) that declare far
// more than they hold: each is refused as a checkpoint fault, in well under a second, with a short message.
describe("hostile checkpoints", () => {
	const hostile = (file: string) => bytesOf(`hostile/${file}`);
	const expectRefused = (bytes: Uint8Array, problem: string, message: RegExp) => {
		const { error, ms } = refusal(bytes);
		expect(error).toBeInstanceOf(RvcCheckpointError);
		expect((error as RvcCheckpointError).problem).toBe(problem);
		expect((error as Error).message).toMatch(message);
		expect((error as Error).message.length).toBeLessThan(500);
		expect(ms).toBeLessThan(1000);
	};

	it("quotes a value shared at every level of 40 (2^40 items written out) in a few characters", () => {
		expectRefused(
			hostile("nested-version.pth"),
			"unknown_version",
			/^unknown RVC version \(\(\(\(\(\(\(\(\(…\), \(…\)\), .*…; v1 and v2 are read$/,
		);
	});

	it("quotes an int beyond 2^53 (a bigint)", () => {
		expectRefused(
			hostile("bigint-version.pth"),
			"unknown_version",
			/unknown RVC version 1000000000000000000000000000000;/,
		);
	});

	it("refuses a config of 30 000 000 encoder layers before listing their tensors", () => {
		expectRefused(
			hostile("many-layers.pth"),
			"invalid_config",
			/config is inconsistent: n_layers is 30000000, at most 64/,
		);
	});

	it("refuses a config whose dilation lists are one long list shared 100 000 times, before reading them", () => {
		const long = Array.from({ length: 100_000 }, () => 1);
		const list = [...PUBLISHED_CONFIG_40K];
		list[11] = Array.from({ length: 100_000 }, () => long);
		const started = performance.now();
		expect(() => parseSynthesizerConfig(list)).toThrow(
			/config resblock_dilation_sizes holds a list of 100000 items, at most 16/,
		);
		expect(performance.now() - started).toBeLessThan(1000);
	});

	it("refuses 100 000 000 speaker rows expanded from one stored value (800 million parameters as float32)", () => {
		expectRefused(
			hostile("expanded-speakers.pth"),
			"too_large",
			/config and emb_g\.weight make 800031904 parameters; at most 100000000 are read/,
		);
	});

	it("refuses a tensor that views a few values of a 128 MB storage (124 KB deflated) before inflating it", () => {
		expectRefused(
			hostile("deflated-storage.pth"),
			"too_large",
			/tensor storage deflated-storage\/data\/\d+ holds 64000000 values; with the storages before it that is more than the 65332 the checkpoint's tensors may hold/,
		);
	});

	it("refuses a data.pkl that states 32 MiB (32 KB deflated) before inflating it", () => {
		const size = 32 * 1024 * 1024;
		expectRefused(
			oneEntryZip("big/data.pkl", new Uint8Array(size), size),
			"not_a_checkpoint",
			/zip entry big\/data\.pkl states 33554432 bytes, more than the 16777216 it may hold/,
		);
	});

	it("refuses a zip that lists 70 000 entries before reading its directory", () => {
		// 70 000 empty stored entries named 0000000 ... 0069999 (3.8 MB; 200 MB holds 3.8 million).
		const count = 70_000;
		const local = Buffer.concat([localHeader({ nameLength: 1 }), Buffer.from("a", "latin1")]);
		const central = Buffer.concat(
			Array.from({ length: count }, (_, i) => [
				centralHeader({ nameLength: 7 }),
				Buffer.from(String(i).padStart(7, "0"), "latin1"),
			]).flat(),
		);
		const zip64 = Buffer.alloc(56 + 20);
		zip64.writeUInt32LE(0x06064b50, 0);
		zip64.writeBigUInt64LE(44n, 4);
		zip64.writeBigUInt64LE(BigInt(count), 24);
		zip64.writeBigUInt64LE(BigInt(count), 32);
		zip64.writeBigUInt64LE(BigInt(central.length), 40);
		zip64.writeBigUInt64LE(BigInt(local.length), 48);
		zip64.writeUInt32LE(0x07064b50, 56);
		zip64.writeBigUInt64LE(BigInt(local.length + central.length), 64);
		zip64.writeUInt32LE(1, 72);
		// The 16- and 32-bit fields saturated: the zip64 record above holds the real ones.
		const end = endRecord({ count: 0xffff, size: 0xffffffff, offset: 0xffffffff });
		expectRefused(
			new Uint8Array(Buffer.concat([local, central, zip64, end])),
			"not_a_checkpoint",
			/not a readable torch\.save archive: zip lists 70000 entries, at most 65536 are read/,
		);
	});

	it("quotes a config value or an embedder layer nested 40 deep without spelling it out", () => {
		const list = [...PUBLISHED_CONFIG_40K];
		list[9] = sharedNesting(40);
		expect(() => parseSynthesizerConfig(list)).toThrow(
			/^config resblock is \[\[\[\[\[\[\[\[\[…\],\[…\]\],.*…, expected "1" or "2"$/,
		);
		list[9] = "1";
		list[10] = sharedNesting(40);
		expect(() => parseSynthesizerConfig(list)).toThrow(
			/^config resblock_kernel_sizes is \[\[.{150,250}, expected a list/,
		);
		const root = new Map<unknown, unknown>([
			["params", {}],
			["embedder_output_layer", sharedNesting(40)],
		]);
		const config = [...PUBLISHED_CONFIG_40K.slice(0, 17), 768, 40000];
		expect(() => ddpn08Layout(root, config)).toThrow(
			/embedder layer \[\[\[\[\[\[\[\[\[…\],.*…\s\(its embedder_output_layer\)/,
		);
	});
});
