/**
 * The playground's zip reader (`public/playground/voice-archive.js`, plain JavaScript for the browser) against the
 * SDK's (`sdk/voice-archive.ts`): on the same archives, published ones and ones changed as damage or other tools
 * change them, both take the same entries byte for byte, leave out the same with the same reasons, and refuse the
 * same with the same message. Archives come from the committed fixtures (Python's zipfile, Info-ZIP) and from
 * Info-ZIP's `zip` run here.
 */
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ReadVoiceArchiveOptions, readVoiceArchive, VoiceConversionError } from "../../sdk/index.ts";
import { describeVoiceArchive } from "../../sdk/voice-archive.ts";
import { VOICE_LIMITS } from "../../src/contracts/voices.ts";
import { ROOT } from "../support/local-stack.ts";

/** The playground's module, as the browser loads it (plain JavaScript, so typed here by what the test uses). */
interface PlaygroundArchiveReader {
	VOICE_FILE_LIMITS: { model: number; index: number };
	VoiceArchiveError: new (...args: never[]) => Error;
	readVoiceArchive(archive: Blob, options?: { model?: string; index?: string | false }): Promise<ReadArchive>;
	voiceArchiveChoices(archive: Blob): Promise<{ models: string[]; indexes: string[] }>;
	isVoiceArchive(file: File): Promise<boolean>;
}
const playground: PlaygroundArchiveReader = await import(
	new URL("../../public/playground/voice-archive.js", import.meta.url).href
);

const FIXTURES = path.join(ROOT, "gpu-runner/test/rvc/fixtures");
const bytesOf = async (name: string) => new Uint8Array(await readFile(path.join(FIXTURES, name)));

type Outcome =
	| { refused: string }
	| {
			model: { entry: string; fileName: string; bytes: Uint8Array };
			index: { entry: string; fileName: string; bytes: Uint8Array } | null;
			skipped: { entry: string; reason: string }[];
	  };

interface ArchiveFile {
	source: Blob;
	entry: string;
	fileName: string;
}
type ReadArchive = { model: ArchiveFile; index?: ArchiveFile; skipped: { entry: string; reason: string }[] };

async function outcome(read: () => Promise<ReadArchive>, refusal: new (...args: never[]) => Error): Promise<Outcome> {
	const file = async ({ entry, fileName, source }: ArchiveFile) => ({
		entry,
		fileName,
		bytes: new Uint8Array(await source.arrayBuffer()),
	});
	try {
		const archive = await read();
		return {
			model: await file(archive.model),
			index: archive.index ? await file(archive.index) : null,
			skipped: archive.skipped,
		};
	} catch (error) {
		expect(error).toBeInstanceOf(refusal);
		return { refused: (error as Error).message };
	}
}

/** Both readers on `archive`; their outcomes must be the same. Returns it. */
async function both(
	archive: Uint8Array<ArrayBuffer>,
	options: Omit<ReadVoiceArchiveOptions, "inflateTo"> = {},
): Promise<Outcome> {
	const sdk = await outcome(() => readVoiceArchive(new Blob([archive]), options), VoiceConversionError);
	const page = await outcome(
		() => playground.readVoiceArchive(new Blob([archive]), options),
		playground.VoiceArchiveError,
	);
	expect(page).toEqual(sdk);
	return sdk;
}

/** `name` with its bytes changed by `change` (given the copy and a view of it). */
async function changed(
	name: string,
	change: (copy: Uint8Array, view: DataView) => void,
): Promise<Uint8Array<ArrayBuffer>> {
	const copy = await bytesOf(name);
	change(copy, new DataView(copy.buffer, copy.byteOffset));
	return copy;
}

/** Where the header with `signature` for entry `entry` starts (its name at `nameAt` from the header). */
function headerOf(copy: Uint8Array, view: DataView, signature: number, nameAt: number, entry: string): number {
	const name = new TextEncoder().encode(entry);
	for (let at = 0; at + nameAt + name.length <= copy.length; at++) {
		if (view.getUint32(at, true) !== signature) continue;
		if (name.every((b, i) => copy[at + nameAt + i] === b)) return at;
	}
	throw new Error(`no header for ${entry}`);
}

/** published-voice.zip with the model's central directory header changed by `patch`. */
const patchedModel = (patch: (view: DataView, at: number) => void) =>
	changed("archive/published-voice.zip", (copy, view) =>
		patch(view, headerOf(copy, view, 0x02014b50, 46, "Aurora/Aurora.pth")),
	);

