/**
 * Upload path benchmark: a 95 MB body PUT through the Worker's signed upload address (signature check, hooks,
 * FixedLengthStream into R2, D1 update, queue send), beside a direct R2 binding put of the same bytes, in one local
 * stack (test/support/local-stack.ts: wrangler's `createTestHarness`, workerd + miniflare, 127.0.0.1 only).
 *
 * Memory: the resident set (VmRSS) of the workerd processes started by this run, read from /proc every 10 ms while
 * each transfer runs; reported as the peak and as the rise over the idle level just before it. That is the whole
 * runtime's memory (the Worker isolate plus the local R2 emulation writing to disk), which is what a streaming upload
 * must keep flat: a buffered 95 MB body would show up as a rise of 95 MB or more.
 *
 * Run: `npx node bench/upload.bench.ts` (Node 22 strips the types). Linux only for the memory figures.
 */
import { request } from "node:http";
import { createTestHarness } from "wrangler";
import { startLocalStack } from "../test/support/local-stack.ts";
import { rssBytes, workerdPids } from "./workerd-rss.ts";

const BODY_BYTES = Number(process.env.BENCH_UPLOAD_BYTES ?? 95_000_000);
const ROUNDS = 3;
const MB = 1_000_000;

/** The body: a valid 16-bit stereo 48 kHz WAV header, then a deterministic non-silent pattern. */
function wavBody(size: number): Buffer {
	const body = Buffer.alloc(size);
	body.write("RIFF", 0, "ascii");
	body.writeUInt32LE(size - 8, 4);
	body.write("WAVEfmt ", 8, "ascii");
	body.writeUInt32LE(16, 16);
	body.writeUInt16LE(1, 20);
	body.writeUInt16LE(2, 22);
	body.writeUInt32LE(48_000, 24);
	body.writeUInt32LE(192_000, 28);
	body.writeUInt16LE(4, 32);
	body.writeUInt16LE(16, 34);
	body.write("data", 36, "ascii");
	body.writeUInt32LE(size - 44, 40);
	for (let i = 44; i < size; i += 4096) body.writeUInt32LE((i * 2654435761) >>> 0, i);
	return body;
}

/** Runs `work` while sampling workerd's RSS; returns seconds, idle RSS before and the peak during. */
async function measured(pids: number[], work: () => Promise<void>) {
	const idle = rssBytes(pids);
	let peak = idle;
	const sampler = setInterval(() => {
		peak = Math.max(peak, rssBytes(pids));
	}, 10);
	const started = performance.now();
	try {
		await work();
	} finally {
		clearInterval(sampler);
	}
	const seconds = (performance.now() - started) / 1000;
	peak = Math.max(peak, rssBytes(pids));
	return { seconds, idle, peak };
}

