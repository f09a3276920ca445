/**
 * Every file of the hostile-audio corpus through the whole service: the Worker (wrangler's harness with D1, R2,
 * Queues and Durable Objects) and a real runner process with the `dsp` engine. Each conversion must end within a
 * bound, with the status and cause the corpus names; a completed one must have stated the file's true duration,
 * deliver exactly that much audio (or the preview's), and sound wherever its source does.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { missingToolsMessage } from "../../gpu-runner/test/helpers/tools.ts";
import { FAILURE_MESSAGES } from "../../src/conversions/failure-messages.ts";
import { type CorpusFile, hostileAudioCorpus } from "../support/hostile-audio-corpus.ts";
import { type ApiCall, callApi, type LocalStack, startLocalStack } from "../support/local-stack.ts";
import { type RunnerProcess, startRunner } from "../support/runner-process.ts";
import { readWav } from "../support/wav-reader.ts";

/** From the upload to `completed` or `failed`; generous, since the runner works through the corpus a few at a time. */
const TERMINAL_BOUND_MS = 150_000;
/** The service previews the first 10 seconds. */
const PREVIEW_SECONDS = 10;
/** Below this RMS (about -60 dBFS, offset removed) an output counts as silent. */
const SILENCE_RMS = 1e-3;

const toolsSkip = missingToolsMessage(["flac", "lame"]);
let stack: LocalStack;
let runner: RunnerProcess;
let token: string;
let voiceId: string;

interface Outcome {
	file: CorpusFile;
	audioFile: Record<string, unknown>;
	conversion: Record<string, unknown>;
	terminalAfterMs: number;
	output?: ReturnType<typeof readWav> & { rms: number };
}
const outcomes = new Map<string, Outcome>();

const api = <T = Record<string, unknown>>(route: string, init?: ApiCall) => callApi<T>(stack, token, route, init);

/** Registers the file, creates its conversion first (so it waits on preprocessing either way), then uploads. */
async function submit(file: CorpusFile) {
	const registered = await api<{ id: string; upload_url: string }>("/api/v1/audio-files", {
		method: "POST",
		body: { file_name: `${file.name}.bin`, mime_type: file.mimeType },
	});
	const conversion = await api<{ id: string }>("/api/v1/voice-conversions", {
		method: "POST",
		body: { audio_file_id: registered.id, voice_model_id: voiceId, use_preview: file.usePreview ?? false },
	});
	const put = await fetch(registered.upload_url, {
		method: "PUT",
		headers: { "Content-Type": file.mimeType },
		body: Buffer.from(file.bytes),
	});
	if (put.status !== 200) throw new Error(`${file.name}: upload answered ${put.status}`);
	return { audioFileId: registered.id, conversionId: conversion.id, uploadedAt: Date.now() };
}

function acRms(samples: Float32Array): number {
	if (samples.length === 0) return 0;
	const mean = samples.reduce((sum, x) => sum + x, 0) / samples.length;
	return Math.sqrt(samples.reduce((sum, x) => sum + (x - mean) ** 2, 0) / samples.length);
}

async function runCorpus(files: CorpusFile[]) {
	const pending = new Map(
		await Promise.all(files.map(async (file) => [file.name, { file, ...(await submit(file)) }] as const)),
	);
	while (pending.size > 0) {
		for (const [name, job] of pending) {
			const conversion = await api(`/api/v1/voice-conversions/${job.conversionId}`);
			const elapsed = Date.now() - job.uploadedAt;
			if (conversion.status !== "completed" && conversion.status !== "failed") {
				if (elapsed > TERMINAL_BOUND_MS) {
					throw new Error(`${name}: still ${conversion.status} after ${elapsed} ms\n${runner.log().slice(-3000)}`);
				}
				continue;
			}
			const outcome: Outcome = {
				file: job.file,
				conversion,
				audioFile: await api(`/api/v1/audio-files/${job.audioFileId}`),
				terminalAfterMs: elapsed,
			};
			if (conversion.status === "completed") {
				const wav = readWav(new Uint8Array(await (await fetch(String(conversion.output_url))).arrayBuffer()));
				outcome.output = { ...wav, rms: acRms(wav.samples) };
			}
			outcomes.set(name, outcome);
			pending.delete(name);
		}
		await new Promise((resolve) => setTimeout(resolve, 250));
	}
}

const corpus = toolsSkip ? [] : hostileAudioCorpus();

beforeAll(async () => {
	if (toolsSkip) return;
	stack = await startLocalStack();
	const client = await stack.provision("api");
	const runnerClient = await stack.provision("runner", client.accountId);
	token = await stack.token(client);
	voiceId = await stack.addVoice({ name: "Corpus", tags: ["e2e"], params: { formant_shift: 1 } });
	runner = startRunner(stack.url, runnerClient, { RUNNER_CAPACITY: "4" });
	await runCorpus(corpus);
}, TERMINAL_BOUND_MS + 120_000);

afterAll(async () => {
	await runner?.stop();
	await stack?.close();
});

describe.skipIf(toolsSkip !== undefined)(
	`hostile audio through the whole service${toolsSkip ? ` (${toolsSkip})` : ""}`,
	() => {
		it("holds at least 40 files, every one of them ending in time", () => {
			expect(corpus.length).toBeGreaterThanOrEqual(40);
			expect(outcomes.size).toBe(corpus.length);
			for (const outcome of outcomes.values()) expect(outcome.terminalAfterMs).toBeLessThan(TERMINAL_BOUND_MS);
		});

		it.each(corpus.map((file) => [file.name, file] as const))("%s", (name, file) => {
			const outcome = outcomes.get(name) as Outcome;
			const { conversion, audioFile } = outcome;
			const expected = file.expect;
			if (expected.status === "failed") {
				expect(conversion, name).toMatchObject({ status: "failed", output_url: null });
				expect(conversion.error_message, name).toBe(FAILURE_MESSAGES[expected.failure]);
				if (expected.preprocessing) {
					expect(audioFile).toMatchObject({
						preprocessing_status: "failed",
						preprocessing_error_code: expected.preprocessing,
					});
					expect(String(audioFile.preprocessing_error)).not.toBe("");
				} else {
					expect(audioFile, `${name}: the runner, not preprocessing, refuses it`).toMatchObject({
						preprocessing_status: "ready",
					});
				}
				return;
			}
			expect(conversion, `${name}: ${conversion.error_message}\n${audioFile.preprocessing_error}`).toMatchObject({
				status: "completed",
				error_message: null,
			});
			const output = outcome.output as NonNullable<Outcome["output"]>;
			const stated = Number(audioFile.duration_seconds);
			expect(Math.abs(stated - expected.seconds), `${name}: stated ${stated} s`).toBeLessThanOrEqual(
				expected.tolerance ?? 1e-6,
			);
			const statedOutput = file.usePreview ? Math.min(stated, PREVIEW_SECONDS) : stated;
			expect(
				Math.abs(output.durationSeconds - statedOutput),
				`${name}: output ${output.durationSeconds} s`,
			).toBeLessThanOrEqual(1 / output.sampleRate);
			expect({ sampleRate: output.sampleRate, channels: output.channels }).toEqual({
				sampleRate: expected.sampleRate,
				channels: expected.channels,
			});
			if (expected.audible) expect(output.rms, `${name}: output RMS`).toBeGreaterThan(SILENCE_RMS);
		});
	},
);
