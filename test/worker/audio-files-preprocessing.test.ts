/**
 * Preprocessing end to end. Real path: register, PUT through the Worker, the real `audio-uploaded` queue delivers to
 * the consumer (polled with a bounded wait). Direct path: `createMessageBatch` / `getQueueResult` for acks, retries,
 * duplicates and dead letters.
 */
import { createExecutionContext, createMessageBatch, getQueueResult, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
	PREPROCESSING_LISTENERS,
	type PreprocessingListener,
	type PreprocessingOutcome,
} from "../../src/audio-files/preprocessing-listeners.ts";
import { resendStalePreprocessing } from "../../src/audio-files/send-audio-uploaded.ts";
import type { AudioFile } from "../../src/contracts/audio-files.ts";
import worker from "../../src/index.ts";
import { makeFlac } from "../support/flac-generator.ts";
import { encodeMp3, makeMp3Frames } from "../support/mp3-generator.ts";
import { asciiBytes, concatBytes } from "../support/pcm.ts";
import { makeWav } from "../support/wav-generator.ts";
import { type Api, getFile, objectKeyOf, registerFile, upload, waitForPreprocessing } from "./audio-files-helpers.ts";
import { runSql, signedInClient } from "./helpers.ts";

/** Adds a listener after the real ones; returns a function that removes it. */
function observePreprocessing(listener: PreprocessingListener): () => void {
	PREPROCESSING_LISTENERS.push(listener);
	return () => {
		const index = PREPROCESSING_LISTENERS.indexOf(listener);
		if (index >= 0) PREPROCESSING_LISTENERS.splice(index, 1);
	};
}

const outcomes: PreprocessingOutcome[] = [];
const unregister = observePreprocessing(async (_env, outcome) => {
	outcomes.push(outcome);
});
afterAll(() => unregister());

interface Case {
	name: string;
	mimeType: string;
	bytes: Uint8Array;
	expected: { format: string; sample_rate: number; channels: number; duration: number };
}

const wavCase = (name: string, o: Parameters<typeof makeWav>[0]): Case => ({
	name,
	mimeType: "audio/wav",
	bytes: makeWav(o),
	expected: { format: "wav", sample_rate: o.sampleRate, channels: o.channels, duration: o.frames / o.sampleRate },
});

const vbr = (n: number, rates: number[]) => Array.from({ length: n }, (_, i) => rates[i % rates.length] as number);
const lameFrames = (samples: number, spf: number) => Math.ceil((samples + 1152) / spf);

