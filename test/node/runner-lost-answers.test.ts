/**
 * A runner's final report whose answer is lost on the way back: the Worker applied it, the runner never heard so.
 * The runner (its own process, `dsp` and `rvc` engines) talks to the Worker (wrangler's test harness: D1, R2,
 * Queues, Durable Objects) through a real HTTP proxy that forwards every request, and drops the first answer of
 * each report after the Worker gave it: the connection is reset, or a 502 or 503 stands in for it. The runner must send
 * the very same report again, the Worker must take the repeat as the report it already applied (200, not
 * `lease_lost`), and the runner must count the job as what it was.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratchDir } from "../../gpu-runner/test/helpers/scratch.ts";
import { buildTinyContentVec, buildTinyRmvpe } from "../../gpu-runner/test/rvc/support/tiny-models.ts";
import { runAdmin } from "../../scripts/lib/admin-commands.ts";
import { type ApiCall, callApi, type LocalStack, ROOT, startLocalStack, uploadWav } from "../support/local-stack.ts";
import { type RunnerProcess, startRunner } from "../support/runner-process.ts";
import { makeWav } from "../support/wav-generator.ts";

const FIXTURES = path.join(ROOT, "gpu-runner/test/rvc/fixtures");
const MODEL = new Uint8Array(readFileSync(path.join(FIXTURES, "v2-f0-40k.pth")));

/** How the proxy loses the first answer to a report: the connection reset, or a gateway's status in its place. */
type Loss = "reset" | 502 | 503;

/** One report as it went through the proxy: what the runner sent, and what the Worker answered. */
interface PassedReport {
	path: string;
	body: string;
	status: number;
	answer: string;
	dropped: boolean;
}

/** Which reports to lose the first answer of, by the last segment of their path. */
const LOSSES: Record<string, Loss> = { complete: "reset", "voice-validation": 502, fail: 503 };
const REPORT = /^\/internal\/v1\/leases\/[^/]+\/(complete|fail|voice-validation)$/;

/** A forwarding proxy in front of `target` that loses the first answer of each report named in `LOSSES`. */
function startLossyProxy(target: string) {
	const reports: PassedReport[] = [];
	const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
		const chunks: Buffer[] = [];
		request.on("data", (chunk: Buffer) => chunks.push(chunk));
		request.on("end", async () => {
			const body = Buffer.concat(chunks);
			const headers = new Headers();
			for (const [name, value] of Object.entries(request.headers)) {
				if (["host", "connection", "content-length", "transfer-encoding"].includes(name) || value === undefined)
					continue;
				headers.set(name, Array.isArray(value) ? value.join(", ") : value);
			}
			let answer: Response;
			try {
				answer = await fetch(`${target}${request.url}`, {
					method: request.method,
					headers,
					body: request.method === "GET" || request.method === "HEAD" ? undefined : body,
					redirect: "manual",
				});
			} catch {
				response.socket?.destroy();
				return;
			}
			const answerBody = Buffer.from(await answer.arrayBuffer());
			const match = REPORT.exec(new URL(request.url ?? "/", target).pathname);
			if (match) {
				const loss = LOSSES[match[1] ?? ""];
				const dropped = loss !== undefined && !reports.some((r) => r.path === request.url);
				reports.push({
					path: request.url ?? "",
					body: body.toString("utf8"),
					status: answer.status,
					answer: answerBody.toString("utf8"),
					dropped,
				});
				if (dropped && loss === "reset") {
					response.socket?.destroy();
					return;
				}
				if (dropped) {
					response.writeHead(Number(loss), { "content-type": "text/plain" }).end("the answer was lost");
					return;
				}
			}
			const out: Record<string, string> = {};
			answer.headers.forEach((value, name) => {
				if (!["content-encoding", "content-length", "transfer-encoding", "connection"].includes(name))
					out[name] = value;
			});
			response.writeHead(answer.status, out).end(answerBody);
		});
	});
	return {
		reports,
		async listen(): Promise<string> {
			await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
			return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
		},
		close: () =>
			new Promise<void>((resolve) => {
				server.closeAllConnections();
				server.close(() => resolve());
			}),
	};
}

