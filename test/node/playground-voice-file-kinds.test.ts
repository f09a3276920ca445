/**
 * The playground's recogniser of voice files (`public/playground/voice-file-kinds.js`, plain JavaScript for the
 * browser) against the one the API, SDK and CLI share (`src/contracts/voice-file-kinds.ts`): on the same bytes, every
 * fixture voice file and files written here by real tools (sox, lame, flac, and Chromium's image encoders), each cut short at every length
 * of the head and with its leading bytes changed, and arbitrary bytes, both give the same kind and accept the same
 * bytes for each role; the page's words for a refusal are the SDK's.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recogniseVoiceFile, VOICE_FILE_HEAD_BYTES, voiceFileKindFor } from "../../src/contracts/voice-file-kinds.ts";
import {
	CreateVoiceBody,
	VOICE_FILE_DESCRIPTIONS,
	VOICE_FILE_KINDS,
	VOICE_FILE_ROLE_VALUES,
	VOICE_LIMITS,
	type VoiceFileRoleName,
} from "../../src/contracts/voices.ts";
import { validationError } from "../../src/http/errors.ts";
import { ROOT } from "../support/local-stack.ts";

/** The playground's module, as the browser loads it (plain JavaScript, so typed here by what the test uses). */
interface PlaygroundVoiceFileKinds {
	VOICE_FILE_HEAD_BYTES: number;
	VOICE_FILE_KINDS: Record<string, string[]>;
	VOICE_FILE_DESCRIPTIONS: Record<string, string>;
	recogniseVoiceFile(head: Uint8Array): string | null;
	voiceFileKindFor(role: string, head: Uint8Array): string | null;
	voiceFileProblems(
		files: Record<string, File>,
	): Promise<{ role: string; message: string; field: { field: string; message: string } }[]>;
	VOICE_FILE_MAX_BYTES: Record<string, number>;
	voiceFileSizeProblems(
		files: Record<string, { name: string; size: number }>,
	): { role: string; message: string; field: { field: string; message: string } }[];
}
const playground: PlaygroundVoiceFileKinds = await import(
	new URL("../../public/playground/voice-file-kinds.js", import.meta.url).href
);

const FIXTURES = path.join(ROOT, "gpu-runner/test/rvc/fixtures");
let tempDir: string;
/** Heads of real files, by where they came from. */
const heads = new Map<string, Uint8Array>();

async function filesUnder(dir: string): Promise<string[]> {
	const entries = await readdir(dir, { withFileTypes: true });
	const nested = await Promise.all(
		entries.map((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)])),
	);
	return nested.flat();
}

const headOf = async (file: string) => new Uint8Array((await readFile(file)).subarray(0, VOICE_FILE_HEAD_BYTES));

beforeAll(async () => {
	tempDir = await mkdtemp(path.join(os.tmpdir(), "playground-kinds-"));
	for (const file of await filesUnder(FIXTURES)) heads.set(path.relative(ROOT, file), await headOf(file));
	const made = (name: string) => path.join(tempDir, name);
	execFileSync("sox", ["-n", "-r", "16000", "-c", "1", "-b", "16", made("tone.wav"), "synth", "0.5", "sine", "220"]);
	execFileSync("lame", ["--quiet", made("tone.wav"), made("tone.mp3")]);
	execFileSync("lame", ["--quiet", "--id3v2-only", "--tt", "tone", made("tone.wav"), made("tagged.mp3")]);
	execFileSync("flac", ["--silent", "-o", made("tone.flac"), made("tone.wav")]);
	// Images as the browser the page runs in encodes them (Debian's Chromium, as the playground's browser test drives).
	const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--headless", "--no-sandbox"] });
	try {
		const page = await browser.newPage();
		const images = await page.evaluate(async () => {
			const canvas = new OffscreenCanvas(8, 8);
			const context = canvas.getContext("2d") as OffscreenCanvasRenderingContext2D;
			context.fillStyle = "#c81e1e";
			context.fillRect(0, 0, 8, 8);
			const encoded: Record<string, number[]> = {};
			for (const type of ["png", "jpeg", "webp"]) {
				const blob = await canvas.convertToBlob({ type: `image/${type}` });
				encoded[type] = Array.from(new Uint8Array(await blob.arrayBuffer()));
			}
			return encoded;
		});
		for (const [type, bytes] of Object.entries(images)) {
			heads.set(`red.${type}`, Uint8Array.from(bytes).subarray(0, VOICE_FILE_HEAD_BYTES));
		}
	} finally {
		await browser.close();
	}
	for (const name of ["tone.wav", "tone.mp3", "tagged.mp3", "tone.flac"]) {
		heads.set(name, await headOf(made(name)));
	}
}, 60_000);

