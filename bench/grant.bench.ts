/**
 * The JobBroker's grant with a deep queue, on the real local stack (wrangler's test harness: the Durable Object and its
 * SQLite in workerd), called through the binding as the Worker calls it.
 *
 *   node bench/grant.bench.ts [WAITING ...]      (Node 22; default 1000 10000 50000)
 *
 * For each depth: that many jobs waiting (spread over 200 accounts and 50 voices, a tenth of them previews), then
 * leases of one job each (capacity 1, no wait), timed one at a time, beside a call that does nothing (`knownJobs([])`)
 * in the same run, so that what the binding's transport adds can be told apart. Every loop is bounded; the harness is
 * closed at the end.
 */
import type { ConversionJob, GrantedLease, LeaseWants } from "../src/contracts/broker.ts";
import { startLocalStack } from "../test/support/local-stack.ts";

const DEPTHS = process.argv.slice(2).map(Number);
const GRANTS = 60;
const ACCOUNTS = 200;
const VOICES = 50;
const ENQUEUE_AT_ONCE = 500;

interface BrokerStub {
	enqueue(job: ConversionJob): Promise<string>;
	lease(wants: LeaseWants): Promise<GrantedLease[]>;
	knownJobs(ids: string[]): Promise<string[]>;
	stats(): Promise<{ waiting: number }>;
}
interface Namespace {
	idFromName(name: string): unknown;
	get(id: unknown): BrokerStub;
}

const percentile = (values: number[], p: number) => {
	const sorted = [...values].sort((a, b) => a - b);
	return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
};
const ms = (value: number) => `${value.toFixed(2)} ms`;

async function timed(times: number, call: () => Promise<unknown>): Promise<number[]> {
	const spent: number[] = [];
	for (let i = 0; i < times; i++) {
		const started = performance.now();
		await call();
		spent.push(performance.now() - started);
	}
	return spent;
}

async function main() {
	const depths = DEPTHS.length > 0 && DEPTHS.every((n) => Number.isInteger(n) && n > 0) ? DEPTHS : [1000, 10000, 50000];
	const stack = await startLocalStack();
	try {
		const namespace = (stack.env as unknown as { JOB_BROKER: Namespace }).JOB_BROKER;
		// A broker of its own (the Worker's is `global`), so that nothing else the stack does lands in it.
		const broker = namespace.get(namespace.idFromName(`bench-${crypto.randomUUID()}`));
		const accounts = Array.from({ length: ACCOUNTS }, () => crypto.randomUUID());
		const voices = Array.from({ length: VOICES }, () => crypto.randomUUID());
		const wants: LeaseWants = {
			runnerId: "bench-runner",
			capacity: 1,
			waitSeconds: 0,
			loadedVoiceIds: voices.slice(0, 2),
			engines: ["dsp", "rvc"],
			kinds: ["convert", "validate_voice"],
		};
		let enqueued = 0;
		console.log("waiting jobs | grant p50 | grant p99 | empty call p50 | grant less empty call (p50)");
		for (const depth of depths) {
			for (; enqueued < depth; ) {
				const batch = Math.min(ENQUEUE_AT_ONCE, depth - enqueued);
				await Promise.all(
					Array.from({ length: batch }, (_, i) => {
						const n = enqueued + i;
						return broker.enqueue({
							conversionId: crypto.randomUUID(),
							accountId: accounts[n % ACCOUNTS] as string,
							voiceId: voices[n % VOICES] as string,
							engine: "dsp",
							usePreview: n % 10 === 0,
						});
					}),
				);
				enqueued += batch;
			}
			const waiting = (await broker.stats()).waiting;
			await timed(5, () => broker.lease(wants));
			const grants = await timed(GRANTS, async () => {
				const granted = await broker.lease(wants);
				if (granted.length !== 1) throw new Error(`a lease of one job granted ${granted.length}`);
			});
			const empty = await timed(GRANTS, () => broker.knownJobs([]));
			enqueued -= 5 + GRANTS;
			const p50 = percentile(grants, 50);
			const emptyP50 = percentile(empty, 50);
			console.log(
				`${String(waiting).padStart(12)} | ${ms(p50).padStart(9)} | ${ms(percentile(grants, 99)).padStart(9)} | ${ms(emptyP50).padStart(14)} | ${ms(p50 - emptyP50)}`,
			);
		}
	} finally {
		await stack.close();
	}
}

await main();
