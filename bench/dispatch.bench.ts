/**
 * Dispatch benchmark on the real local stack (wrangler's test harness: workerd with D1, R2, Queues and the
 * JobBroker Durable Object), driven over HTTP on 127.0.0.1 by a client and a runner written here.
 *
 *   node bench/dispatch.bench.ts        (Node 22: `npx node bench/dispatch.bench.ts`)
 *
 * Figures, each beside a bare Worker round trip (a 404) measured in the same run:
 * - dispatch latency from `queued` (the row's queued_at) to the lease reaching a long-polling runner (p50, p99);
 * - create-to-completed latency of a 10 s preview with a runner that only uploads a small WAV (p50, p99);
 * - lease + upload + complete cycles per second (one runner, then four runners at once).
 * Every loop is bounded; the harness is closed at the end.
 */
import type { Lease } from "../src/contracts/runner.ts";
import { startLocalStack } from "../test/support/local-stack.ts";
import { makeWav } from "../test/support/wav-generator.ts";

const ROUND_TRIPS = 300;
const DISPATCHES = 60;
const PREVIEWS = 40;
const CYCLES = 150;
const PARALLEL_RUNNERS = 4;

/** A 16-bit mono PCM WAV of a sine tone, from the tests' shared generator. */
const wav = (seconds: number, sampleRate = 16_000) =>
	// The generator allocates a fresh ArrayBuffer, so the narrower type holds.
	makeWav({
		sampleRate,
		channels: 1,
		frames: Math.round(seconds * sampleRate),
		encoding: "pcm",
		bits: 16,
	}) as Uint8Array<ArrayBuffer>;

const percentile = (values: number[], p: number) => {
	const sorted = [...values].sort((a, b) => a - b);
	return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
};
const ms = (value: number) => `${value.toFixed(2)} ms`;