afterAll(async () => {
	if (tempDir) await rm(tempDir, { recursive: true, force: true });
});

/** Deterministic arbitrary bytes (a linear congruential generator), so a failure can be run again. */
function arbitraryBytes(seed: number, length: number): Uint8Array {
	const bytes = new Uint8Array(length);
	let state = seed;
	for (let i = 0; i < length; i++) {
		state = (state * 1103515245 + 12345) >>> 0;
		bytes[i] = state >>> 24;
	}
	return bytes;
}

/** A head, cut short at every length and with each of its first 16 bytes changed (one at a time). */
function variants(head: Uint8Array): Uint8Array[] {
	const out: Uint8Array[] = [];
	for (let length = 0; length <= head.length; length++) out.push(head.subarray(0, length));
	for (let at = 0; at < Math.min(16, head.length); at++) {
		for (const change of [0x01, 0x80, 0xff]) {
			const changed = head.slice();
			changed[at] = (changed[at] as number) ^ change;
			out.push(changed);
		}
	}
	return out;
}

function expectSameAnswers(bytes: Uint8Array, what: string) {
	expect(playground.recogniseVoiceFile(bytes), what).toBe(recogniseVoiceFile(bytes));
	for (const role of VOICE_FILE_ROLE_VALUES) {
		expect(playground.voiceFileKindFor(role, bytes), `${what} as ${role}`).toBe(voiceFileKindFor(role, bytes));
	}
}

