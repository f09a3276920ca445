import { createHash } from "node:crypto";
import {
	mkdtempSync,
	readdirSync,
	readFileSync,
	rmSync,
	statSync,
	truncateSync,
	utimesSync,
	writeFileSync,
} from "node:fs";
import { open } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArtifactCache } from "../src/artifacts/artifact-cache.ts";
import { loadEngines } from "../src/engines/registry.ts";
import { readFaissIndex } from "../src/engines/rvc/faiss-index.ts";
import { silentLogger } from "../src/logger.ts";
import { VoiceAffinity } from "../src/loop/voice-affinity.ts";
import { type RunnerState, startHealthServer } from "../src/observability/health-server.ts";
import { RunnerMetrics } from "../src/observability/metrics.ts";

describe("artifact cache", () => {
	/** Three different files of `SIZE` bytes, served at `/<n>`; `/missing` answers 404. */
	const SIZE = 300_000;
	const payloads = [1, 2, 3].map((n) => new Uint8Array(SIZE).map((_, i) => (i * 17 + n * 31) % 256));
	const sha256s = payloads.map((p) => createHash("sha256").update(p).digest("hex"));
	let server: Server;
	let base = "";
	let downloads = 0;
	let dir: string;

	beforeAll(async () => {
		dir = mkdtempSync(join(tmpdir(), "artifacts-"));
		server = createServer((request, response) => {
			downloads++;
			const payload = payloads[Number(request.url?.slice(1, 2)) - 1];
			response.writeHead(payload ? 200 : 404).end(payload ?? "");
		});
		await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
		base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
	});
	afterAll(() => {
		server.close();
		rmSync(dir, { recursive: true, force: true });
	});

	const artifact = (n = 1, overrides = {}) => ({
		name: `file${n}`,
		url: `${base}/${n}?sig=x`,
		sha256: sha256s[n - 1] as string,
		size_bytes: SIZE,
		...overrides,
	});
	const signal = new AbortController().signal;
	/** What the folder holds of these artifacts: each file and its verification record, sorted. */
	const files = (...sha256: string[]) => sha256.flatMap((sha) => [`${sha}.bin`, `${sha}.verified`]).sort();
	/** Downloads (or finds) artifact `n` under a hold that ends at once, its last use set `minutesAgo`. */
	const use = async (cache: ArtifactCache, n: number, minutesAgo: number) => {
		const hold = cache.hold();
		const path = (await hold.ensureAll([artifact(n)], signal)).get(`file${n}`) as string;
		hold.release();
		// Just now is the use's own mtime (set by the cache: another process's later one would be a use of its own).
		if (minutesAgo === 0) return path;
		const then = new Date(Date.now() - minutesAgo * 60_000);
		utimesSync(path, then, then);
		return path;
	};

	it("downloads once, verifies the checksum and serves later jobs from disk", async () => {
		const cache = new ArtifactCache(join(dir, "ok"));
		const before = downloads;
		const [a, b] = await Promise.all([
			cache.hold().ensureAll([artifact()], signal),
			cache.hold().ensureAll([artifact()], signal),
		]);
		expect(a.get("file1")).toBe(b.get("file1"));
		expect(downloads - before).toBe(1);
		expect(new Uint8Array(readFileSync(a.get("file1") as string))).toEqual(payloads[0]);
		const paths = await cache.hold().ensureAll([artifact()], signal);
		expect(paths.get("file1")).toBe(a.get("file1"));
		expect(downloads - before).toBe(1);
	});

	it("hashes a cached file again when it changed on disk since this process last used it, and downloads it again", async () => {
		// A real voice index (faiss wrote it), served as an artifact.
		const bytes = new Uint8Array(readFileSync(join(import.meta.dirname, "rvc/fixtures/index/voice-v2-768.index")));
		let served = 0;
		const indexServer = createServer((_request, response) => {
			served++;
			response.writeHead(200).end(bytes);
		});
		await new Promise<void>((resolve) => indexServer.listen(0, "127.0.0.1", resolve));
		try {
			const index = {
				name: "index",
				url: `http://127.0.0.1:${(indexServer.address() as AddressInfo).port}/index`,
				sha256: createHash("sha256").update(bytes).digest("hex"),
				size_bytes: bytes.length,
			};
			const job = async (cache: ArtifactCache) => {
				const hold = cache.hold();
				const path = (await hold.ensureAll([index], signal)).get("index") as string;
				hold.release();
				return path;
			};
			/** One byte of the file flipped in place (same inode, same size), as a fault on disk leaves it. */
			const damage = async (path: string) => {
				const file = await open(path, "r+");
				const at = Math.floor(bytes.length / 2);
				await file.write(Uint8Array.of((bytes[at] as number) ^ 0x40), 0, 1, at);
				await file.close();
			};
			const folder = join(dir, "changed");
			const cache = new ArtifactCache(folder);
			const path = await job(cache);
			const good = await readFaissIndex(path);
			expect(served).toBe(1);
			expect(await job(cache)).toBe(path);
			expect(served).toBe(1);

			// Between jobs the file changes on disk and still reads as an index, with other vectors.
			await damage(path);
			const damaged = await readFaissIndex(path);
			expect(damaged.vectors).not.toEqual(good.vectors);
			expect(await job(cache)).toBe(path);
			expect(served).toBe(2);
			expect(readFileSync(path).equals(bytes)).toBe(true);
			expect(await job(cache)).toBe(path);
			expect(served).toBe(2);

			// A new process trusts a file only as its verification record found it: one changed since is hashed at
			// its first use there.
			await damage(path);
			expect(await job(new ArtifactCache(folder))).toBe(path);
			expect(served).toBe(3);
			expect(readFileSync(path).equals(bytes)).toBe(true);

			// A runner's start-up warms its last voices from files it checks there (`cached`, never a download): one
			// unchanged since its record is not read again, nor at the first job after it; a damaged file is not
			// offered to the warm-up.
			const restarted = new ArtifactCache(folder);
			expect(await restarted.cached(index)).toBe(path);
			expect(restarted.checksumsComputed).toBe(0);
			expect(restarted.recordsTrusted).toBe(1);
			expect(await job(restarted)).toBe(path);
			expect(restarted.checksumsComputed).toBe(0);
			await damage(path);
			const restartedOnDamage = new ArtifactCache(folder);
			expect(await restartedOnDamage.cached(index)).toBeUndefined();
			expect(served).toBe(3);
			expect(await job(restartedOnDamage)).toBe(path);
			expect(served).toBe(4);
		} finally {
			indexServer.close();
		}
	});

	it("trusts the verification of another runner sharing the folder, and hashes a file changed since", async () => {
		// A real checkpoint (torch wrote it), 110 MB: what each runner hashed again after the other's use.
		const bytes = gunzipSync(readFileSync(join(import.meta.dirname, "rvc/fixtures/full-size-v2-40k-fp32.pth.gz")));
		let served = 0;
		const modelServer = createServer((_request, response) => {
			served++;
			response.writeHead(200).end(bytes);
		});
		await new Promise<void>((resolve) => modelServer.listen(0, "127.0.0.1", resolve));
		try {
			const model = {
				name: "model",
				url: `http://127.0.0.1:${(modelServer.address() as AddressInfo).port}/model`,
				sha256: createHash("sha256").update(bytes).digest("hex"),
				size_bytes: bytes.length,
			};
			const job = async (cache: ArtifactCache) => {
				const hold = cache.hold();
				const path = (await hold.ensureAll([model], signal)).get("model") as string;
				hold.release();
				return path;
			};
			const folder = join(dir, "shared");
			const one = new ArtifactCache(folder);
			const two = new ArtifactCache(folder);
			const path = await job(one);
			expect(served).toBe(1);
			// The runners take turns with the voice, each use touching the file: none hashes it again.
			for (let turn = 0; turn < 3; turn++) {
				expect(await job(two)).toBe(path);
				expect(await job(one)).toBe(path);
			}
			expect(two.checksumsComputed + one.checksumsComputed).toBe(0);
			expect(two.recordsTrusted).toBe(3);
			expect(one.recordsTrusted).toBe(3);
			// A restart's warm-up trusts it too; the record is whole, beside its file, and nothing else is left.
			const restarted = new ArtifactCache(folder);
			expect(await restarted.cached(model)).toBe(path);
			expect(restarted.checksumsComputed).toBe(0);
			expect(readdirSync(folder).sort()).toEqual([`${model.sha256}.bin`, `${model.sha256}.verified`]);
			expect(JSON.parse(readFileSync(join(folder, `${model.sha256}.verified`), "utf8"))).toMatchObject({
				sha256: model.sha256,
			});

			// One byte flipped in place, its mtime put back as it was (same inode, size and mtime): its ctime
			// changed, so the record no longer vouches for it, and it is hashed and downloaded again.
			const { mtime } = statSync(path);
			const file = await open(path, "r+");
			await file.write(Uint8Array.of((bytes[1000] as number) ^ 0x01), 0, 1, 1000);
			await file.close();
			utimesSync(path, mtime, mtime);
			expect(await job(two)).toBe(path);
			expect(two.checksumsComputed).toBe(1);
			expect(served).toBe(2);
			expect(readFileSync(path).equals(bytes)).toBe(true);
			expect(await job(one)).toBe(path);
			expect(one.checksumsComputed).toBe(0);

			// Truncated behind the runners' backs: never used, downloaded again.
			truncateSync(path, 1000);
			expect(await job(one)).toBe(path);
			expect(served).toBe(3);
			expect(readFileSync(path).equals(bytes)).toBe(true);

			// A record that is not whole, or names another file, is no reason to trust: the file is hashed.
			writeFileSync(join(folder, `${model.sha256}.verified`), '{"sha256":"');
			const fresh = new ArtifactCache(folder);
			expect(await job(fresh)).toBe(path);
			expect(fresh.checksumsComputed).toBe(1);
			const record = JSON.parse(readFileSync(join(folder, `${model.sha256}.verified`), "utf8"));
			writeFileSync(join(folder, `${model.sha256}.verified`), JSON.stringify({ ...record, stamp: "1:2:3:4" }));
			const another = new ArtifactCache(folder);
			expect(await another.cached(model)).toBe(path);
			expect(another.checksumsComputed).toBe(1);
			expect(served).toBe(3);
		} finally {
			modelServer.close();
		}
	});

	it("rejects a download whose checksum does not match and leaves nothing behind", async () => {
		const cache = new ArtifactCache(join(dir, "bad"));
		await expect(cache.hold().ensureAll([artifact(1, { sha256: "0".repeat(64) })], signal)).rejects.toThrow(
			/failed verification/,
		);
		expect(readdirSync(join(dir, "bad"))).toEqual([]);
	});

	it("reports HTTP errors", async () => {
		const cache = new ArtifactCache(join(dir, "missing"));
		await expect(cache.hold().ensureAll([artifact(1, { url: `${base}/missing` })], signal)).rejects.toThrow(/HTTP 404/);
	});

	it("past its budget, removes the least recently used artifacts with what was built beside them", async () => {
		const removed: string[] = [];
		const folder = join(dir, "budget");
		const cache = new ArtifactCache(folder, { maxBytes: 2.5 * SIZE, onRemoved: (sha) => removed.push(sha) });
		const [sha1, sha2, sha3] = sha256s as [string, string, string];
		await use(cache, 1, 60);
		// What the engine builds from a checkpoint goes with it (synthesizer-file.ts names it by the checksum).
		const built = join(folder, `${sha1}.synthesizer-v3.onnx`);
		writeFileSync(built, new Uint8Array(1000));
		const old = new Date(Date.now() - 60 * 60_000);
		utimesSync(built, old, old);
		await use(cache, 2, 30);
		// The third download takes the folder over its budget; the one used longest ago goes.
		await use(cache, 3, 0);
		await cache.trim(); // after the trims the downloads started
		expect(removed).toEqual([sha1]);
		// Each with its verification record.
		expect(readdirSync(folder).sort()).toEqual(files(sha2, sha3));
		// A removed artifact is downloaded again by the next job that needs it.
		const before = downloads;
		await use(cache, 1, 0);
		expect(downloads - before).toBe(1);
		expect((await cache.trim()).bytesAfter).toBeLessThanOrEqual(2.5 * SIZE);
		expect(readdirSync(folder).sort()).toEqual(files(sha1, sha3));
	});

	it("never removes what a job holds or what was used in the last ten minutes, and each use counts", async () => {
		const folder = join(dir, "held");
		const removed: string[] = [];
		const cache = new ArtifactCache(folder, { maxBytes: 1, onRemoved: (sha) => removed.push(sha) });
		const [sha1, sha2, sha3] = sha256s as [string, string, string];
		await use(cache, 2, 60);
		const job = cache.hold();
		const held = (await job.ensureAll([artifact(1)], signal)).get("file1") as string;
		const old = new Date(Date.now() - 90 * 60_000);
		utimesSync(held, old, old);
		await use(cache, 3, 0);

		const report = await cache.trim();
		expect(removed).toEqual([sha2]);
		expect(report.bytesAfter).toBe(2 * SIZE); // over the budget: all that is left is held or recent
		job.release();
		expect((await cache.trim()).removed).toEqual([sha1]);

		// Using an artifact makes it recent again.
		const three = join(folder, `${sha3}.bin`);
		utimesSync(three, old, old);
		const hit = cache.hold();
		await hit.ensureAll([artifact(3)], signal);
		hit.release();
		expect(statSync(three).mtimeMs).toBeGreaterThan(Date.now() - 60_000);
		expect((await cache.trim()).removed).toEqual([]);
		expect(readdirSync(folder).sort()).toEqual(files(sha3));
		expect(removed).toEqual([sha2, sha1]);
		await expect(job.ensureAll([artifact(1)], signal)).rejects.toThrow(/after its release/);
	});

	it("holds an adopted file from before it is in place", async () => {
		const folder = join(dir, "adopted");
		const cache = new ArtifactCache(folder, { maxBytes: 1 });
		const validation = cache.hold();
		const file = await validation.adopt(`${base}/2`, "model", signal);
		expect(file).toMatchObject({ sha256: sha256s[1], sizeBytes: SIZE });
		const old = new Date(Date.now() - 60 * 60_000);
		utimesSync(file.path, old, old);
		expect((await cache.trim()).removed).toEqual([]);
		validation.release();
		expect((await cache.trim()).removed).toEqual([sha256s[1]]);
	});

	it("discards a deleted voice's files with what was built from them, or none of them while a job holds one", async () => {
		const folder = join(dir, "discarded");
		const removed: string[] = [];
		const cache = new ArtifactCache(folder, { onRemoved: (sha) => removed.push(sha) });
		const [sha1, sha2, sha3] = sha256s as [string, string, string];
		await use(cache, 1, 0);
		await use(cache, 2, 0);
		await use(cache, 3, 0);
		writeFileSync(join(folder, `${sha1}.synthesizer.onnx`), "built from the checkpoint");
		const job = cache.hold();
		await job.ensureAll([artifact(2)], signal);
		expect(await cache.discard([sha1, sha2])).toBe(false);
		expect(removed).toEqual([]);
		job.release();
		expect(await cache.discard([sha1, sha2])).toBe(true);
		expect(removed).toEqual([sha1, sha2]);
		expect(readdirSync(folder).sort()).toEqual(files(sha3));
	});

	it("leaves a deleted voice's files that another runner sharing the folder used in the last ten minutes", async () => {
		const folder = join(dir, "discarded-shared");
		const here = new ArtifactCache(folder);
		const there = new ArtifactCache(folder);
		const [sha1] = sha256s as [string];
		// This runner converted with the voice just now: its own use does not stop the removal.
		const own = here.hold();
		await own.ensureAll([artifact(1)], signal);
		own.release();
		expect(await here.discard([sha1])).toBe(true);
		expect(readdirSync(folder)).toEqual([]);

		// Another runner's job, a conversion accepted before the deletion, holds the file where this one cannot see it.
		const job = there.hold();
		const path = (await job.ensureAll([artifact(1)], signal)).get("file1") as string;
		expect(await here.discard([sha1])).toBe(false);
		expect(readFileSync(path).length).toBe(SIZE);
		job.release();
		// Once nobody used it for ten minutes, it goes.
		const old = new Date(Date.now() - 11 * 60_000);
		utimesSync(path, old, old);
		expect(await here.discard([sha1])).toBe(true);
		expect(readdirSync(folder)).toEqual([]);
	});

	it("removes the unfinished downloads and builds a killed runner left, but not those under way", async () => {
		const folder = join(dir, "unfinished");
		const cache = new ArtifactCache(folder, { maxBytes: 10 * SIZE });
		await use(cache, 1, 0);
		// A runner killed mid-download (or mid-build) leaves its temporary; nothing of it is written after.
		const stale = [".download-dead", ".synthesizer-dead", ".verified-dead"];
		const old = new Date(Date.now() - 11 * 60_000);
		for (const name of stale) {
			writeFileSync(join(folder, name), new Uint8Array(SIZE));
			utimesSync(join(folder, name), old, old);
		}
		// One written a moment ago may be another runner's download in progress, sharing the folder.
		writeFileSync(join(folder, ".download-live"), new Uint8Array(SIZE));

		// At start (the runner trims once) and after each download.
		expect(await cache.trim()).toEqual({ bytesAfter: SIZE, removed: [] });
		expect(readdirSync(folder).sort()).toEqual([".download-live", ...files(sha256s[0] as string)].sort());
	});
});

