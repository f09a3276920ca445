import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { VoiceDescriptor } from "../../src/contracts/runner.ts";
import { decodeWav } from "../src/audio/wav-decoder.ts";
import { DspEngine } from "../src/engines/dsp/dsp-engine.ts";
import type { AudioBlock, Engine, EngineJob, PcmFormat } from "../src/engines/engine.ts";
import { convertSource } from "../src/pipeline/convert-source.ts";
import { type FakeJob, FakeRunnerApi } from "./helpers/fake-runner-api.ts";
import { readWavHeader } from "./helpers/runner-harness.ts";
import { cents, harmonicTone, medianPitch, sine, trackPitch } from "./helpers/signals.ts";
import { bytesOf, collect } from "./helpers/streams.ts";
import { missingToolsMessage, run } from "./helpers/tools.ts";
import { makeWav } from "./helpers/wav-files.ts";

const voice: VoiceDescriptor = {
	id: "22222222-2222-4222-8222-222222222222",
	name: "pipeline",
	engine: "dsp",
	params: {},
	artifacts: [],
};

/** Stands in for a model engine: wants 16 kHz mono (like rvc) and passes audio through unchanged. */
class MonoSixteenKilohertzEngine implements Engine {
	readonly name = "rvc" as const;
	async init() {
		return { name: this.name, executionProvider: "cpu" };
	}
	inputFormat(): PcmFormat {
		return { sampleRate: 16_000, channels: 1 };
	}
	outputFormat(): PcmFormat {
		return { sampleRate: 16_000, channels: 1 };
	}
	async *convert(input: AsyncIterable<AudioBlock>, _job?: EngineJob) {
		yield* input;
	}
	async dispose() {}
}

let api: FakeRunnerApi;
let dir: string;

beforeAll(async () => {
	api = await new FakeRunnerApi().start();
	dir = mkdtempSync(join(tmpdir(), "pipeline-"));
});
afterAll(async () => {
	await api.close();
	rmSync(dir, { recursive: true, force: true });
});

async function convert(
	source: Uint8Array,
	options: {
		engine?: Engine;
		previewSeconds?: number;
		sourceSeconds?: number;
		semitones?: number;
		maxOutputBytes?: number;
	} = {},
) {
	const job: FakeJob = {
		conversionId: randomUUID(),
		source,
		format: "wav",
		sampleRate: 0,
		channels: 0,
		durationSeconds: 0,
	};
	api.enqueue(job);
	const result = await convertSource({
		sourceUrl: `${api.baseUrl}/storage/source/${job.conversionId}`,
		outputUrl: `${api.baseUrl}/storage/output/${job.conversionId}`,
		engine: options.engine ?? new DspEngine(),
		voice,
		semitones: options.semitones ?? 0,
		previewSeconds: options.previewSeconds,
		...(options.sourceSeconds !== undefined ? { sourceSeconds: options.sourceSeconds } : {}),
		...(options.maxOutputBytes !== undefined ? { maxOutputBytes: options.maxOutputBytes } : {}),
		artifactPaths: new Map(),
		workDir: dir,
		signal: new AbortController().signal,
	});
	const upload = api.uploads.get(job.conversionId);
	if (!upload) throw new Error("nothing was uploaded");
	return { result, upload, header: readWavHeader(upload.body) };
}

