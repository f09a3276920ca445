/**
 * The SDK's `readVoiceArchive` on voices zipped as people publish them (made by Python's zipfile and Info-ZIP in
 * gpu-runner/test/rvc/fixtures/make-voice-archives.py): the model and index come out byte for byte, RVC's trained_
 * index and the rest are left out with a reason, and what cannot be decided or read is refused with the entries named.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readRvcCheckpoint } from "../../gpu-runner/src/engines/rvc/rvc-checkpoint.ts";
import { readVoiceArchive, type VoiceArchive, VoiceConversionClient, VoiceConversionError } from "../../sdk/index.ts";
import { ROOT } from "../support/local-stack.ts";

const FIXTURES = path.join(ROOT, "gpu-runner/test/rvc/fixtures");
const bytesOf = (name: string) => new Uint8Array(readFileSync(path.join(FIXTURES, name)));
const blobOf = (name: string) => new Blob([bytesOf(name)]);
const MODEL = bytesOf("v2-f0-40k.pth");
const INDEX = bytesOf("index/voice-v2-768.index");
const bytes = async (blob: Blob) => new Uint8Array(await blob.arrayBuffer());

async function refusal(promise: Promise<unknown>): Promise<VoiceConversionError> {
	const error = await promise.then(
		() => null,
		(e: unknown) => e,
	);
	expect(error).toBeInstanceOf(VoiceConversionError);
	expect((error as VoiceConversionError).code).toBe("invalid_request");
	// Said once: `describe()`, which the CLI prints, does not repeat the message as a field's problem.
	const { message } = error as VoiceConversionError;
	expect((error as VoiceConversionError).describe().split(message)).toHaveLength(2);
	return error as VoiceConversionError;
}

/** The archive with the byte at `offset` from the start of `entry`'s data changed. */
function damaged(name: string, entry: string, offset: number): Blob {
	const copy = bytesOf(name);
	const view = new DataView(copy.buffer, copy.byteOffset);
	for (let at = 0; at + 30 < copy.length; at++) {
		if (view.getUint32(at, true) !== 0x04034b50) continue;
		const nameLength = view.getUint16(at + 26, true);
		if (new TextDecoder().decode(copy.subarray(at + 30, at + 30 + nameLength)) !== entry) continue;
		const start = at + 30 + nameLength + view.getUint16(at + 28, true);
		copy[start + offset] = (copy[start + offset] as number) ^ 0x5a;
		return new Blob([copy]);
	}
	throw new Error(`no ${entry} in ${name}`);
}

/** published-voice.zip with the model's central directory header changed by `patch` (at the header's offset). */
function patched(patch: (view: DataView, at: number) => void): Blob {
	const copy = bytesOf("archive/published-voice.zip");
	const view = new DataView(copy.buffer, copy.byteOffset);
	const name = new TextEncoder().encode("Aurora/Aurora.pth");
	for (let at = 0; at + 46 < copy.length; at++) {
		const here = copy.subarray(at + 46, at + 46 + name.length);
		if (view.getUint32(at, true) === 0x02014b50 && here.every((b, i) => b === name[i])) {
			patch(view, at);
			return new Blob([copy]);
		}
	}
	throw new Error("no central directory header for the model");
}

/** The fixture voice's model and added_ index came out of `archive`, under `folder` and byte for byte. */
async function expectAurora(archive: VoiceArchive, folder: string): Promise<void> {
	expect(archive.model).toMatchObject({ entry: `${folder}Aurora.pth`, fileName: "Aurora.pth" });
	expect(archive.index).toMatchObject({
		entry: `${folder}added_IVF13_Flat_nprobe_1_Aurora_v2.index`,
		fileName: "added_IVF13_Flat_nprobe_1_Aurora_v2.index",
	});
	expect(await bytes(archive.model.source)).toEqual(MODEL);
	expect(await bytes(archive.index?.source as Blob)).toEqual(INDEX);
}