describe("the playground's voice file recogniser", () => {
	it("holds the API's roles, kinds, descriptions and head length", () => {
		expect(playground.VOICE_FILE_HEAD_BYTES).toBe(VOICE_FILE_HEAD_BYTES);
		expect(playground.VOICE_FILE_KINDS).toEqual(VOICE_FILE_KINDS);
		expect(playground.VOICE_FILE_DESCRIPTIONS).toEqual(VOICE_FILE_DESCRIPTIONS);
	});

	it("recognises every real voice file as the API does, whole, cut short and with changed leading bytes", () => {
		// Every kind any role takes is among the real files, so each branch of both recognisers is reached.
		const kinds = new Set([...heads.values()].map((head) => recogniseVoiceFile(head)));
		expect([...kinds].filter(Boolean).sort()).toEqual(Object.values(VOICE_FILE_KINDS).flat().sort());
		expect(kinds.has(null)).toBe(true); // manifest.json, generate.py, .f32 tensors
		let compared = 0;
		for (const [name, head] of heads) {
			for (const bytes of variants(head)) {
				expectSameAnswers(bytes, `${name} (${Buffer.from(bytes).toString("hex")})`);
				compared++;
			}
		}
		expect(compared).toBeGreaterThan(1000);
	});

	it("gives the API's answer on arbitrary bytes and on heads made to be near a kind", () => {
		for (let seed = 1; seed <= 2000; seed++) {
			const bytes = arbitraryBytes(seed, seed % (VOICE_FILE_HEAD_BYTES + 1));
			expectSameAnswers(bytes, `seed ${seed}`);
		}
		// MPEG frame headers of every second and third byte; ONNX-like protobuf starts of every version byte.
		for (let b = 0; b < 256; b++) {
			for (let c = 0; c < 256; c += 15) expectSameAnswers(new Uint8Array([0xff, b, c, 0]), `mpeg ff ${b} ${c}`);
			expectSameAnswers(new Uint8Array([0x08, b, 0x12, 0x04, 0x74, 0x65, 0x73, 0x74, 0x3a, 0x01]), `onnx ${b}`);
		}
		const text = (s: string) => new TextEncoder().encode(s);
		for (const head of [
			"RF64\0\0\0\0WAVEds64",
			"RIFF\0\0\0\0WEBPVP8 ",
			"ID3\x04\0",
			"IxF2",
			"IxFI",
			"IwFl",
			"PK\x03\x04",
		]) {
			expectSameAnswers(text(head), JSON.stringify(head));
		}
	});

	it("refuses a file that is not what its role takes, in the SDK's words, and leaves an empty one to the API", async () => {
		const file = (name: string, bytes: Uint8Array<ArrayBuffer> | string) => new File([bytes], name);
		const model = await readFile(path.join(FIXTURES, "v2-f0-40k.pth"));
		const problems = await playground.voiceFileProblems({
			model: file("model.pth", new Uint8Array(model)),
			index: file("voice.index", "these bytes are no index"),
			image: file("portrait.png", ""),
			sample: file("sample.wav", new Uint8Array(model.subarray(0, 100))),
		});
		const said = (role: VoiceFileRoleName, name: string) => ({
			role,
			message: `The ${role} file is not ${VOICE_FILE_DESCRIPTIONS[role]} (recognised by its bytes, not its name): ${name}`,
			field: { field: `files.${role}`, message: `must be ${VOICE_FILE_DESCRIPTIONS[role]}` },
		});
		expect(problems).toEqual([said("index", "voice.index"), said("sample", "sample.wav")]);
	});

	it("refuses a file larger than its role takes in the API's words, and lets one at the limit through", () => {
		expect(playground.VOICE_FILE_MAX_BYTES).toEqual(VOICE_LIMITS.maxBytes);
		// The API's refusal of a voice declaring each file one byte over its limit.
		const over = (role: VoiceFileRoleName) => ({
			file_name: `${role}.bin`,
			size_bytes: VOICE_LIMITS.maxBytes[role] + 1,
		});
		const declared = { model: over("model"), index: over("index"), image: over("image"), sample: over("sample") };
		const parsed = CreateVoiceBody.safeParse({ name: "Too large", files: declared });
		if (parsed.success) throw new Error("the API took files over their limits");
		const refusal = validationError(parsed.error);
		const files = Object.fromEntries(
			Object.entries(declared).map(([role, file]) => [role, { name: file.file_name, size: file.size_bytes }]),
		);
		const problems = playground.voiceFileSizeProblems(files);
		expect(problems.map((problem) => problem.field)).toEqual(refusal.errors);
		expect(problems[0]?.message).toBe(`${refusal.message} (model.bin is ${VOICE_LIMITS.maxBytes.model + 1} bytes)`);
		expect(problems.map((problem) => problem.role)).toEqual(VOICE_FILE_ROLE_VALUES);
		// At the limit the API registers the voice, and the page lets it through.
		const atLimit = Object.fromEntries(
			VOICE_FILE_ROLE_VALUES.map((role) => [role, { name: `${role}.bin`, size: VOICE_LIMITS.maxBytes[role] }]),
		);
		expect(playground.voiceFileSizeProblems(atLimit)).toEqual([]);
		const registered = CreateVoiceBody.safeParse({
			name: "At the limit",
			files: Object.fromEntries(
				VOICE_FILE_ROLE_VALUES.map((role) => [
					role,
					{ file_name: `${role}.bin`, size_bytes: VOICE_LIMITS.maxBytes[role] },
				]),
			),
		});
		expect(registered.success).toBe(true);
	});

	it("refuses an empty file in the API's words", () => {
		const empty = Object.fromEntries(
			VOICE_FILE_ROLE_VALUES.map((role) => [role, { file_name: `${role}.bin`, size_bytes: 0 }]),
		);
		const parsed = CreateVoiceBody.safeParse({ name: "Empty", files: empty });
		if (parsed.success) throw new Error("the API took empty files");
		const refusal = validationError(parsed.error);
		expect(refusal.errors).toContainEqual({
			field: "files.model.size_bytes",
			message: "must be at least 1 byte: the model file is empty",
		});
		const problems = playground.voiceFileSizeProblems(
			Object.fromEntries(VOICE_FILE_ROLE_VALUES.map((role) => [role, { name: `${role}.bin`, size: 0 }])),
		);
		expect(problems.map((problem) => problem.field)).toEqual(refusal.errors);
		expect(problems[0]?.message).toBe(`${refusal.message} (model.bin is 0 bytes)`);
	});
});