let stack: LocalStack;
let runner: RunnerProcess;
let token: string;
let lossy: ReturnType<typeof startLossyProxy>;

const api = <T = Record<string, unknown>>(route: string, init?: ApiCall) => callApi<T>(stack, token, route, init);

/** The runner's count of jobs by engine and outcome, from its metrics. */
async function jobsCounted(engine: string, outcome: string): Promise<number> {
	const line = runner
		.log()
		.split("\n")
		.find((entry) => entry.includes('"health server listening"'));
	const port = (JSON.parse(line ?? "{}") as { port?: number }).port;
	const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
	const found = text
		.split("\n")
		.find((entry) => entry.startsWith(`runner_jobs_total{engine="${engine}",outcome="${outcome}"}`));
	return found ? Number(found.split(" ").at(-1)) : 0;
}

async function until<T>(what: string, read: () => Promise<T | undefined>, timeoutMs = 90_000): Promise<T> {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		const value = await read();
		if (value !== undefined) return value;
		await new Promise((resolve) => setTimeout(resolve, 250));
	}
	throw new Error(`${what} did not happen; runner log:\n${runner.log().slice(-3000)}`);
}

/** The reports that passed for one lease's path ending in `operation`, once the runner sent the second. */
function reportsOf(operation: string) {
	const passed = lossy.reports.filter((report) => report.path.endsWith(`/${operation}`));
	return passed.length >= 2 ? passed : undefined;
}

beforeAll(async () => {
	stack = await startLocalStack();
	const credentials = await stack.provision("api");
	const runnerClient = await stack.provision("runner", credentials.accountId);
	token = await stack.token(credentials);
	const models = scratchDir("lost-answers-models");
	writeFileSync(path.join(models, "contentvec.onnx"), buildTinyContentVec());
	writeFileSync(path.join(models, "rmvpe.onnx"), buildTinyRmvpe({ pitchBin: 168 }));
	for (const name of ["contentvec", "rmvpe"]) {
		await runAdmin(["base-model", "set", name, path.join(models, `${name}.onnx`)], stack.admin);
	}
	lossy = startLossyProxy(stack.url);
	runner = startRunner(await lossy.listen(), runnerClient, {
		RUNNER_ENGINES: "dsp,rvc",
		RUNNER_CACHE_DIR: scratchDir("lost-answers-cache"),
	});
}, 120_000);

afterAll(async () => {
	await runner?.stop();
	await lossy?.close();
	await stack?.close();
});

