/**
 * Output upload benchmark: a runner getting a ~95 MB output WAV from disk to the Worker, with the runner's own code
 * (gpu-runner/src/storage/output-upload.ts `uploadOutput`, RunnerApiClient, TokenProvider), on the real local stack
 * (test/support/local-stack.ts: wrangler's `createTestHarness`, workerd + miniflare, 127.0.0.1 only).
 *
 * Paths, each upload on its own conversion and lease (a lease takes one output):
 * - one PUT to the lease's signed `output.url` (`uploadWav`, what outputs up to the part size use);
 * - R2 multipart through the runner API in parts of 64 MiB (the default), 16 MiB and 5 MiB (R2's smallest).
 * The part size is the Worker's `OUTPUT_PART_BYTES` var, so each part size gets its own stack, and each stack also
 * times the single PUT, the reference its parts are compared with. Figures: MB/s and wall seconds (median of the
 * rounds), requests per upload (start + parts + complete; the runner token is fetched before the clock starts), the
 * time against the single PUT, and the resident set of workerd (all processes started by this run) and of this
 * Node process, sampled every 10 ms: peak, and the largest rise over the level just before an upload.
 *
 * Run: `npm run bench -- output`, or `npx node bench/output.bench.ts` (Node 22 strips the types).
 * Linux only for the memory figures.
 */
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { RunnerApiClient } from "../gpu-runner/src/api/runner-api-client.ts";
import { TokenProvider } from "../gpu-runner/src/api/token-provider.ts";
import { type OutputUploads, uploadOutput } from "../gpu-runner/src/storage/output-upload.ts";
import type { Lease } from "../src/contracts/runner.ts";
import { type LocalStack, startLocalStack } from "../test/support/local-stack.ts";
import { makeWav } from "../test/support/wav-generator.ts";
import { rssBytes, workerdPids } from "./workerd-rss.ts";

