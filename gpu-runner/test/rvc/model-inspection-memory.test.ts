/**
 * A voice's `.pth` is read whole to be checked (its pickle and tensors are what is checked), so the file is held in
 * memory once while it is inspected or its synthesizer built: never a second copy of it. Measured as the peak
 * resident memory of a fresh process reading a checkpoint of 256 MiB.
 */
import { execFile } from "node:child_process";
import { createReadStream, createWriteStream } from "node:fs";
import { open, readFile } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { crc32, createGunzip } from "node:zlib";
import { describe, expect, it } from "vitest";
import { readEndRecord } from "../../../src/contracts/zip-directory.ts";
import { scratchDir } from "../helpers/scratch.ts";
import { centralHeader, endRecord, localHeader } from "./support/zip-headers.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
const module = (name: string) => pathToFileURL(join(import.meta.dirname, "../../src/engines/rvc", name)).href;
const MiB = 1024 * 1024;

/**
 * `fixture` (a checkpoint as torch.save wrote it) with one more stored entry of `padding` zero bytes, which the
 * reader never decodes: the file is large while the tensors it decodes stay the fixture's. The zeros are a hole
 * in a sparse file, so making it writes a few hundred kB.
 */
async function paddedCheckpoint(fixture: string, padding: number): Promise<string> {
	const original = await readFile(join(FIXTURES, fixture));
	const directory = readEndRecord(new DataView(original.buffer, original.byteOffset, original.byteLength), 0);
	if (!("offset" in directory)) throw new Error("the fixture's end record points to a zip64 record");
	const name = Buffer.from(`${fixture.replace(/\.pth$/, "")}/padding`);
	let crc = 0;
	const zeros = Buffer.alloc(MiB);
	for (let done = 0; done < padding; done += MiB) crc = crc32(zeros.subarray(0, Math.min(MiB, padding - done)), crc);

	const fields = { crc, compressedSize: padding, size: padding, nameLength: name.length };
	const local = localHeader(fields);
	const localAt = directory.offset;
	const central = centralHeader({ ...fields, localOffset: localAt });
	const directoryAt = localAt + local.length + name.length + padding;
	const oldDirectory = original.subarray(directory.offset, directory.offset + directory.size);
	const end = endRecord({
		count: directory.count + 1,
		size: oldDirectory.length + central.length + name.length,
		offset: directoryAt,
	});

	const path = join(scratchDir("big-checkpoint"), "big.pth");
	const file = await open(path, "w");
	try {
		await file.write(original.subarray(0, directory.offset), 0, directory.offset, 0);
		await file.write(Buffer.concat([local, name]), 0, local.length + name.length, localAt);
		const tail = Buffer.concat([oldDirectory, central, name, end]);
		await file.write(tail, 0, tail.length, directoryAt);
	} finally {
		await file.close();
	}
	return path;
}

/**
 * Calls `name` of the runner's module `file` on `path` in a fresh Node process: its result, and how far the
 * process's peak resident memory rose meanwhile.
 */
async function measureApart<T>(file: string, name: string, path: string): Promise<{ result: T; peakRise: number }> {
	const script = `
		const { ${name}: call } = await import(${JSON.stringify(module(file))});
		const before = process.resourceUsage().maxRSS;
		const result = await call(${JSON.stringify(path)});
		const peakRise = (process.resourceUsage().maxRSS - before) * 1024;
		console.log(JSON.stringify({ result, peakRise }));`;
	const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
		maxBuffer: 16 * MiB,
	});
	return JSON.parse(stdout.trim().split("\n").at(-1) as string);
}

describe("checkpoint inspection memory", () => {
	it("holds a 256 MiB checkpoint once while it is read, not a second copy of it", async () => {
		const padding = 256 * MiB;
		const path = await paddedCheckpoint("ddpn08-v2-768-layer-12.pth", padding);
		const { result: facts, peakRise } = await measureApart<Record<string, unknown>>(
			"model-inspection.ts",
			"inspectModelFile",
			path,
		);
		expect(facts).toMatchObject({ kind: "rvc_checkpoint", version: "v2", feature_dim: 768, sample_rate: 40_000 });
		expect(facts.refused).toBeUndefined();
		expect(facts.bytes).toBeGreaterThan(padding);
		// One copy of the file is 256 MiB; a second (as the bytes were once copied out of readFile's Buffer) is 512.
		expect(peakRise).toBeGreaterThan(padding * 0.9);
		expect(peakRise).toBeLessThan(padding * 1.4);
	}, 60_000);

	it("reads it once too when its synthesizer is built for the voice's check and its jobs", async () => {
		const padding = 256 * MiB;
		const path = await paddedCheckpoint("ddpn08-v2-768-layer-12.pth", padding);
		const { result, peakRise } = await measureApart<string>("synthesizer-file.ts", "synthesizerOnnxPath", path);
		expect(result).toMatch(/\.synthesizer-v\d+\.onnx$/);
		expect(peakRise).toBeGreaterThan(padding * 0.9);
		expect(peakRise).toBeLessThan(padding * 1.4);
	}, 60_000);

	it.each([
		// [dtype, file size, bounds of the peak rise as multiples of the file]
		// fp32: the file and the float32 tensors it gives are about as large (2 times); a copy of each storage, made to
		// align it, was a third copy (3.1 times).
		["float32", 100 * MiB, 1.9, 2.6],
		// fp16 (RVC's own exports): the file, then its tensors widened to float32 at twice its size (3 times); the
		// widened storages, held to the end beside the tensors copied out of them, were two more (5.3 times).
		["float16", 50 * MiB, 2.8, 4.3],
	] as const)(
		"holds a full-size %s checkpoint's tensors once beside the file while it reads them",
		async (dtype, least, low, high) => {
			// RVC's v2 40k widths (27.5 million parameters), saved by torch.save (see make-full-size-checkpoint.py).
			const short = dtype === "float32" ? "fp32" : "fp16";
			const path = join(scratchDir("full-size-checkpoint"), `full-${short}.pth`);
			await pipeline(
				createReadStream(join(FIXTURES, `full-size-v2-40k-${short}.pth.gz`)),
				createGunzip(),
				createWriteStream(path),
			);
			const { result: facts, peakRise } = await measureApart<Record<string, unknown>>(
				"model-inspection.ts",
				"inspectModelFile",
				path,
			);
			expect(facts).toMatchObject({ kind: "rvc_checkpoint", dtype, parameters: 27_514_690 });
			expect(facts.refused).toBeUndefined();
			const file = facts.bytes as number;
			expect(file).toBeGreaterThan(least);
			expect(peakRise).toBeGreaterThan(file * low);
			expect(peakRise).toBeLessThan(file * high);
		},
		60_000,
	);
});