describe("voice affinity", () => {
	it("forgets the voices whose artifact the cache removed", () => {
		const affinity = new VoiceAffinity();
		affinity.remember("v1", ["a", "shared"]);
		affinity.remember("v2", ["b", "shared"]);
		affinity.remember("v3", ["c"]);
		expect(affinity.list()).toEqual(["v3", "v2", "v1"]);
		affinity.forgetArtifact("a");
		expect(affinity.list()).toEqual(["v3", "v2"]);
		affinity.forgetArtifact("shared");
		expect(affinity.list()).toEqual(["v3"]);
		affinity.remember("v1", ["a"]);
		expect(affinity.list()).toEqual(["v1", "v3"]);
	});

	it("names a deleted voice's own files that no other voice uses, never the shared base models", () => {
		const affinity = new VoiceAffinity();
		const file = (name: string, sha256: string) => ({ name, sha256, url: "https://x.invalid/", size_bytes: 1 });
		const bases = [file("contentvec", "cv"), file("rmvpe", "rm")];
		affinity.rememberVoice({ id: "gone", artifacts: [file("synthesizer", "s1"), file("index", "i1"), ...bases] });
		affinity.rememberVoice({ id: "twin", artifacts: [file("synthesizer", "s2"), file("index", "i1"), ...bases] });
		expect(affinity.ownFiles("gone")).toEqual(["s1"]);
		affinity.forget("gone");
		expect(affinity.list()).toEqual(["twin"]);
		expect(affinity.ownFiles("twin")).toEqual(["s2", "i1"]);
		expect(affinity.ownFiles("unknown")).toEqual([]);
	});
});