/** `name` with a byte of `entry`'s data changed. */
const damaged = (name: string, entry: string, offset: number) =>
	changed(name, (copy, view) => {
		const at = headerOf(copy, view, 0x04034b50, 30, entry);
		const start = at + 30 + view.getUint16(at + 26, true) + view.getUint16(at + 28, true);
		copy[start + offset] = (copy[start + offset] as number) ^ 0x5a;
	});

let tempDir: string;

/** An archive made by Info-ZIP's `zip` of `files` (path in the archive to its bytes), deflated unless `stored`. */
async function zipOf(files: Record<string, Uint8Array | string>, stored = false): Promise<Uint8Array<ArrayBuffer>> {
	const folder = await mkdtemp(path.join(tempDir, "zip-"));
	for (const [entry, data] of Object.entries(files)) {
		await mkdir(path.dirname(path.join(folder, entry)), { recursive: true });
		await writeFile(path.join(folder, entry), data);
	}
	execFileSync("zip", ["-q", "-X", "-r", ...(stored ? ["-0"] : []), "voice.zip", ...Object.keys(files)], {
		cwd: folder,
	});
	return new Uint8Array(await readFile(path.join(folder, "voice.zip")));
}

beforeAll(async () => {
	tempDir = await mkdtemp(path.join(os.tmpdir(), "playground-archive-"));
});

afterAll(async () => {
	if (tempDir) await rm(tempDir, { recursive: true, force: true });
});

