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
 *
 * The queue is filled in bulk, not one `enqueue` call a job (50,000 calls over the binding took about three minutes,
 * the most of the run): the harness runs SQL inside the broker, and each statement inserts thousands of the rows
 * `enqueue` writes. The first job goes through `enqueue` itself, and the fill stops if a row written in bulk differs
 * from it in anything but the job's own fields. Only the grants are timed, as before.
 */
import type { ConversionJob, GrantedLease, LeaseWants } from "../src/contracts/broker.ts";
import { type LocalStack, startLocalStack } from "../test/support/local-stack.ts";

const DEPTHS = process.argv.slice(2).map(Number);
const GRANTS = 60;
const ACCOUNTS = 200;
const VOICES = 50;
/** Jobs written by one statement of the bulk fill. */
const FILL_AT_ONCE = 5_000;

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

type BrokerStorage = Awaited<ReturnType<ReturnType<LocalStack["harness"]["getWorker"]>["getDurableObjectStorage"]>>;

/** Adds `jobs` to the broker's queue in one statement, as `enqueue` adds each: waiting, available from now. */
async function fill(storage: BrokerStorage, jobs: ConversionJob[]): Promise<void> {
	await storage.exec(
		`INSERT INTO jobs (conversion_id, account_id, voice_id, engine, use_preview, state, attempts, enqueued_at,
		 available_at, updated_at, kind)
		 SELECT json_extract(value, '$.conversionId'), json_extract(value, '$.accountId'), json_extract(value, '$.voiceId'),
		   json_extract(value, '$.engine'), json_extract(value, '$.usePreview'), 'waiting', 0, ?2, ?2, ?2, 'convert'
		 FROM json_each(?1)`,
		JSON.stringify(jobs),
		Date.now(),
	);
}

/**
 * The row of a job written by `fill` is the row `enqueue` wrote for `model`, but for the job's own fields and times:
 * should `enqueue` come to write something else, the bench stops rather than time grants over other rows.
 */
async function expectRowsLikeEnqueued(storage: BrokerStorage, model: ConversionJob, filled: ConversionJob) {
	const own = ["conversion_id", "account_id", "voice_id", "use_preview", "enqueued_at", "available_at", "updated_at"];
	const rows = await storage.exec(
		"SELECT * FROM jobs WHERE conversion_id IN (?, ?) ORDER BY conversion_id = ?",
		model.conversionId,
		filled.conversionId,
		model.conversionId,
	);
	const [bulk, enqueued] = rows.map((row) => JSON.stringify(Object.entries(row).filter(([k]) => !own.includes(k))));
	const fields = rows.map((row) => [row.account_id, row.voice_id, row.use_preview]);
	const expected = [filled, model].map((job) => [job.accountId, job.voiceId, job.usePreview ? 1 : 0]);
	if (rows.length !== 2 || bulk !== enqueued || JSON.stringify(fields) !== JSON.stringify(expected)) {
		throw new Error(`the bulk fill no longer writes the rows enqueue writes: ${JSON.stringify(rows)}`);
	}
}

async function main() {
	const depths = DEPTHS.length > 0 && DEPTHS.every((n) => Number.isInteger(n) && n > 0) ? DEPTHS : [1000, 10000, 50000];
	const stack = await startLocalStack();
	try {
		const namespace = (stack.env as unknown as { JOB_BROKER: Namespace }).JOB_BROKER;
		// A broker of its own (the Worker's is `global`), so that nothing else the stack does lands in it.
		const brokerName = `bench-${crypto.randomUUID()}`;
		const broker = namespace.get(namespace.idFromName(brokerName));
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
		const storage = await stack.harness.getWorker().getDurableObjectStorage("JOB_BROKER", { name: brokerName });
		const jobAt = (n: number): ConversionJob => ({
			conversionId: crypto.randomUUID(),
			accountId: accounts[n % ACCOUNTS] as string,
			voiceId: voices[n % VOICES] as string,
			engine: "dsp",
			usePreview: n % 10 === 0,
		});
		// The first job through the broker's own path, as the Worker enqueues; it is the model of every row below.
		const model = jobAt(0);
		if ((await broker.enqueue(model)) !== "added") throw new Error("the first job was not added");
		let enqueued = 1;
		console.log("waiting jobs | grant p50 | grant p99 | empty call p50 | grant less empty call (p50)");
		for (const depth of depths) {
			for (; enqueued < depth; ) {
				const batch = Array.from({ length: Math.min(FILL_AT_ONCE, depth - enqueued) }, (_, i) => jobAt(enqueued + i));
				await fill(storage, batch);
				if (enqueued === 1) await expectRowsLikeEnqueued(storage, model, batch[0] as ConversionJob);
				enqueued += batch.length;
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