describe("conversion pipeline", () => {
	it("scales an output that goes past full scale down as a whole to peak at 0.99, leaving others exact", async () => {
		class GainEngine extends MonoSixteenKilohertzEngine {
			readonly gain: number;
			readonly tail: number;
			constructor(gain: number, tail = 0) {
				super();
				this.gain = gain;
				this.tail = tail;
			}
			override async *convert(input: AsyncIterable<AudioBlock>) {
				for await (const block of input) {
					yield { ...block, channels: block.channels.map((c) => c.map((x) => x * this.gain)) };
				}
				// Past the source's end, cut off by the pipeline: it does not count towards the peak.
				if (this.tail > 0) yield { sampleRate: 16_000, channels: [new Float32Array(1_000).fill(this.tail)] };
			}
		}
		const tone = sine(220, 1, 16_000, 0.5);
		const source = makeWav([tone], 16_000, { kind: "float", bits: 32 });
		const samplesOf = async (engine: Engine) => {
			const { upload } = await convert(source, { engine });
			return (await collect(decodeWav(bytesOf(upload.body)))).channels[0] as Float32Array;
		};
		const peakOf = (samples: Float32Array) => samples.reduce((peak, x) => Math.max(peak, Math.abs(x)), 0);
		// 0.5 x 3 = 1.5 would clip at full scale for a third of every period; scaled by 0.99 / 1.5 it keeps its shape.
		const loud = await samplesOf(new GainEngine(3, 4));
		expect(peakOf(loud)).toBeCloseTo(0.99, 3);
		for (let i = 0; i < tone.length; i++) expect(loud[i]).toBeCloseTo((tone[i] as number) * 1.98, 3);
		// Below the limit: exactly what quantising the engine's output gives, sample for sample.
		const quiet = await samplesOf(new GainEngine(1.5));
		for (let i = 0; i < tone.length; i++) {
			const expected = Math.round((tone[i] as number) * 1.5 * 32767) / 32767;
			expect(Math.abs((quiet[i] as number) - expected)).toBeLessThan(1 / 32767);
		}
		expect(peakOf(quiet)).toBeCloseTo(0.75, 3);
		// The staging file goes with the job.
		expect(readdirSync(dir).filter((name) => name.endsWith(".f32"))).toEqual([]);
	});

	it("converts exactly the first 10 s for a preview of a longer source", async () => {
		const source = makeWav([harmonicTone(200, 12.5, 16_000)], 16_000, { kind: "pcm", bits: 16 });
		const { result, header, upload } = await convert(source, { previewSeconds: 10, semitones: 5 });
		expect(header.seconds).toBe(10);
		expect(result.durationSeconds).toBe(10);
		expect(result.sourceSeconds).toBe(10);
		expect(upload.contentLength).toBe(result.sizeBytes);
	});

	it("keeps a source shorter than the preview whole", async () => {
		const source = makeWav([harmonicTone(200, 4.321, 16_000)], 16_000, { kind: "pcm", bits: 24 });
		const { header } = await convert(source, { previewSeconds: 10 });
		expect(Math.abs(header.seconds - 4.321)).toBeLessThanOrEqual(0.01);
	});

	it("keeps the source's rate and channels with the dsp engine", async () => {
		const source = makeWav(
			[sine(300, 1.5, 48_000), sine(500, 1.5, 48_000)],
			48_000,
			{ kind: "float", bits: 32 },
			{ extensible: true },
		);
		const { header } = await convert(source, { semitones: -3 });
		expect(header).toMatchObject({ channels: 2, sampleRate: 48_000 });
		expect(Math.abs(header.seconds - 1.5)).toBeLessThanOrEqual(0.01);
	});

	it("writes an output of more than 2 channels as WAVE_FORMAT_EXTENSIBLE with the source's speakers", async () => {
		/** The output's format tag and channel mask (0 where the header has none), and its channels decoded. */
		async function outputLayout(source: Uint8Array) {
			const { upload } = await convert(source, { semitones: 2 });
			const view = new DataView(upload.body.buffer, upload.body.byteOffset, upload.body.byteLength);
			const tag = view.getUint16(20, true);
			const decoded = await collect(decodeWav(bytesOf(upload.body)));
			return { tag, mask: tag === 0xfffe ? view.getUint32(40, true) : 0, channels: decoded.channels.length };
		}
		const rate = 16_000;
		const tones = (count: number) => Array.from({ length: count }, (_, c) => sine(200 + 50 * c, 0.5, rate, 0.3));
		// 5.1 with side speakers (what ffmpeg writes for "5.1(side)"): the mask goes through as the source states it.
		const sideSurround = makeWav(tones(6), rate, { kind: "pcm", bits: 24 }, { extensible: true, channelMask: 0x60f });
		expect(await outputLayout(sideSurround)).toEqual({ tag: 0xfffe, mask: 0x60f, channels: 6 });
		// A plain header states no speakers: the output assigns none either.
		const plainThree = makeWav(tones(3), rate, { kind: "pcm", bits: 16 });
		expect(await outputLayout(plainThree)).toEqual({ tag: 0xfffe, mask: 0, channels: 3 });
		// Stereo stays the plain header.
		const stereo = makeWav(tones(2), rate, { kind: "pcm", bits: 16 }, { extensible: true, channelMask: 0x3 });
		expect(await outputLayout(stereo)).toEqual({ tag: 1, mask: 0, channels: 2 });
	});

	it.skipIf(missingToolsMessage(["sox"]) !== undefined)(
		"gives a 6-channel FLAC's output FLAC's 5.1 speakers",
		async () => {
			const wav = join(dir, "six.wav");
			const flac = join(dir, "six.flac");
			writeFileSync(
				wav,
				makeWav(
					Array.from({ length: 6 }, (_, c) => sine(200 + 50 * c, 0.5, 16_000, 0.3)),
					16_000,
					{ kind: "pcm", bits: 16 },
				),
			);
			run("sox", [wav, flac]);
			const { upload } = await convert(new Uint8Array(readFileSync(flac)));
			const view = new DataView(upload.body.buffer, upload.body.byteOffset, upload.body.byteLength);
			expect([view.getUint16(20, true), view.getUint16(22, true), view.getUint32(40, true)]).toEqual([0xfffe, 6, 0x3f]);
		},
	);

	it("downmixes and resamples to the format an engine asks for, without changing pitch or length", async () => {
		const tone = sine(440, 3, 44_100, 0.4);
		const source = makeWav([tone, tone], 44_100, { kind: "pcm", bits: 16 });
		const { header, upload } = await convert(source, { engine: new MonoSixteenKilohertzEngine() });
		expect(header).toMatchObject({ channels: 1, sampleRate: 16_000 });
		expect(Math.abs(header.seconds - 3)).toBeLessThanOrEqual(0.01);
		const decoded = await collect(decodeWav(bytesOf(upload.body)));
		const pitch = medianPitch(trackPitch(decoded.channels[0] as Float32Array, 16_000));
		expect(Math.abs(cents(pitch, 440))).toBeLessThan(2);
	});

	it("tells the engine the frames to expect: the stated duration, cut to the preview, at the engine's rate", async () => {
		class RecordingEngine extends MonoSixteenKilohertzEngine {
			readonly expected: (number | undefined)[] = [];
			override async *convert(input: AsyncIterable<AudioBlock>, job: EngineJob) {
				this.expected.push(job.inputFrames);
				yield* input;
			}
		}
		const engine = new RecordingEngine();
		const source = makeWav([sine(440, 12.5, 44_100, 0.4)], 44_100, { kind: "pcm", bits: 16 });
		await convert(source, { engine, sourceSeconds: 12.5 });
		await convert(source, { engine, sourceSeconds: 12.5, previewSeconds: 10 });
		await convert(source, { engine });
		expect(engine.expected).toEqual([200_000, 160_000, undefined]);
	});

	it("survives the storage server closing its idle connection while the conversion is still running", async () => {
		// Storage servers close idle keep-alive sockets; the download is over by then and must not fail late.
		class SlowEngine extends MonoSixteenKilohertzEngine {
			override async *convert(input: AsyncIterable<AudioBlock>) {
				for await (const block of input) {
					await new Promise((resolve) => setTimeout(resolve, 30));
					yield block;
				}
			}
		}
		const bytes = makeWav([sine(440, 20, 16_000)], 16_000, { kind: "pcm", bits: 16 });
		const server = createServer((_request, response) => {
			response.writeHead(200, { "content-length": bytes.length }).end(bytes);
		});
		server.keepAliveTimeout = 50;
		await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
		const job: FakeJob = {
			conversionId: randomUUID(),
			source: bytes,
			format: "wav",
			sampleRate: 0,
			channels: 0,
			durationSeconds: 0,
		};
		api.enqueue(job);
		try {
			const result = await convertSource({
				sourceUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/source`,
				outputUrl: `${api.baseUrl}/storage/output/${job.conversionId}`,
				engine: new SlowEngine(),
				voice,
				semitones: 0,
				artifactPaths: new Map(),
				workDir: dir,
				signal: new AbortController().signal,
			});
			expect(result.durationSeconds).toBe(20);
		} finally {
			server.close();
		}
	});

	it("fails the job for good, before converting, when the output WAV would be larger than its address takes", async () => {
		const source = makeWav([sine(440, 2, 16_000)], 16_000, { kind: "pcm", bits: 16 });
		const engine = new MonoSixteenKilohertzEngine();
		let converted = false;
		engine.convert = async function* (input: AsyncIterable<AudioBlock>) {
			converted = true;
			yield* input;
		};
		// 2 s of 16 kHz mono is 64 044 bytes as a WAV: the stated length decides before any conversion.
		const refused = convert(source, { engine, sourceSeconds: 2, maxOutputBytes: 64_043 });
		await expect(refused).rejects.toMatchObject({ name: "PermanentJobError", reason: "output_too_large" });
		await expect(refused).rejects.toThrow(/64044 bytes or more \(at most 64043\)/);
		expect(converted).toBe(false);
		// Without a stated length, as soon as the output would pass it; exactly at the limit it is made.
		await expect(convert(source, { engine, maxOutputBytes: 64_043 })).rejects.toMatchObject({
			reason: "output_too_large",
		});
		const made = await convert(source, { engine, sourceSeconds: 2, maxOutputBytes: 64_044 });
		expect(made.result.sizeBytes).toBe(64_044);
	});

	it("fails the job permanently before uploading anything when the source is corrupt", async () => {
		const source = makeWav([sine(440, 1, 16_000)], 16_000, { kind: "pcm", bits: 16 }).subarray(0, 5000);
		await expect(convert(source)).rejects.toMatchObject({ name: "PermanentJobError", reason: "corrupted_source" });
	});
});

const toolsSkip = missingToolsMessage(["lame", "flac"]);

describe.skipIf(toolsSkip !== undefined)(
	`pipeline with compressed sources${toolsSkip ? ` (${toolsSkip})` : ""}`,
	() => {
		it("converts an MP3 preview and a full FLAC with exact durations", async () => {
			const wavPath = join(dir, "long.wav");
			writeFileSync(
				wavPath,
				makeWav([harmonicTone(150, 12, 44_100), harmonicTone(160, 12, 44_100)], 44_100, { kind: "pcm", bits: 16 }),
			);
			run("lame", ["--quiet", "-b", "128", wavPath, join(dir, "long.mp3")]);
			run("flac", ["-s", "-f", "-o", join(dir, "long.flac"), wavPath]);

			const mp3 = await convert(new Uint8Array(readFileSync(join(dir, "long.mp3"))), {
				previewSeconds: 10,
				semitones: 7,
			});
			expect(mp3.header).toMatchObject({ channels: 2, sampleRate: 44_100 });
			expect(Math.abs(mp3.header.seconds - 10)).toBeLessThanOrEqual(0.01);

			const flac = await convert(new Uint8Array(readFileSync(join(dir, "long.flac"))), { semitones: -7 });
			expect(Math.abs(flac.header.seconds - 12)).toBeLessThanOrEqual(0.01);
		});
	},
);