const OUTPUT_BYTES = Number(process.env.BENCH_OUTPUT_BYTES ?? 95_000_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const MB = 1_000_000;
const MiB = 1024 * 1024;
const SAMPLE_RATE = 48_000;
const CHANNELS = 2;
const mib = (bytes: number) => `${(bytes / MiB).toFixed(0)} MiB`;

/** The Worker's OUTPUT_PART_BYTES per stack: the default, a middle size, R2's smallest part. */
const PART_SIZES = [64 * MiB, 16 * MiB, 5 * MiB];

interface Run {
	seconds: number;
	requests: number;
	workerdIdle: number;
	workerdPeak: number;
	nodeIdle: number;
	nodePeak: number;
}

/**
 * A 48 kHz 16-bit stereo WAV of exactly `size` bytes (size - 44 must be a multiple of 4): one second of the tests'
 * sine tone repeated, written a second at a time so this process never holds the whole file.
 */
function writeOutputWav(file: string, size: number): number {
	if (size < 44 || (size - 44) % 4 !== 0) throw new Error("BENCH_OUTPUT_BYTES must be 44 + a multiple of 4");
	const tone = makeWav({ sampleRate: SAMPLE_RATE, channels: CHANNELS, frames: SAMPLE_RATE, encoding: "pcm", bits: 16 });
	const header = tone.slice(0, 44);
	const view = new DataView(header.buffer);
	view.setUint32(4, size - 8, true);
	view.setUint32(40, size - 44, true);
	const second = tone.subarray(44);
	const fd = openSync(file, "w");
	try {
		writeSync(fd, header);
		for (let left = size - 44; left > 0; left -= second.byteLength) {
			writeSync(fd, second, 0, Math.min(left, second.byteLength));
		}
	} finally {
		closeSync(fd);
	}
	return (size - 44) / (CHANNELS * 2) / SAMPLE_RATE;
}

/** The runner API client with each output-upload call counted: one call is one HTTP request. */
function counted(client: RunnerApiClient): { uploads: OutputUploads; requests: () => number } {
	let requests = 0;
	const count = <T>(request: Promise<T>) => {
		requests++;
		return request;
	};
	const uploads: OutputUploads = {
		startOutputUpload: (...args) => count(client.startOutputUpload(...args)),
		uploadOutputPart: (...args) => count(client.uploadOutputPart(...args)),
		completeOutputUpload: (...args) => count(client.completeOutputUpload(...args)),
		abortOutputUpload: (...args) => count(client.abortOutputUpload(...args)),
	};
	return { uploads, requests: () => requests };
}

/** Runs `work` while sampling workerd's and this process's RSS every 10 ms. */
async function measured(pids: number[], work: () => Promise<number>): Promise<Run> {
	const workerdIdle = rssBytes(pids);
	const nodeIdle = process.memoryUsage.rss();
	let workerdPeak = workerdIdle;
	let nodePeak = nodeIdle;
	const sample = () => {
		workerdPeak = Math.max(workerdPeak, rssBytes(pids));
		nodePeak = Math.max(nodePeak, process.memoryUsage.rss());
	};
	const sampler = setInterval(sample, 10);
	const started = performance.now();
	let requests: number;
	try {
		requests = await work();
	} finally {
		clearInterval(sampler);
	}
	const seconds = (performance.now() - started) / 1000;
	sample();
	return { seconds, requests, workerdIdle, workerdPeak, nodeIdle, nodePeak };
}

/** One stack at one part size: an account, a runner client, a voice and a small uploaded source. */
async function prepare(stack: LocalStack) {
	const { url } = stack;
	const apiClient = await stack.provision("api");
	const runnerClient = await stack.provision("runner", apiClient.accountId);
	const userToken = await stack.token(apiClient);
	const voiceId = await stack.addVoice({ name: "Bench voice" });
	const tokens = new TokenProvider({
		apiBaseUrl: url,
		clientId: runnerClient.clientId,
		clientSecret: runnerClient.clientSecret,
	});
	await tokens.get();
	const client = new RunnerApiClient({ apiBaseUrl: url, tokens });

	const api = async <T>(method: string, route: string, body?: unknown): Promise<T> => {
		const response = await fetch(`${url}${route}`, {
			method,
			headers: { Authorization: `Bearer ${userToken}`, "Content-Type": "application/json" },
			body: body === undefined ? undefined : JSON.stringify(body),
		});
		if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${await response.text()}`);
		return ((await response.json()) as { data: T }).data;
	};

	// The source is only what a conversion needs to be queued: 2 s of tone, registered and PUT like a client would.
	const file = await api<{ id: string; upload_url: string }>("POST", "/api/v1/audio-files", {
		file_name: "source.wav",
		mime_type: "audio/wav",
	});
	const source = makeWav({ sampleRate: 16_000, channels: 1, frames: 32_000, encoding: "pcm", bits: 16 });
	const put = await fetch(file.upload_url, {
		method: "PUT",
		headers: { "Content-Type": "audio/wav" },
		body: source as Uint8Array<ArrayBuffer>,
	});
	if (put.status !== 200) throw new Error(`source upload: ${put.status} ${await put.text()}`);
	const poll = async <T>(what: string, read: () => Promise<T>, done: (value: T) => boolean): Promise<T> => {
		for (let i = 0; i < 200; i++) {
			const value = await read();
			if (done(value)) return value;
			await new Promise((resolve) => setTimeout(resolve, 50));
		}
		throw new Error(`${what} did not happen within 10 s`);
	};
	await poll(
		"source preprocessing",
		() => api<{ preprocessing_status: string }>("GET", `/api/v1/audio-files/${file.id}`),
		(f) => f.preprocessing_status === "ready",
	);

	/** A new conversion of the source, queued and leased over HTTP by the runner client. */
	const leaseNew = async (): Promise<Lease> => {
		const { id } = await api<{ id: string }>("POST", "/api/v1/voice-conversions", {
			audio_file_id: file.id,
			voice_model_id: voiceId,
		});
		await poll(
			"queueing",
			() => api<{ status: string }>("GET", `/api/v1/voice-conversions/${id}`),
			(c) => c.status === "queued",
		);
		const { leases } = await client.lease(
			{ runner_id: "bench-runner", capacity: 1, wait_seconds: 5, loaded_voice_ids: [], engines: ["dsp"] },
			AbortSignal.timeout(20_000),
		);
		const lease = leases[0];
		if (!lease || lease.conversion_id !== id) throw new Error("the runner did not lease the new conversion");
		return lease;
	};
	return { client, leaseNew };
}

/** One stack at one part size: the single PUT beside the upload in parts, in interleaved rounds. */
async function runStack(partBytes: number, file: string, durationSeconds: number) {
	const stack = await startLocalStack({ vars: { OUTPUT_PART_BYTES: String(partBytes) } });
	try {
		const { client, leaseNew } = await prepare(stack);
		const pids = workerdPids();
		if (pids.length === 0) console.warn("no workerd process found under this one: workerd memory will read 0");
		const parts = Math.ceil(OUTPUT_BYTES / partBytes);

		const uploadOnce = async (inParts: boolean): Promise<Run> => {
			const lease = await leaseNew();
			if (lease.output.part_size_bytes !== partBytes) {
				throw new Error(`lease part size ${lease.output.part_size_bytes}, expected ${partBytes}`);
			}
			const counter = counted(client);
			// The runner heartbeats while it works; a slow upload must not lose its lease.
			const heartbeat = setInterval(
				() => void client.heartbeat(lease.lease_id, 1).catch(() => undefined),
				lease.heartbeat_interval_seconds * 1000,
			);
			let run: Run;
			try {
				run = await measured(pids, async () => {
					// Without `uploads`, uploadOutput takes the single-PUT path (uploadWav) at any size.
					const target = inParts ? { lease, uploads: counter.uploads } : { lease };
					await uploadOutput(target, file, OUTPUT_BYTES, AbortSignal.timeout(120_000));
					return inParts ? counter.requests() : 1;
				});
			} finally {
				clearInterval(heartbeat);
			}
			// Outside the clock: the lease completes on what was stored, which must be the whole file, in the
			// expected number of parts (R2 gives an object assembled from parts an etag ending in "-<parts>").
			await client.complete(lease.lease_id, {
				output: {
					size_bytes: OUTPUT_BYTES,
					duration_seconds: durationSeconds,
					sample_rate: SAMPLE_RATE,
					channels: CHANNELS,
				},
			});
			const key = String(
				await stack.env.DB.prepare("SELECT output_key FROM voice_conversions WHERE id = ?")
					.bind(lease.conversion_id)
					.first<string>("output_key"),
			);
			const stored = await stack.env.BUCKET.head(key);
			const what = inParts ? `parts of ${mib(partBytes)}` : "single PUT";
			if (stored?.size !== OUTPUT_BYTES) throw new Error(`${what}: stored ${stored?.size} bytes`);
			if (inParts && !stored.etag.endsWith(`-${parts}`)) throw new Error(`${what}: etag ${stored.etag}`);
			if (inParts && run.requests !== parts + 2) throw new Error(`${what}: ${run.requests} requests`);
			// Stored outputs are not read again; deleting them keeps the emulated bucket's disk use flat.
			await stack.env.BUCKET.delete(key);
			return run;
		};

		// Unmeasured, once per path: first uses compile code and open the bucket's storage.
		await uploadOnce(false);
		await uploadOnce(true);
		const single: Run[] = [];
		const inParts: Run[] = [];
		// Rounds alternate the two paths, so drift in the machine or the stack favours neither.
		for (let round = 0; round < ROUNDS; round++) {
			single.push(await uploadOnce(false));
			inParts.push(await uploadOnce(true));
		}
		return { partBytes, single, inParts };
	} finally {
		await stack.close();
	}
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
const medianSeconds = (runs: Run[]) => median(runs.map((r) => r.seconds));
const largest = (runs: Run[], pick: (r: Run) => number) => Math.max(...runs.map(pick));
const memory = (runs: Run[], peak: (r: Run) => number, idle: (r: Run) => number) =>
	`${mib(largest(runs, peak))} (+${mib(largest(runs, (r) => peak(r) - idle(r)))})`;

function row(name: string, runs: Run[], reference: number): string {
	const seconds = medianSeconds(runs);
	return (
		`  ${name.padEnd(17)}${(OUTPUT_BYTES / MB / seconds).toFixed(1).padStart(7)}${seconds.toFixed(2).padStart(8)}` +
		`${String(runs[0]?.requests).padStart(10)}${`${(seconds / reference).toFixed(2)}×`.padStart(13)}   ` +
		memory(
			runs,
			(r) => r.workerdPeak,
			(r) => r.workerdIdle,
		).padEnd(26) +
		memory(
			runs,
			(r) => r.nodePeak,
			(r) => r.nodeIdle,
		)
	);
}

async function main() {
	const dir = mkdtempSync(path.join(tmpdir(), "output-bench-"));
	try {
		const file = path.join(dir, "output.wav");
		const durationSeconds = writeOutputWav(file, OUTPUT_BYTES);
		const started = performance.now();
		const stacks = [];
		for (const partBytes of PART_SIZES) stacks.push(await runStack(partBytes, file, durationSeconds));
		const total = (performance.now() - started) / 1000;

		const allSingle = stacks.flatMap((s) => s.single);
		console.log(
			`output upload bench: ${OUTPUT_BYTES.toLocaleString("en")}-byte WAV from disk with the runner's uploadOutput, ` +
				`median of ${ROUNDS} rounds, local workerd stack on 127.0.0.1`,
		);
		console.log(
			`  ${"path".padEnd(17)}${"MB/s".padStart(7)}${"wall s".padStart(8)}${"requests".padStart(10)}` +
				`${"time vs PUT".padStart(13)}   workerd RSS peak (rise)   node RSS peak (rise)`,
		);
		console.log(row("single PUT", allSingle, medianSeconds(allSingle)));
		for (const stack of stacks) {
			// Against the single PUT of the same stack: stacks differ a little from one another.
			console.log(row(`parts of ${mib(stack.partBytes)}`, stack.inParts, medianSeconds(stack.single)));
		}
		for (const stack of stacks) {
			console.log(
				`  OUTPUT_PART_BYTES ${mib(stack.partBytes)}: single PUT ${stack.single.map((r) => r.seconds.toFixed(2)).join(", ")} s; ` +
					`parts ${stack.inParts.map((r) => r.seconds.toFixed(2)).join(", ")} s; ` +
					`throughput ratio parts / single PUT ${(medianSeconds(stack.single) / medianSeconds(stack.inParts)).toFixed(2)}`,
			);
		}
		console.log(
			`  requests: single PUT 1; in parts 1 start + ${PART_SIZES.map((p) => Math.ceil(OUTPUT_BYTES / p)).join(" / ")} parts + 1 complete ` +
				`(the runner token is fetched before the clock starts; workerd RSS is all its processes, node RSS this one)`,
		);
		console.log(`  total ${total.toFixed(1)} s (${stacks.length} stacks, warm-up uploads included)`);
	} finally {
		rmSync(dir, { recursive: true, force: true });
	}
}

await main();