const cases: Case[] = [
	wavCase("WAV PCM 8-bit mono", { sampleRate: 22_050, channels: 1, frames: 55_125, encoding: "pcm", bits: 8 }),
	wavCase("WAV PCM 16-bit stereo with an odd LIST chunk", {
		sampleRate: 44_100,
		channels: 2,
		frames: 44_100 * 3 + 17,
		encoding: "pcm",
		bits: 16,
		extraChunks: [{ id: "LIST", body: new Uint8Array(27) }],
	}),
	wavCase("WAV PCM 24-bit stereo", { sampleRate: 48_000, channels: 2, frames: 96_000, encoding: "pcm", bits: 24 }),
	wavCase("WAV PCM 32-bit mono", { sampleRate: 16_000, channels: 1, frames: 48_000, encoding: "pcm", bits: 32 }),
	wavCase("WAV float 32-bit stereo", { sampleRate: 44_100, channels: 2, frames: 88_200, encoding: "float", bits: 32 }),
	wavCase("WAV float 64-bit extensible", {
		sampleRate: 48_000,
		channels: 1,
		frames: 72_000,
		encoding: "float",
		bits: 64,
		extensible: true,
	}),
	wavCase("WAV PCM 16-bit extensible", {
		sampleRate: 32_000,
		channels: 2,
		frames: 64_000,
		encoding: "pcm",
		bits: 16,
		extensible: true,
	}),
	{
		name: "FLAC 16-bit stereo",
		mimeType: "audio/flac",
		bytes: makeFlac({ sampleRate: 44_100, channels: 2, bitsPerSample: 16, frames: 44_100 * 3 + 100 }),
		expected: { format: "flac", sample_rate: 44_100, channels: 2, duration: (44_100 * 3 + 100) / 44_100 },
	},
	{
		name: "FLAC 24-bit mono with an unknown total",
		mimeType: "audio/x-flac",
		bytes: makeFlac({ sampleRate: 48_000, channels: 1, bitsPerSample: 24, frames: 100_000, unknownTotal: true }),
		expected: { format: "flac", sample_rate: 48_000, channels: 1, duration: 100_000 / 48_000 },
	},
	{
		name: "MP3 from lamejs, 44.1 kHz stereo CBR",
		mimeType: "audio/mpeg",
		bytes: encodeMp3({ sampleRate: 44_100, channels: 2, frames: 132_300, kbps: 128 }),
		expected: {
			format: "mp3",
			sample_rate: 44_100,
			channels: 2,
			duration: (lameFrames(132_300, 1152) * 1152) / 44_100,
		},
	},
	{
		name: "MP3 from lamejs, 22.05 kHz mono (MPEG-2)",
		mimeType: "audio/mp3",
		bytes: encodeMp3({ sampleRate: 22_050, channels: 1, frames: 55_125, kbps: 64 }),
		expected: { format: "mp3", sample_rate: 22_050, channels: 1, duration: (lameFrames(55_125, 576) * 576) / 22_050 },
	},
	{
		name: "MP3 VBR with Xing, LAME tag and ID3v2 (with footer)",
		mimeType: "audio/mpeg",
		bytes: makeMp3Frames({
			version: "1",
			sampleRate: 48_000,
			channels: 2,
			bitrates: vbr(125, [128, 192, 256, 320]),
			xing: { id: "Xing", lame: { delay: 576, padding: 1800 } },
			id3v2: { size: 2048, footer: true },
		}),
		expected: { format: "mp3", sample_rate: 48_000, channels: 2, duration: (125 * 1152 - 2376) / 48_000 },
	},
	{
		name: "MP3 VBR with VBRI (MPEG-2)",
		mimeType: "audio/mpeg",
		bytes: makeMp3Frames({
			version: "2",
			sampleRate: 24_000,
			channels: 2,
			bitrates: vbr(125, [64, 96, 128]),
			vbri: true,
		}),
		expected: { format: "mp3", sample_rate: 24_000, channels: 2, duration: (125 * 576) / 24_000 },
	},
	{
		name: "MP3 VBR without a header (MPEG-2.5, frame scan)",
		mimeType: "audio/mpeg",
		bytes: makeMp3Frames({
			version: "2.5",
			sampleRate: 11_025,
			channels: 1,
			bitrates: vbr(60, [16, 32, 48]),
			id3v1: true,
		}),
		expected: { format: "mp3", sample_rate: 11_025, channels: 1, duration: (60 * 576) / 11_025 },
	},
	{
		name: "MP3 cut 100 bytes into its 61st frame, whose Xing header counts 125",
		mimeType: "audio/mpeg",
		bytes: cutMp3(60, 100),
		// A decoder stops at the last whole frame and removes the encoder delay and its own 529 samples.
		expected: { format: "mp3", sample_rate: 44_100, channels: 2, duration: (60 * 1152 - 576 - 529) / 44_100 },
	},
];

/** The first `frames` whole frames of a 125-frame VBR stream with Xing and LAME tags, and `extra` bytes of the next. */
function cutMp3(frames: number, extra: number): Uint8Array {
	const stream = (bitrates: number[]) =>
		makeMp3Frames({
			version: "1",
			sampleRate: 44_100,
			channels: 2,
			bitrates,
			xing: { id: "Xing", lame: { delay: 576, padding: 1800 } },
		});
	const bitrates = vbr(125, [128, 192, 256]);
	// Frames do not depend on the ones after them, so the shorter stream is a prefix of the whole one.
	return stream(bitrates).subarray(0, stream(bitrates.slice(0, frames)).byteLength + extra);
}