describe("readVoiceArchive", () => {
	it("takes the model and the added_ index out of a published, deflated archive", async () => {
		const archive = await readVoiceArchive(blobOf("archive/published-voice.zip"));
		await expectAurora(archive, "Aurora/");
		expect(archive.skipped).toEqual([
			{ entry: "Aurora/", reason: "a folder" },
			{
				entry: "Aurora/trained_IVF4_Flat_nprobe_1_Aurora_v2.index",
				reason: "RVC's trained_ index, which holds no features (its added_ index is the one used)",
			},
			{ entry: "Aurora/説明.txt", reason: "not a model or an index" },
			{ entry: "__MACOSX/Aurora/._Aurora.pth", reason: "a hidden or macOS file" },
		]);
	});

	it("takes the model and index out of an archive made on Windows, with \\ between folders", async () => {
		// published-voice.zip as Windows PowerShell's Compress-Archive writes it: each Aurora/ becomes Aurora\ (one byte).
		const copy = bytesOf("archive/published-voice.zip");
		const folder = new TextEncoder().encode("Aurora/");
		for (let at = 0; at + folder.length <= copy.length; at++) {
			if (folder.every((b, i) => copy[at + i] === b)) copy[at + folder.length - 1] = 0x5c;
		}
		const archive = await readVoiceArchive(new Blob([copy]));
		await expectAurora(archive, "Aurora\\");
		expect(archive.skipped.map((s) => s.reason)).toContain(
			"RVC's trained_ index, which holds no features (its added_ index is the one used)",
		);
	});

	it("reads a name without the UTF-8 flag as code page 437, the format's default", async () => {
		// published-voice.zip with its model named Aur\x82ra.pth (é in code page 437) in the directory.
		const archive = await readVoiceArchive(patched((view, at) => view.setUint8(at + 46 + 10, 0x82)));
		expect(archive.model).toMatchObject({ entry: "Aurora/Auréra.pth", fileName: "Auréra.pth" });
		expect(await bytes(archive.model.source)).toEqual(MODEL);
	});

	it("reads Info-ZIP's zip64 records and stored entries", async () => {
		const archive = await readVoiceArchive(blobOf("archive/stored-zip64.zip"));
		await expectAurora(archive, "Aurora/");
		expect(archive.skipped).toEqual([]);
	});

	it("inflates through inflateTo, and leaves the index out when asked", async () => {
		const inflated: string[] = [];
		const archive = await readVoiceArchive(blobOf("archive/published-voice.zip"), {
			index: false,
			inflateTo: async (stream, entry) => {
				inflated.push(entry);
				return new Response(stream).blob();
			},
		});
		expect(inflated).toEqual(["Aurora/Aurora.pth"]);
		expect(archive.index).toBeUndefined();
		expect(await bytes(archive.model.source)).toEqual(MODEL);
	});

	it("refuses to guess between two models, and takes the one named", async () => {
		const error = await refusal(readVoiceArchive(blobOf("archive/two-models.zip")));
		expect(error.message).toBe(
			"The archive holds several models (VoiceA/VoiceA.pth, VoiceB/VoiceB.pth): name the one to use",
		);
		const chosen = await readVoiceArchive(blobOf("archive/two-models.zip"), { model: "VoiceB.pth" });
		expect(await bytes(chosen.model.source)).toEqual(bytesOf("v2-f0-48k.pth"));
		expect(chosen.index).toBeUndefined();
		const missing = await refusal(readVoiceArchive(blobOf("archive/two-models.zip"), { model: "VoiceC.pth" }));
		expect(missing.message).toContain("holds no model named VoiceC.pth");
	});

	it("refuses an entry whose bytes are not what the archive's directory says", async () => {
		const stored = await refusal(readVoiceArchive(damaged("archive/stored-zip64.zip", "Aurora/Aurora.pth", 5000)));
		expect(stored.message).toBe("The archive's Aurora/Aurora.pth is damaged: its CRC-32 does not match");
		const deflated = await refusal(
			readVoiceArchive(damaged("archive/published-voice.zip", "Aurora/added_IVF13_Flat_nprobe_1_Aurora_v2.index", 900)),
		);
		expect(deflated.message).toMatch(
			/^The archive's Aurora\/added_IVF13_Flat_nprobe_1_Aurora_v2\.index (is damaged|cannot be inflated)/,
		);
	});

	it("refuses an encrypted entry, another compression method and an entry over its role's limit", async () => {
		const encrypted = patched((view, at) => view.setUint16(at + 8, view.getUint16(at + 8, true) | 1, true));
		expect((await refusal(readVoiceArchive(encrypted))).message).toBe(
			"The archive's Aurora/Aurora.pth is encrypted: extract it first",
		);
		const lzma = patched((view, at) => view.setUint16(at + 10, 14, true));
		expect((await refusal(readVoiceArchive(lzma))).message).toMatch(
			/^The archive's Aurora\/Aurora\.pth is compressed with a method this reader does not take \(14;/,
		);
		const huge = patched((view, at) => view.setUint32(at + 24, 200_000_001, true));
		expect((await refusal(readVoiceArchive(huge))).message).toBe(
			"The archive's Aurora/Aurora.pth is 200000001 bytes, over the model limit of 200000000",
		);
	});

	it("tells a checkpoint or another file from an archive", async () => {
		expect((await refusal(readVoiceArchive(blobOf("v2-f0-40k.pth")))).message).toBe(
			"This is an RVC checkpoint (.pth) itself, not an archive of one: upload it as the model",
		);
		expect((await refusal(readVoiceArchive(blobOf("index/voice-v2-768.index")))).message).toMatch(
			/^The archive cannot be read: no zip end of central directory record: the archive is truncated or not a zip$/,
		);
		const cut = bytesOf("archive/published-voice.zip").subarray(0, 200_000);
		expect((await refusal(readVoiceArchive(new Blob([cut])))).message).toMatch(
			/^The archive cannot be read: no zip end of central directory record: the archive is truncated or not a zip$/,
		);
	});

	it("has voices.create refuse an archive given as the model, before sending anything", async () => {
		const client = new VoiceConversionClient({
			baseUrl: "http://127.0.0.1:9",
			clientId: "id",
			clientSecret: "secret",
			fetch: async () => {
				throw new Error("nothing should be sent");
			},
		});
		const error = await refusal(
			client.voices.create({ name: "Zipped", files: { model: { source: blobOf("archive/published-voice.zip") } } }),
		);
		expect(error.message).toMatch(
			/^The model file is a zip archive holding Aurora\/Aurora\.pth, .*: read it with readVoiceArchive \(the CLI: voices create --archive\)$/,
		);
	});

	it("has the runner name what an archive uploaded as the model holds", () => {
		expect(() => readRvcCheckpoint(bytesOf("archive/published-voice.zip"))).toThrow(
			/^a zip archive holding Aurora\/Aurora\.pth, Aurora\/added_IVF13_Flat_nprobe_1_Aurora_v2\.index, Aurora\/trained_IVF4_Flat_nprobe_1_Aurora_v2\.index, not an RVC checkpoint: upload the \.pth inside as the model/,
		);
	});
});
