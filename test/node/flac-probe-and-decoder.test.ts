/**
 * Preprocessing (the Worker's probe) and the runner's decoder must agree on where a FLAC file's audio ends: with tags
 * appended after the last frame (ID3v1, APE, ID3v2 with a footer), zero padding or other bytes, both find the whole
 * stream; a file cut short is refused by preprocessing rather than failing its conversions. Both
 * sides run here, so the test sits at the root (as the MP3 one does).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeSource } from "../../gpu-runner/src/audio/decode-source.ts";
import { sine } from "../../gpu-runner/test/helpers/signals.ts";
import { bytesOf, collect } from "../../gpu-runner/test/helpers/streams.ts";
import { missingToolsMessage, run } from "../../gpu-runner/test/helpers/tools.ts";
import { makeWav } from "../../gpu-runner/test/helpers/wav-files.ts";
import { memoryByteSource } from "../../src/audio-files/probe/byte-source.ts";
import { probeAudio } from "../../src/audio-files/probe/probe-audio.ts";
import { APPENDED_TAGS_MAX_BYTES, flacFrameHeaderAt } from "../../src/contracts/flac-stream-end.ts";
import { apeTag, id3v1, id3v2WithFooter } from "../support/appended-tags.ts";
import { makeFlac } from "../support/flac-generator.ts";
import { asciiBytes, concatBytes } from "../support/pcm.ts";

const toolsSkip = missingToolsMessage(["flac"]);

/** Where the stream's last frame starts: the last frame header, found by its CRC-8. */
function lastFrameStart(flac: Uint8Array): number {
	for (let at = flac.byteLength - 2; at > 0; at--) if (flacFrameHeaderAt(flac, at)) return at;
	throw new Error("no frame header");
}

describe.skipIf(toolsSkip !== undefined)(`FLAC ends, stated and decoded${toolsSkip ? ` (${toolsSkip})` : ""}`, () => {
	let dir: string;
	const files: Record<string, { bytes: Uint8Array; frames: number }> = {};

	beforeAll(() => {
		dir = mkdtempSync(join(tmpdir(), "flac-ends-"));
		// 16 kHz speech-like rates are where a lost 4096-sample frame (0.256 s) fails a conversion outright.
		writeFileSync(join(dir, "mono16k.wav"), makeWav([sine(220, 2, 16_000)], 16_000, { kind: "pcm", bits: 16 }));
		writeFileSync(join(dir, "mono32.wav"), makeWav([sine(220, 1.5, 16_000)], 16_000, { kind: "pcm", bits: 32 }));
		run("flac", ["-s", "-f", "-5", "-o", join(dir, "mono16k.flac"), join(dir, "mono16k.wav")]);
		// 32-bit samples: the runner's own (wide) decoder, not libFLAC.
		run("flac", ["-s", "-f", "-5", "-o", join(dir, "mono32.flac"), join(dir, "mono32.wav")]);
		files["flac -5, 16-bit 16 kHz"] = {
			bytes: new Uint8Array(readFileSync(join(dir, "mono16k.flac"))),
			frames: 32_000,
		};
		files["flac -5, 32-bit 16 kHz"] = { bytes: new Uint8Array(readFileSync(join(dir, "mono32.flac"))), frames: 24_000 };
		files["24-bit 8 kHz of unstated length"] = {
			bytes: makeFlac({ sampleRate: 8000, channels: 1, bitsPerSample: 24, frames: 12_345, unknownTotal: true }),
			frames: 12_345,
		};
	});
	afterAll(() => rmSync(dir, { recursive: true, force: true }));

	async function decodedFrames(bytes: Uint8Array): Promise<number> {
		return (await collect(decodeSource(bytesOf(bytes, 10_007)))).channels[0]?.length ?? 0;
	}

	it.each([
		["nothing", () => new Uint8Array(0)],
		["an ID3v1 tag", id3v1],
		["an APE tag and an ID3v1 tag", () => concatBytes([apeTag({ Title: "A title", Artist: "Someone" }), id3v1()])],
		["an ID3v2 tag with a footer", id3v2WithFooter],
		// Past the 4 KiB preprocessing first reads at the end.
		["an APE tag holding 20 KB of cover art", () => apeTag({ "Cover Art (Front)": "x".repeat(20_000) })],
		["4 KiB of zero bytes", () => new Uint8Array(4096)],
		// Neither tags nor padding: found by the last point where the frame's CRC-16 holds.
		["text a tool wrote after the audio", () => asciiBytes("not a tag, but text a tool wrote after the audio")],
		["3 KB of other bytes", () => Uint8Array.from({ length: 3000 }, (_, i) => (i * 131 + 7) % 251)],
	])("states and decodes every frame of a FLAC followed by %s", async (_, after) => {
		for (const [name, file] of Object.entries(files)) {
			const bytes = concatBytes([file.bytes, after()]);
			const probe = await probeAudio(memoryByteSource(bytes));
			expect(probe, name).toMatchObject({ ok: true, format: "flac" });
			if (!probe.ok) continue;
			expect(Math.round(probe.durationSeconds * probe.sampleRate), name).toBe(file.frames);
			expect(await decodedFrames(bytes), name).toBe(file.frames);
		}
	});

	it.each([
		["cut inside its last frame", (b: Uint8Array) => b.subarray(0, b.byteLength - 5)],
		["cut in half", (b: Uint8Array) => b.subarray(0, b.byteLength >> 1)],
		["cut just before its last frame", (b: Uint8Array) => b.subarray(0, lastFrameStart(b))],
		[
			"whose last frame is damaged",
			(b: Uint8Array) => {
				const damaged = b.slice();
				damaged[lastFrameStart(b) + 20] = (damaged[lastFrameStart(b) + 20] as number) ^ 0x10;
				return damaged;
			},
		],
	])("refuses a FLAC of stated length %s at preprocessing", async (_, damage) => {
		for (const name of ["flac -5, 16-bit 16 kHz", "flac -5, 32-bit 16 kHz"]) {
			const probe = await probeAudio(memoryByteSource(damage((files[name] as { bytes: Uint8Array }).bytes)));
			expect(probe, name).toMatchObject({ ok: false, code: "truncated" });
			expect(!probe.ok && probe.message, name).toMatch(/cut short/);
		}
	});

	it("refuses a FLAC followed by more than the allowance of bytes after its audio", async () => {
		const file = files["flac -5, 16-bit 16 kHz"] as { bytes: Uint8Array };
		const junk = Uint8Array.from({ length: 2 * APPENDED_TAGS_MAX_BYTES }, (_, i) => (i * 131 + 7) % 251);
		const probe = await probeAudio(memoryByteSource(concatBytes([file.bytes, junk])));
		expect(probe).toMatchObject({ ok: false, code: "truncated" });
		expect(!probe.ok && probe.message).toMatch(/does not end with a whole audio frame: .* or more than 1 MiB follows/);
	});
});