const failures: { name: string; mimeType: string; bytes: Uint8Array; code: string; message: RegExp }[] = [
	{ name: "an empty file", mimeType: "audio/wav", bytes: new Uint8Array(0), code: "empty_file", message: /empty/ },
	{
		name: "a WAV whose header declares 4,000,000,000 Hz",
		mimeType: "audio/wav",
		bytes: (() => {
			const b = makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 });
			new DataView(b.buffer).setUint32(24, 4_000_000_000, true);
			return b;
		})(),
		code: "unsupported_format",
		message: /sample rate of 4000000000 Hz; rates from 4000 to 768000 Hz are supported/,
	},
	{
		name: "a WAV cut inside its header",
		mimeType: "audio/wav",
		bytes: makeWav({ sampleRate: 8000, channels: 1, frames: 8000, encoding: "pcm", bits: 16 }).subarray(0, 24),
		code: "truncated",
		message: /fmt chunk/,
	},
	{
		name: "OGG bytes under a WAV type",
		mimeType: "audio/wav",
		bytes: concatBytes([asciiBytes("OggS\0\x02"), new Uint8Array(4000)]),
		code: "unsupported_format",
		message: /Ogg/,
	},
	{
		name: "plain text under a WAV type",
		mimeType: "audio/wav",
		bytes: asciiBytes("This is a shopping list, not a recording.\nMilk\nEggs\n"),
		code: "unsupported_format",
		message: /plain text/,
	},
	{
		name: "a WAV of zero duration",
		mimeType: "audio/wav",
		bytes: makeWav({ sampleRate: 8000, channels: 1, frames: 0, encoding: "pcm", bits: 16 }),
		code: "zero_duration",
		message: /no audio samples/,
	},
	{
		name: "a FLAC whose STREAMINFO is corrupted",
		mimeType: "audio/flac",
		bytes: (() => {
			const b = makeFlac({ sampleRate: 8000, channels: 1, bitsPerSample: 16, frames: 8000 });
			b.fill(0, 18, 21); // sample rate 0
			return b;
		})(),
		code: "corrupted",
		message: /sample rate of 0/,
	},
];

describe("preprocessing through the real queue", () => {
	let api: Api;
	let accountId: string;
	const ids = new Map<string, string>();

	beforeAll(async () => {
		const session = await signedInClient();
		api = session.api;
		accountId = session.client.accountId;
		// Upload everything first, so that one queue batch timeout covers all of them.
		for (const c of [...cases, ...failures]) {
			const file = await registerFile(api, `${c.name}.bin`, c.mimeType);
			const response = await upload(file, c.bytes);
			expect(response.status, c.name).toBe(200);
			ids.set(c.name, file.id);
		}
	});

	it.each(cases)("$name becomes ready with its format and duration", async (c) => {
		const file = await waitForPreprocessing(api, ids.get(c.name) as string);
		expect(file).toMatchObject({
			upload_status: "uploaded",
			preprocessing_status: "ready",
			preprocessing_error: null,
			preprocessing_error_code: null,
			format: c.expected.format,
			sample_rate: c.expected.sample_rate,
			channels: c.expected.channels,
			size_bytes: c.bytes.byteLength,
		});
		expect(Math.abs((file.duration_seconds as number) - c.expected.duration)).toBeLessThan(0.01);
		expect(outcomes).toContainEqual({ audioFileId: file.id, accountId, outcome: "ready" });
	});

	it.each(failures)("$name fails with $code and a clear reason", async (c) => {
		const file = await waitForPreprocessing(api, ids.get(c.name) as string);
		expect(file).toMatchObject({ preprocessing_status: "failed", preprocessing_error_code: c.code, format: null });
		expect(file.preprocessing_error).toMatch(c.message);
		expect(outcomes).toContainEqual({
			audioFileId: file.id,
			accountId,
			outcome: "failed",
			errorCode: c.code,
			errorMessage: file.preprocessing_error,
		});
	});

	it("resends files whose message was lost (cron safety net)", async () => {
		const file = await registerFile(api, "lost.wav", "audio/wav");
		const bytes = makeWav({ sampleRate: 8000, channels: 1, frames: 12_000, encoding: "pcm", bits: 16 });
		// Stored and marked uploaded without any message, as if the send had failed two minutes ago.
		await env.BUCKET.put(objectKeyOf(accountId, file.id), bytes);
		const twoMinutesAgo = new Date(Date.now() - 120_000).toISOString();
		await runSql([
			`UPDATE audio_files SET upload_status = 'uploaded', uploaded_at = '${twoMinutesAgo}', size_bytes = ${bytes.byteLength}, updated_at = '${twoMinutesAgo}' WHERE id = '${file.id}'`,
		]);
		expect(await resendStalePreprocessing(env)).toBeGreaterThanOrEqual(1);
		expect(await waitForPreprocessing(api, file.id)).toMatchObject({
			preprocessing_status: "ready",
			duration_seconds: 1.5,
		});
	});
});