async function main() {
	const stack = await startLocalStack();
	try {
		const { url: base, env } = stack;

		// An account with an API and a runner client, a voice and an audio file, written straight into D1 and R2.
		const apiClient = await stack.provision("api");
		const runnerClient = await stack.provision("runner", apiClient.accountId);
		const userToken = await stack.token(apiClient);
		const runnerToken = await stack.token(runnerClient);
		const voiceId = await stack.addVoice({ name: "Bench voice" });
		const now = new Date().toISOString();
		const source = wav(12);
		const fileId = crypto.randomUUID();
		const objectKey = `audio/${apiClient.accountId}/${fileId}`;
		await env.BUCKET.put(objectKey, source);
		await env.DB.prepare(
			`INSERT INTO audio_files (id, account_id, file_name, mime_type, object_key, upload_status, upload_url_expires_at,
			 uploaded_at, size_bytes, preprocessing_status, format, sample_rate, channels, duration_seconds, created_at, updated_at)
			 VALUES (?, ?, 'bench.wav', 'audio/wav', ?, 'uploaded', ?, ?, ?, 'ready', 'wav', 16000, 1, 12, ?, ?)`,
		)
			.bind(fileId, apiClient.accountId, objectKey, now, now, source.byteLength, now, now)
			.run();

		const json = (tokenValue: string, body: unknown) => ({
			method: "POST",
			headers: { Authorization: `Bearer ${tokenValue}`, "Content-Type": "application/json" },
			body: JSON.stringify(body),
		});
		const createConversion = async (usePreview: boolean) => {
			const response = await fetch(
				`${base}/api/v1/voice-conversions`,
				json(userToken, { audio_file_id: fileId, voice_model_id: voiceId, use_preview: usePreview }),
			);
			if (response.status !== 201) throw new Error(`create: ${response.status} ${await response.text()}`);
			return ((await response.json()) as { data: { id: string } }).data.id;
		};
		const getConversion = async (id: string) => {
			const response = await fetch(`${base}/api/v1/voice-conversions/${id}`, {
				headers: { Authorization: `Bearer ${userToken}` },
			});
			return ((await response.json()) as { data: { status: string; queued_at: string } }).data;
		};
		const lease = async (runnerId: string, waitSeconds: number, capacity = 1): Promise<Lease[]> => {
			const response = await fetch(
				`${base}/internal/v1/leases`,
				json(runnerToken, { runner_id: runnerId, capacity, wait_seconds: waitSeconds }),
			);
			if (response.status !== 200) throw new Error(`lease: ${response.status} ${await response.text()}`);
			return ((await response.json()) as { data: { leases: Lease[] } }).data.leases;
		};
		const output = wav(0.2);
		const steps = { lease: [] as number[], upload: [] as number[], complete: [] as number[] };
		const finish = async (job: Lease, timed = false) => {
			const t0 = performance.now();
			const put = await fetch(job.output.url.replace(/^https?:\/\/[^/]+/, base), {
				method: "PUT",
				headers: { "Content-Type": "audio/wav" },
				body: output,
			});
			if (put.status !== 200) throw new Error(`output PUT: ${put.status} ${await put.text()}`);
			const t1 = performance.now();
			const done = await fetch(
				`${base}/internal/v1/leases/${job.lease_id}/complete`,
				json(runnerToken, {
					output: { size_bytes: output.byteLength, duration_seconds: 0.2, sample_rate: 16000, channels: 1 },
				}),
			);
			if (done.status !== 200) throw new Error(`complete: ${done.status} ${await done.text()}`);
			if (timed) {
				steps.upload.push(t1 - t0);
				steps.complete.push(performance.now() - t1);
			}
		};

		// Warm-up: first requests compile code and open the databases.
		for (let i = 0; i < 20; i++) await (await fetch(`${base}/no-such-route`)).arrayBuffer();
		await finish(
			(
				await (async () => {
					await createConversion(true);
					return lease("warmup", 5);
				})()
			)[0] as Lease,
		);

		// 1. Bare Worker round trip.
		const bare: number[] = [];
		const bareStart = performance.now();
		for (let i = 0; i < ROUND_TRIPS; i++) {
			const t0 = performance.now();
			const response = await fetch(`${base}/no-such-route`);
			await response.arrayBuffer();
			bare.push(performance.now() - t0);
		}
		const bareRps = ROUND_TRIPS / ((performance.now() - bareStart) / 1000);
		const bareP50 = percentile(bare, 50);

		// 2. Dispatch latency: a runner is already long-polling when each conversion is queued.
		const dispatch: number[] = [];
		for (let i = 0; i < DISPATCHES; i++) {
			const polling = lease("dispatch-runner", 10).then((leases) => ({ leases, at: Date.now() }));
			await new Promise((resolve) => setTimeout(resolve, 5)); // let the poll reach the broker first
			const id = await createConversion(false);
			const { leases, at } = await polling;
			const job = leases[0];
			if (!job || job.conversion_id !== id) throw new Error("dispatch: the runner did not get the new job");
			const { queued_at } = await getConversion(id);
			dispatch.push(at - Date.parse(queued_at));
			await finish(job);
		}

		// 3. Create-to-completed for a 10 s preview: a runner loop that only uploads a small WAV and completes.
		const previews: number[] = [];
		for (let i = 0; i < PREVIEWS; i++) {
			const polling = lease("preview-runner", 10);
			await new Promise((resolve) => setTimeout(resolve, 5));
			const t0 = performance.now();
			const id = await createConversion(true);
			const [job] = await polling;
			if (!job || job.conversion_id !== id || !job.use_preview) throw new Error("preview: wrong job");
			await finish(job);
			previews.push(performance.now() - t0);
			if ((await getConversion(id)).status !== "completed") throw new Error("preview: not completed");
		}

		// 4. Throughput: jobs are queued up front, then runners lease + upload + complete as fast as they can.
		const cycleRun = async (runners: number) => {
			for (let i = 0; i < CYCLES; i++) await createConversion(false);
			let left = CYCLES;
			const start = performance.now();
			await Promise.all(
				Array.from({ length: runners }, async (_, r) => {
					while (left > 0) {
						const t0 = performance.now();
						const [job] = await lease(`cycle-runner-${r}`, 0);
						if (!job) break;
						if (runners === 1) steps.lease.push(performance.now() - t0);
						left--;
						await finish(job, runners === 1);
					}
				}),
			);
			const seconds = (performance.now() - start) / 1000;
			if (left !== 0) throw new Error(`throughput: ${left} jobs were not leased`);
			return CYCLES / seconds;
		};
		const cyclesOne = await cycleRun(1);
		const cyclesMany = await cycleRun(PARALLEL_RUNNERS);

		const lines = [
			"dispatch benchmark (local workerd stack via wrangler createTestHarness; HTTP on 127.0.0.1)",
			`bare Worker round trip (404)       p50 ${ms(bareP50)}  p99 ${ms(percentile(bare, 99))}  ${bareRps.toFixed(0)} req/s sequential  (n=${ROUND_TRIPS})`,
			`dispatch queued → leased           p50 ${ms(percentile(dispatch, 50))}  p99 ${ms(percentile(dispatch, 99))}  = ${(percentile(dispatch, 50) / bareP50).toFixed(1)}× / ${(percentile(dispatch, 99) / bareP50).toFixed(1)}× a bare round trip (n=${DISPATCHES})`,
			`create → completed, 10 s preview   p50 ${ms(percentile(previews, 50))}  p99 ${ms(percentile(previews, 99))}  = ${(percentile(previews, 50) / bareP50).toFixed(1)}× / ${(percentile(previews, 99) / bareP50).toFixed(1)}× a bare round trip (n=${PREVIEWS})`,
			`lease+upload+complete, 1 runner    ${cyclesOne.toFixed(1)} cycles/s  = ${(cyclesOne / bareRps).toFixed(3)}× bare req/s (a cycle is 3 requests) (n=${CYCLES})`,
			`  one cycle, p50 per request        lease ${ms(percentile(steps.lease, 50))}  upload ${ms(percentile(steps.upload, 50))}  complete ${ms(percentile(steps.complete, 50))}`,
			`lease+upload+complete, ${PARALLEL_RUNNERS} runners   ${cyclesMany.toFixed(1)} cycles/s  = ${(cyclesMany / bareRps).toFixed(3)}× bare req/s (n=${CYCLES})`,
		];
		console.log(lines.join("\n"));
	} finally {
		await stack.close();
	}
}

await main();