/** PUT with an explicit Content-Length, writing the body in 1 MiB slices as a client streaming a file would. */
function putStreaming(url: string, contentType: string, body: Buffer): Promise<number> {
	return new Promise((resolve, reject) => {
		const req = request(
			url,
			{ method: "PUT", headers: { "Content-Type": contentType, "Content-Length": String(body.byteLength) } },
			(res) => {
				res.resume();
				res.on("end", () => resolve(res.statusCode ?? 0));
			},
		);
		req.on("error", reject);
		let offset = 0;
		const writeMore = () => {
			while (offset < body.byteLength) {
				const slice = body.subarray(offset, offset + (1 << 20));
				offset += slice.byteLength;
				if (!req.write(slice)) return void req.once("drain", writeMore);
			}
			req.end();
		};
		writeMore();
	});
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** The same transfer into a Worker that only drains the body (bench/fixtures/drain-worker.js), in its own stack. */
async function drainBaseline(body: Buffer) {
	const server = createTestHarness({
		workers: [
			{ config: { name: "drain", main: "./bench/fixtures/drain-worker.js", compatibility_date: "2026-11-01" } },
		],
	});
	const { url } = await server.listen();
	try {
		const pids = workerdPids();
		const drain = async (bytes: Buffer) => {
			const status = await putStreaming(new URL("/", url).toString(), "application/octet-stream", bytes);
			if (status !== 200) throw new Error(`drain answered ${status}`);
		};
		await drain(body.subarray(0, 1_000_000));
		const runs: Awaited<ReturnType<typeof measured>>[] = [];
		for (let round = 0; round < ROUNDS; round++) runs.push(await measured(pids, () => drain(body)));
		return runs;
	} finally {
		await server.close();
	}
}

async function main() {
	const stack = await startLocalStack();
	try {
		const { url, env } = stack;
		const token = await stack.token(await stack.provision("api"));

		const registerFile = async (name: string) => {
			const registered = await fetch(new URL("/api/v1/audio-files", url), {
				method: "POST",
				headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
				body: JSON.stringify({ file_name: name, mime_type: "audio/wav" }),
			});
			return ((await registered.json()) as { data: { id: string; upload_url: string } }).data;
		};
		const uploadTo = async (uploadUrl: string, bytes: Buffer) => {
			const status = await putStreaming(uploadUrl, "audio/wav", bytes);
			if (status !== 200) throw new Error(`upload answered ${status}`);
		};
		const uploadOnce = async (name: string, bytes: Buffer) => uploadTo((await registerFile(name)).upload_url, bytes);

		const body = wavBody(BODY_BYTES);
		const pids = workerdPids();
		if (pids.length === 0) console.warn("no workerd process found under this one: memory figures will read 0");

		const viaWorker: Awaited<ReturnType<typeof measured>>[] = [];
		const direct: Awaited<ReturnType<typeof measured>>[] = [];
		let lastFileId = "";
		// A small unmeasured upload first, so one-time start-up allocations (module compilation, first D1 and R2
		// use) do not count as the upload path's memory.
		await uploadOnce("warm-up.wav", body.subarray(0, 1_000_000));
		// All Worker uploads first, then the direct puts: RSS rarely shrinks, so each kind is measured on its own
		// and the direct puts' buffers do not raise the Worker's baseline.
		for (let round = 0; round < ROUNDS; round++) {
			const file = await registerFile(`bench-${round}.wav`);
			lastFileId = file.id;
			viaWorker.push(await measured(pids, () => uploadTo(file.upload_url, body)));
		}
		for (let round = 0; round < ROUNDS; round++) {
			direct.push(
				await measured(pids, async () => {
					await env.BUCKET.put(`bench/direct-${round}`, body);
				}),
			);
			await env.BUCKET.delete(`bench/direct-${round}`);
		}

		// The uploaded file must be what it claims: stored whole, and preprocessed from a few range reads.
		let state = { upload_status: "", size_bytes: 0, preprocessing_status: "", duration_seconds: 0 };
		for (let i = 0; i < 100 && state.preprocessing_status !== "ready"; i++) {
			const response = await fetch(new URL(`/api/v1/audio-files/${lastFileId}`, url), {
				headers: { Authorization: `Bearer ${token}` },
			});
			state = ((await response.json()) as { data: typeof state }).data;
			if (state.preprocessing_status !== "ready") await new Promise((r) => setTimeout(r, 100));
		}

		await stack.close();
		const drained = await drainBaseline(body);

		const rate = (runs: typeof viaWorker) => BODY_BYTES / MB / median(runs.map((r) => r.seconds));
		const rise = (runs: typeof viaWorker) => Math.max(...runs.map((r) => r.peak - r.idle));
		const peak = (runs: typeof viaWorker) => Math.max(...runs.map((r) => r.peak));
		const workerRate = rate(viaWorker);
		const directRate = rate(direct);
		console.log(`upload bench: ${BODY_BYTES.toLocaleString("en")} bytes, ${ROUNDS} rounds each, median time`);
		console.log(
			`  signed PUT through the Worker: ${workerRate.toFixed(1)} MB/s  (runs ${viaWorker.map((r) => r.seconds.toFixed(2)).join(", ")} s)`,
		);
		console.log(
			`  direct R2 binding put:         ${directRate.toFixed(1)} MB/s  (runs ${direct.map((r) => r.seconds.toFixed(2)).join(", ")} s)`,
		);
		console.log(
			`  baseline, Worker that only drains: ${rate(drained).toFixed(1)} MB/s  (runs ${drained.map((r) => r.seconds.toFixed(2)).join(", ")} s)`,
		);
		console.log(`  throughput ratio (Worker / direct): ${(workerRate / directRate).toFixed(2)}`);
		console.log(
			`  workerd RSS during Worker upload: peak ${mib(peak(viaWorker))}, largest rise over idle ${mib(rise(viaWorker))}`,
		);
		console.log(
			`  workerd RSS during direct put:    peak ${mib(peak(direct))}, largest rise over idle ${mib(rise(direct))}`,
		);
		console.log(
			`  workerd RSS while only draining:  peak ${mib(peak(drained))}, largest rise over idle ${mib(rise(drained))}`,
		);
		for (const [name, runs] of [
			["Worker", viaWorker],
			["direct", direct],
			["drain", drained],
		] as const) {
			console.log(`  ${name} rounds (idle → peak): ${runs.map((r) => `${mib(r.idle)} → ${mib(r.peak)}`).join("; ")}`);
		}
		console.log(`  memory rise ratio (Worker / direct): ${(rise(viaWorker) / Math.max(1, rise(direct))).toFixed(2)}`);
		console.log(
			`  uploaded file: ${state.upload_status}, ${state.size_bytes} bytes, preprocessing ${state.preprocessing_status}, ${state.duration_seconds?.toFixed(3)} s`,
		);
	} finally {
		await stack.close().catch(() => {});
	}
}

await main();