describe("health and metrics endpoint", () => {
	it("reports state, execution providers and Prometheus metrics", async () => {
		const metrics = new RunnerMetrics();
		let status: RunnerState = "starting";
		const server = await startHealthServer({
			host: "127.0.0.1",
			port: 0,
			metrics,
			snapshot: () => ({
				status,
				runner_id: "r1",
				active_jobs: 0,
				capacity: 2,
				engines: { dsp: { execution_provider: "cpu" } },
				api: { reachable: false, failing_since: "2026-11-24T06:00:00.000Z", error: "lease: HTTP 503" },
			}),
		});
		try {
			const url = `http://127.0.0.1:${server.port}`;
			expect((await fetch(`${url}/healthz`)).status).toBe(503);
			status = "busy";
			const healthy = await fetch(`${url}/healthz`);
			expect(healthy.status).toBe(200);
			// An unreachable Worker is said, but is no reason for a 503: restarting the runner would not help.
			expect(await healthy.json()).toMatchObject({
				status: "busy",
				engines: { dsp: { execution_provider: "cpu" } },
				api: { reachable: false, failing_since: "2026-11-24T06:00:00.000Z" },
			});
			metrics.jobs.inc({ engine: "dsp", outcome: "completed" });
			const text = await (await fetch(`${url}/metrics`)).text();
			expect(text).toContain('runner_jobs_total{engine="dsp",outcome="completed"} 1');
			expect((await fetch(`${url}/nope`)).status).toBe(404);
		} finally {
			await server.close();
		}
	});
});

describe("engine registry", () => {
	it("loads and self-tests the dsp engine", async () => {
		const engines = await loadEngines(["dsp"], { cacheDir: tmpdir(), logger: silentLogger });
		expect(engines.get("dsp")?.info.executionProvider).toBe("cpu");
	});

	it("loads engines through injectable loaders and stops on a failed self-test", async () => {
		const failing = async () => () => ({
			name: "rvc" as const,
			init: async () => {
				throw new Error("no CUDA and no CPU fallback");
			},
			inputFormat: () => ({ sampleRate: 16_000, channels: 1 }),
			outputFormat: () => ({ sampleRate: 40_000, channels: 1 }),
			convert: async function* () {},
			dispose: async () => {},
		});
		await expect(loadEngines(["rvc"], { cacheDir: tmpdir(), logger: silentLogger }, { rvc: failing })).rejects.toThrow(
			/no CUDA/,
		);
	});
});
