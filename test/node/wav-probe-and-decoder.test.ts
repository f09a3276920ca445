/**
 * Preprocessing (the Worker's probe) and the runner's decoder must agree on every WAV: a file preprocessing calls
 * `ready` is one the runner decodes to the length preprocessing stated, and one the runner cannot decode is refused
 * at preprocessing, with its reason, not at each conversion. This test sits at the root because it runs both sides;
 * the runner itself never imports the Worker.
 */
import { describe, expect, it } from "vitest";
import { decodeSource } from "../../gpu-runner/src/audio/decode-source.ts";
import { bytesOf, collect } from "../../gpu-runner/test/helpers/streams.ts";
import { memoryByteSource } from "../../src/audio-files/probe/byte-source.ts";
import { probeAudio } from "../../src/audio-files/probe/probe-audio.ts";
import { asciiBytes, concatBytes } from "../support/pcm.ts";
import { makeWav, type WavOptions } from "../support/wav-generator.ts";

const STEREO: WavOptions = { sampleRate: 44_100, channels: 2, frames: 44_100, encoding: "pcm", bits: 16 };

/** The frames preprocessing states and the frames the runner decodes, fed in pieces as from the network. */
async function statedAndDecoded(bytes: Uint8Array) {
	const probe = await probeAudio(memoryByteSource(bytes));
	if (!probe.ok) throw new Error(`preprocessing refused the file: ${probe.message}`);
	const out = await collect(decodeSource(bytesOf(bytes, 4099)));
	return {
		stated: Math.round(probe.durationSeconds * probe.sampleRate),
		decoded: out.channels[0]?.length ?? 0,
		channels: [probe.channels, out.channels.length],
	};
}

/** Both sides refuse the file: preprocessing with its status, and the runner's decoder. */
async function refusedByBoth(bytes: Uint8Array) {
	const probe = await probeAudio(memoryByteSource(bytes));
	const decoded = collect(decodeSource(bytesOf(bytes, 4099))).then(
		() => "decoded",
		(error: Error) => error.message,
	);
	return { probe: probe.ok ? "ready" : probe.code, runner: await decoded };
}

/** A 16-bit stereo WAV with an odd-sized LIST chunk before its data, its pad byte left out as some writers do. */
function withoutPadByte(): Uint8Array {
	const list = { id: "LIST", body: asciiBytes("INFOISFT\x05\x00\x00\x00tool\x00") };
	expect(list.body.byteLength % 2).toBe(1);
	const padded = makeWav({ ...STEREO, extraChunks: [list] });
	const listAt = 12 + 8 + 16;
	const padAt = listAt + 8 + list.body.byteLength;
	expect(padded[padAt]).toBe(0);
	const bytes = concatBytes([padded.subarray(0, padAt), padded.subarray(padAt + 1)]);
	new DataView(bytes.buffer).setUint32(4, bytes.byteLength - 8, true);
	return bytes;
}

describe("WAV frames, stated and decoded", () => {
	const cases: [string, Uint8Array, number][] = [
		["a plain 16-bit stereo file", makeWav(STEREO), 44_100],
		["WAVE_FORMAT_EXTENSIBLE, 24-bit", makeWav({ ...STEREO, bits: 24, extensible: true }), 44_100],
		[
			"32-bit float with an odd LIST chunk and its pad byte",
			makeWav({ ...STEREO, encoding: "float", bits: 32, extraChunks: [{ id: "LIST", body: new Uint8Array(9) }] }),
			44_100,
		],
		[
			"RF64, sizes in its ds64 chunk (what broadcast recorders and ffmpeg -rf64 write)",
			makeWav({ ...STEREO, rf64: true }),
			44_100,
		],
		["RF64, extensible 24-bit", makeWav({ ...STEREO, bits: 24, extensible: true, rf64: true }), 44_100],
		["a streamed file whose data size is 0xFFFFFFFF", makeWav({ ...STEREO, dataSizeField: 0xffffffff }), 44_100],
		["a recorder's file whose data size was left at 0", makeWav({ ...STEREO, dataSizeField: 0 }), 44_100],
		["an odd LIST chunk without its pad byte", withoutPadByte(), 44_100],
		["a LIST chunk after the data", concatBytes([makeWav(STEREO), asciiBytes("LIST\x04\x00\x00\x00INFO")]), 44_100],
	];

	for (const [name, bytes, frames] of cases) {
		it(`${name}: preprocessing states what the runner decodes`, async () => {
			expect(await statedAndDecoded(bytes)).toEqual({ stated: frames, decoded: frames, channels: [2, 2] });
		});
	}

	it("refuses an empty data chunk on both sides, also with other chunks after it", async () => {
		const empty = makeWav({ ...STEREO, frames: 0 });
		expect(await refusedByBoth(empty)).toEqual({ probe: "zero_duration", runner: expect.stringMatching(/no audio/) });
		const emptyThenList = concatBytes([empty, asciiBytes("LIST\x04\x00\x00\x00INFO")]);
		new DataView(emptyThenList.buffer).setUint32(4, emptyThenList.byteLength - 8, true);
		expect((await refusedByBoth(emptyThenList)).probe).toBe("zero_duration");
	});

	it("refuses a file cut inside its data chunk on both sides", async () => {
		const whole = makeWav(STEREO);
		expect(await refusedByBoth(whole.subarray(0, whole.byteLength - 1000))).toEqual({
			probe: "truncated",
			runner: expect.stringMatching(/truncated/),
		});
	});

	it("refuses an RF64 file without its ds64 chunk on both sides", async () => {
		const bytes = makeWav({ ...STEREO, dataSizeField: 0xffffffff });
		bytes.set(asciiBytes("RF64"), 0);
		expect(await refusedByBoth(bytes)).toEqual({ probe: "corrupted", runner: expect.stringMatching(/ds64/) });
	});
});
