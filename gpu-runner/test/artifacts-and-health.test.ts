import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArtifactCache } from "../src/artifacts/artifact-cache.ts";
import { loadEngines } from "../src/engines/registry.ts";
import { silentLogger } from "../src/logger.ts";
import { type RunnerState, startHealthServer } from "../src/observability/health-server.ts";
import { RunnerMetrics } from "../src/observability/metrics.ts";

describe("artifact cache", () => {
	const payload = new Uint8Array(300_000).map((_, i) => (i * 17) % 256);
	const sha256 = createHash("sha256").update(payload).digest("hex");
	let server: Server;
	let base = "";
	let downloads = 0;
	let dir: string;

	beforeAll(async () => {
		dir = mkdtempSync(join(tmpdir(), "artifacts-"));
		server = createServer((request, response) => {
			downloads++;
			response
				.writeHead(request.url?.startsWith("/missing") ? 404 : 200)
				.end(request.url?.startsWith("/missing") ? "" : payload);
		});
		await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
		base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
	});
	afterAll(() => {
		server.close();
		rmSync(dir, { recursive: true, force: true });
	});

	const artifact = (overrides = {}) => ({
		name: "synthesizer",
		url: `${base}/model.onnx?sig=x`,
		sha256,
		size_bytes: payload.length,
		...overrides,
	});

	it("downloads once, verifies the checksum and serves later jobs from disk", async () => {
		const cache = new ArtifactCache(join(dir, "ok"));
		const signal = new AbortController().signal;
		const [a, b] = await Promise.all([cache.ensure(artifact(), signal), cache.ensure(artifact(), signal)]);
		expect(a).toBe(b);
		expect(downloads).toBe(1);
		expect(new Uint8Array(readFileSync(a))).toEqual(payload);
		const paths = await cache.ensureAll([artifact()], signal);
		expect(paths.get("synthesizer")).toBe(a);
		expect(downloads).toBe(1);
	});

	it("rejects a download whose checksum does not match and leaves nothing behind", async () => {
		const cache = new ArtifactCache(join(dir, "bad"));
		await expect(cache.ensure(artifact({ sha256: "0".repeat(64) }), new AbortController().signal)).rejects.toThrow(
			/failed verification/,
		);
		expect(readdirSync(join(dir, "bad"))).toEqual([]);
	});

	it("reports HTTP errors", async () => {
		const cache = new ArtifactCache(join(dir, "missing"));
		await expect(cache.ensure(artifact({ url: `${base}/missing` }), new AbortController().signal)).rejects.toThrow(
			/HTTP 404/,
		);
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
			}),
		});
		try {
			const url = `http://127.0.0.1:${server.port}`;
			expect((await fetch(`${url}/healthz`)).status).toBe(503);
			status = "busy";
			const healthy = await fetch(`${url}/healthz`);
			expect(healthy.status).toBe(200);
			expect(await healthy.json()).toMatchObject({ status: "busy", engines: { dsp: { execution_provider: "cpu" } } });
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