describe("the audio-uploaded consumer", () => {
	/** A file uploaded and `pending` with no message sent, so only the batches below process it. */
	async function pendingFile(bytes: Uint8Array) {
		const { api, client } = await signedInClient();
		const file = await registerFile(api, "direct.wav", "audio/wav");
		await env.BUCKET.put(objectKeyOf(client.accountId, file.id), bytes);
		const now = new Date().toISOString();
		await runSql([
			`UPDATE audio_files SET upload_status = 'uploaded', uploaded_at = '${now}', size_bytes = ${bytes.byteLength}, updated_at = '${now}' WHERE id = '${file.id}'`,
		]);
		return { api, client, file };
	}

	async function deliver(queue: string, body: unknown, attempts = 1) {
		const batch = createMessageBatch(queue, [{ id: crypto.randomUUID(), timestamp: new Date(), attempts, body }]);
		const ctx = createExecutionContext();
		await worker.queue(batch, env, ctx);
		await waitOnExecutionContext(ctx);
		return { result: await getQueueResult(batch, ctx), messageId: batch.messages[0]?.id as string };
	}

	const bytes = makeWav({ sampleRate: 24_000, channels: 2, frames: 60_000, encoding: "pcm", bits: 16 });

	it("acks, records the facts, and notifies; a duplicate changes nothing but repeats the notification", async () => {
		const { api, file } = await pendingFile(bytes);
		const first = await deliver("audio-uploaded", { audio_file_id: file.id });
		expect(first.result.explicitAcks).toEqual([first.messageId]);
		expect(first.result.retryMessages).toEqual([]);
		const ready = await getFile(api, file.id);
		expect(ready).toMatchObject({ preprocessing_status: "ready", format: "wav", duration_seconds: 2.5, channels: 2 });
		const [row] = (await env.DB.prepare("SELECT updated_at FROM audio_files WHERE id = ?").bind(file.id).all()).results;

		const notified = outcomes.filter((o) => o.audioFileId === file.id).length;
		const duplicate = await deliver("audio-uploaded", { audio_file_id: file.id }, 2);
		expect(duplicate.result.explicitAcks).toEqual([duplicate.messageId]);
		expect(await getFile(api, file.id)).toEqual(ready);
		const [again] = (await env.DB.prepare("SELECT updated_at FROM audio_files WHERE id = ?").bind(file.id).all())
			.results;
		expect(again).toEqual(row);
		expect(outcomes.filter((o) => o.audioFileId === file.id)).toHaveLength(notified + 1);
	});

	it("acks a malformed message and a late message for a deleted file without changing anything", async () => {
		expect((await deliver("audio-uploaded", { nope: true })).result.retryMessages).toEqual([]);
		const { api, file } = await pendingFile(bytes);
		expect((await api(`/api/v1/audio-files/${file.id}`, { method: "DELETE" })).status).toBe(200);
		const late = await deliver("audio-uploaded", { audio_file_id: file.id });
		expect(late.result.explicitAcks).toEqual([late.messageId]);
		const [row] = (
			await env.DB.prepare("SELECT preprocessing_status FROM audio_files WHERE id = ?").bind(file.id).all()
		).results;
		expect(row).toEqual({ preprocessing_status: "pending" });
	});

	it("retries while another consumer holds a fresh claim, and takes over an abandoned one", async () => {
		const { api, file } = await pendingFile(bytes);
		const now = new Date().toISOString();
		await runSql([
			`UPDATE audio_files SET preprocessing_status = 'processing', updated_at = '${now}' WHERE id = '${file.id}'`,
		]);
		const busy = await deliver("audio-uploaded", { audio_file_id: file.id });
		expect(busy.result.retryMessages).toEqual([{ msgId: busy.messageId }]);
		expect((await getFile(api, file.id)).preprocessing_status).toBe("processing");

		const longAgo = new Date(Date.now() - 10 * 60_000).toISOString();
		await runSql([`UPDATE audio_files SET updated_at = '${longAgo}' WHERE id = '${file.id}'`]);
		const takeover = await deliver("audio-uploaded", { audio_file_id: file.id }, 2);
		expect(takeover.result.explicitAcks).toEqual([takeover.messageId]);
		expect((await getFile(api, file.id)).preprocessing_status).toBe("ready");
	});

	it("gives the claim back and retries when storage fails", async () => {
		const { api, file } = await pendingFile(bytes);
		const get = vi.spyOn(env.BUCKET, "get").mockRejectedValueOnce(new Error("R2 unavailable"));
		try {
			const failed = await deliver("audio-uploaded", { audio_file_id: file.id });
			expect(get).toHaveBeenCalled();
			expect(failed.result.retryMessages).toEqual([{ msgId: failed.messageId }]);
			expect((await getFile(api, file.id)).preprocessing_status).toBe("pending");
		} finally {
			get.mockRestore();
		}
		await deliver("audio-uploaded", { audio_file_id: file.id }, 2);
		expect((await getFile(api, file.id)).preprocessing_status).toBe("ready");
	});

	it("retries when a listener fails, and notifies again on the retry", async () => {
		const { file } = await pendingFile(bytes);
		let calls = 0;
		const remove = observePreprocessing(async (_env, outcome) => {
			if (outcome.audioFileId !== file.id) return;
			calls++;
			if (calls === 1) throw new Error("conversions unavailable");
		});
		try {
			const first = await deliver("audio-uploaded", { audio_file_id: file.id });
			expect(first.result.retryMessages).toEqual([{ msgId: first.messageId }]);
			const retry = await deliver("audio-uploaded", { audio_file_id: file.id }, 2);
			expect(retry.result.explicitAcks).toEqual([retry.messageId]);
			expect(calls).toBe(2);
		} finally {
			remove();
		}
	});

	it("fails a file whose message was dead-lettered, and notifies", async () => {
		const { api, client, file } = await pendingFile(bytes);
		const dead = await deliver("audio-uploaded-dlq", { audio_file_id: file.id });
		expect(dead.result.explicitAcks).toEqual([dead.messageId]);
		const failed: AudioFile = await getFile(api, file.id);
		expect(failed).toMatchObject({ preprocessing_status: "failed", preprocessing_error_code: "internal_error" });
		expect(outcomes).toContainEqual(
			expect.objectContaining({
				audioFileId: file.id,
				accountId: client.accountId,
				outcome: "failed",
				errorCode: "internal_error",
			}),
		);
	});
});