describe("a runner's report whose answer was lost", () => {
	it("completes a conversion once, sends the same completion again after a reset, and counts the job completed", async () => {
		const voiceId = await stack.addVoice({ name: "Lost Answer Alto", tags: [] });
		const source = makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000 * 2, encoding: "pcm", bits: 16 });
		const file = await uploadWav(stack, token, source);
		const created = await api<{ id: string }>("/api/v1/voice-conversions", {
			method: "POST",
			body: { audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "fifth_up", use_preview: false },
		});
		const [first, repeat, ...more] = await until("a repeated completion", async () => reportsOf("complete"));
		// The Worker took the first one (its answer was lost), and took the repeat as that same report.
		expect(first).toMatchObject({ status: 200, dropped: true });
		expect(repeat).toMatchObject({ status: 200, dropped: false });
		expect(repeat?.body).toBe(first?.body);
		expect(repeat?.answer).toBe(first?.answer);
		expect(more).toEqual([]);
		const done = await api<Record<string, unknown>>(`/api/v1/voice-conversions/${created.id}`);
		expect(done).toMatchObject({ status: "completed", error_message: null });
		await until("the job counted", async () => ((await jobsCounted("dsp", "completed")) === 1 ? true : undefined));
		expect(await jobsCounted("dsp", "lease_lost")).toBe(0);
		expect(await jobsCounted("dsp", "not_reported")).toBe(0);
		const events = await stack.env.DB.prepare("SELECT type FROM events WHERE subject_id = ?")
			.bind(created.id)
			.all<{ type: string }>();
		expect(events.results.map((event) => event.type)).toEqual(["conversion.completed"]);
	});

	it("fails a conversion once, sends the same failure again after a 503, and counts the job failed", async () => {
		const voiceId = await stack.addVoice({ name: "Lost Failure Alto", tags: [] });
		// A float WAV with a NaN sample half a second in: its header is sound, and the runner fails it as corrupted.
		const source = makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000 * 2, encoding: "float", bits: 32 });
		new DataView(source.buffer).setFloat32(44 + 4 * 8_000, Number.NaN, true);
		const file = await uploadWav(stack, token, source);
		const created = await api<{ id: string }>("/api/v1/voice-conversions", {
			method: "POST",
			body: { audio_file_id: file.id, voice_model_id: voiceId, pitch_shift: "same_octave", use_preview: false },
		});
		const [first, repeat, ...more] = await until("a repeated failure", async () => reportsOf("fail"));
		expect(JSON.parse(first?.body ?? "{}")).toMatchObject({ kind: "permanent", reason: "corrupted_source" });
		expect(first).toMatchObject({ status: 200, dropped: true });
		expect(repeat).toMatchObject({ status: 200, dropped: false });
		expect(repeat?.body).toBe(first?.body);
		expect(repeat?.answer).toBe(first?.answer);
		expect(more).toEqual([]);
		expect(await api(`/api/v1/voice-conversions/${created.id}`)).toMatchObject({ status: "failed" });
		await until("the job counted", async () =>
			(await jobsCounted("dsp", "failed_permanent")) === 1 ? true : undefined,
		);
		expect(await jobsCounted("dsp", "lease_lost")).toBe(0);
		const events = await stack.env.DB.prepare("SELECT type FROM events WHERE subject_id = ?")
			.bind(created.id)
			.all<{ type: string }>();
		expect(events.results.map((event) => event.type)).toEqual(["conversion.failed"]);
	});

	it("ends a voice's validation once, sends the same report again after a 502, and counts the job completed", async () => {
		const voice = await api<{ id: string; uploads: { model: { method: string; upload_url: string } } }>(
			"/api/v1/voices",
			{
				method: "POST",
				body: { name: "Lost answer voice", files: { model: { file_name: "model.pth", size_bytes: MODEL.length } } },
			},
		);
		expect(voice.uploads.model.method).toBe("PUT");
		const put = await fetch(voice.uploads.model.upload_url, { method: "PUT", body: Buffer.from(MODEL) });
		expect(put.status, await put.clone().text()).toBe(200);
		const [first, repeat, ...more] = await until("a repeated validation report", async () =>
			reportsOf("voice-validation"),
		);
		expect(first).toMatchObject({ status: 200, dropped: true });
		expect(repeat).toMatchObject({ status: 200, dropped: false });
		expect(repeat?.body).toBe(first?.body);
		expect(repeat?.answer).toBe(first?.answer);
		expect(more).toEqual([]);
		expect(await api(`/api/v1/voices/${voice.id}`)).toMatchObject({ status: "ready", error_message: null });
		await until("the job counted", async () => ((await jobsCounted("rvc", "completed")) === 1 ? true : undefined));
		expect(await jobsCounted("rvc", "lease_lost")).toBe(0);
		const events = await stack.env.DB.prepare("SELECT type FROM events WHERE subject_id = ?")
			.bind(voice.id)
			.all<{ type: string }>();
		expect(events.results.map((event) => event.type)).toEqual(["voice.ready"]);
	});
});