describe("the playground's voice archive reader reads as the SDK's", () => {
	it("has the API's size limits for the model and the index", () => {
		expect(playground.VOICE_FILE_LIMITS).toEqual({
			model: VOICE_LIMITS.maxBytes.model,
			index: VOICE_LIMITS.maxBytes.index,
		});
	});

	it("takes the same entries out of published archives, deflated, stored and zip64", async () => {
		const published = await both(await bytesOf("archive/published-voice.zip"));
		expect(published).toMatchObject({
			model: { entry: "Aurora/Aurora.pth", bytes: await bytesOf("v2-f0-40k.pth") },
			index: {
				fileName: "added_IVF13_Flat_nprobe_1_Aurora_v2.index",
				bytes: await bytesOf("index/voice-v2-768.index"),
			},
		});
		expect("skipped" in published && published.skipped.map((s) => s.entry)).toContain("Aurora/説明.txt");
		expect(await both(await bytesOf("archive/stored-zip64.zip"))).toMatchObject({
			model: { entry: "Aurora/Aurora.pth" },
		});
		expect(await both(await bytesOf("archive/published-voice.zip"), { index: false })).toMatchObject({ index: null });
	});

	it("reads names as the SDK does: Windows' \\ between folders, code page 437 without the UTF-8 flag", async () => {
		const windows = await changed("archive/published-voice.zip", (copy) => {
			const folder = new TextEncoder().encode("Aurora/");
			for (let at = 0; at + folder.length <= copy.length; at++) {
				if (folder.every((b, i) => copy[at + i] === b)) copy[at + folder.length - 1] = 0x5c;
			}
		});
		expect(await both(windows)).toMatchObject({ model: { entry: "Aurora\\Aurora.pth", fileName: "Aurora.pth" } });
		const cp437 = await patchedModel((view, at) => view.setUint8(at + 46 + 10, 0x82));
		expect(await both(cp437)).toMatchObject({ model: { fileName: "Auréra.pth" } });
	});

	it("refuses to choose between models or indexes as the SDK does, and takes the one named", async () => {
		const twoModels = await bytesOf("archive/two-models.zip");
		expect(await both(twoModels)).toEqual({
			refused: "The archive holds several models (VoiceA/VoiceA.pth, VoiceB/VoiceB.pth): name the one to use",
		});
		expect(await both(twoModels, { model: "VoiceB.pth" })).toMatchObject({ model: { entry: "VoiceB/VoiceB.pth" } });
		expect(await both(twoModels, { model: "VoiceC.pth" })).toMatchObject({
			refused: expect.stringContaining("holds no model named VoiceC.pth"),
		});
		expect(await playground.voiceArchiveChoices(new Blob([twoModels]))).toEqual({
			models: ["VoiceA/VoiceA.pth", "VoiceB/VoiceB.pth"],
			indexes: [],
		});

		const model = await bytesOf("v2-f0-40k.pth");
		const index = await bytesOf("index/voice-v2-768.index");
		const twoIndexes = await zipOf({
			"v/voice.pth": model,
			"v/added_IVF13_Flat_nprobe_1_a_v2.index": index,
			"v/added_IVF13_Flat_nprobe_1_b_v2.index": index,
			"v/trained_IVF4_Flat_nprobe_1_a_v2.index": index,
		});
		expect(await both(twoIndexes)).toMatchObject({ refused: expect.stringMatching(/several indexes .*name the one/) });
		expect(await both(twoIndexes, { index: "v/added_IVF13_Flat_nprobe_1_b_v2.index" })).toMatchObject({
			index: { fileName: "added_IVF13_Flat_nprobe_1_b_v2.index", bytes: index },
		});
		expect(await playground.voiceArchiveChoices(new Blob([twoIndexes]))).toEqual({
			models: ["v/voice.pth"],
			indexes: ["v/added_IVF13_Flat_nprobe_1_a_v2.index", "v/added_IVF13_Flat_nprobe_1_b_v2.index"],
		});
		expect(await both(await zipOf({ "G_2333.pth": model, "D_2333.pth": model }))).toMatchObject({
			refused: expect.stringMatching(/^The archive holds only RVC training checkpoints/),
		});
		expect(await both(await zipOf({ "G_2333.pth": model, "voice.pth": model }, true))).toMatchObject({
			model: { entry: "voice.pth", bytes: model },
		});
		expect(await both(await zipOf({ "readme.txt": "a voice", "voice.index": index }))).toEqual({
			refused: "The archive holds no model (.pth or .onnx)",
		});
	});

	it("refuses damaged, encrypted, otherwise compressed and oversized entries with the SDK's words", async () => {
		const cases = [
			await damaged("archive/stored-zip64.zip", "Aurora/Aurora.pth", 5000),
			await damaged("archive/published-voice.zip", "Aurora/added_IVF13_Flat_nprobe_1_Aurora_v2.index", 900),
			await patchedModel((view, at) => view.setUint16(at + 8, view.getUint16(at + 8, true) | 1, true)),
			await patchedModel((view, at) => view.setUint16(at + 10, 14, true)),
			await patchedModel((view, at) => view.setUint32(at + 24, 200_000_001, true)),
			await patchedModel((view, at) => view.setUint32(at + 24, view.getUint32(at + 24, true) - 1, true)),
			await patchedModel((view, at) => view.setUint32(at + 42, 7, true)),
		];
		const refusals = [];
		for (const archive of cases) refusals.push(await both(archive));
		expect(refusals).toEqual([
			{ refused: "The archive's Aurora/Aurora.pth is damaged: its CRC-32 does not match" },
			{ refused: expect.stringMatching(/^The archive's Aurora\/added_.*\.index (is damaged|cannot be inflated)/) },
			{ refused: "The archive's Aurora/Aurora.pth is encrypted: extract it first" },
			{ refused: expect.stringMatching(/^The archive's Aurora\/Aurora\.pth is compressed with a method .*\(14;/) },
			{ refused: "The archive's Aurora/Aurora.pth is 200000001 bytes, over the model limit of 200000000" },
			{ refused: expect.stringMatching(/^The archive's Aurora\/Aurora\.pth is damaged: it holds more than/) },
			{ refused: expect.stringMatching(/^The archive cannot be read: .*no local header where the directory says/) },
		]);
	});

	it("tells a checkpoint, another file and a cut archive from a voice's archive", async () => {
		const checkpoint = await bytesOf("v2-f0-40k.pth");
		expect(await both(checkpoint)).toEqual({
			refused: "This is an RVC checkpoint (.pth) itself, not an archive of one: upload it as the model",
		});
		const notZip = /^The archive cannot be read: no zip end of central directory record/;
		expect(await both(await bytesOf("index/voice-v2-768.index"))).toMatchObject({
			refused: expect.stringMatching(notZip),
		});
		const cut = (await bytesOf("archive/published-voice.zip")).subarray(0, 200_000);
		expect(await both(cut)).toMatchObject({ refused: expect.stringMatching(notZip) });

		// What the page reads as an archive: what the SDK refuses as a model for being one, and any file named .zip.
		const published = new File([await bytesOf("archive/published-voice.zip")], "Aurora.pth");
		expect(await playground.isVoiceArchive(published)).toBe(true);
		expect(await describeVoiceArchive(published)).not.toBeNull();
		expect(await playground.isVoiceArchive(new File([checkpoint], "v2.pth"))).toBe(false);
		expect(await describeVoiceArchive(new Blob([checkpoint]))).toBeNull();
		expect(await playground.isVoiceArchive(new File([cut], "voice.zip"))).toBe(true);
		expect(await playground.isVoiceArchive(new File(["not a model"], "voice.pth"))).toBe(false);
	});
});
