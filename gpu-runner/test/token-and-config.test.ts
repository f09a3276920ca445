import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RUNNER_SCOPE } from "../../src/contracts/runner.ts";
import { RunnerApiClient } from "../src/api/runner-api-client.ts";
import { TokenProvider } from "../src/api/token-provider.ts";
import { ConfigError, loadConfig } from "../src/config.ts";
import { CLIENT_ID, CLIENT_SECRET, FakeRunnerApi } from "./helpers/fake-runner-api.ts";

describe("token provider", () => {
	let api: FakeRunnerApi;
	beforeEach(async () => {
		api = await new FakeRunnerApi().start();
	});
	afterEach(() => api.close());

	it("fetches a runner-scope token once and renews it before it expires", async () => {
		let now = 1_000_000;
		api.tokenLifetimeSeconds = 100;
		const tokens = new TokenProvider({
			apiBaseUrl: api.baseUrl,
			clientId: CLIENT_ID,
			clientSecret: CLIENT_SECRET,
			now: () => now,
		});
		const [a, b] = await Promise.all([tokens.get(), tokens.get()]);
		expect(a).toBe(b);
		expect(api.tokenRequests).toBe(1); // concurrent callers share one request
		now += 69_000; // renewal is due 30 s before expiry (at 70 s of 100)
		expect(await tokens.get()).toBe(a);
		now += 2_000;
		const renewed = await tokens.get();
		expect(renewed).not.toBe(a);
		expect(api.tokenRequests).toBe(2);
	});

	it("reports bad credentials without retrying forever", async () => {
		const tokens = new TokenProvider({ apiBaseUrl: api.baseUrl, clientId: CLIENT_ID, clientSecret: "wrong" });
		await expect(tokens.get()).rejects.toMatchObject({ name: "ApiError", status: 401, retryable: false });
	});

	it("gets a fresh token once when the API answers 401", async () => {
		const tokens = new TokenProvider({ apiBaseUrl: api.baseUrl, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
		const client = new RunnerApiClient({ apiBaseUrl: api.baseUrl, tokens });
		await tokens.get();
		api.faults.set("leases", { status: 401, remaining: 1 });
		const batch = await client.lease(
			{ runner_id: "r", capacity: 1, wait_seconds: 0, loaded_voice_ids: [], engines: ["dsp"] },
			new AbortController().signal,
		);
		expect(batch.leases).toEqual([]);
		expect(api.tokenRequests).toBe(2);
		expect(RUNNER_SCOPE).toBe("voice-conversion-api/runner");
	});
});

describe("config", () => {
	const minimal = {
		RUNNER_API_BASE_URL: "https://api.example.com/",
		RUNNER_CLIENT_ID: "id",
		RUNNER_CLIENT_SECRET: "s3cret",
	};

	it("applies defaults and parses lists and numbers", () => {
		const config = loadConfig({
			...minimal,
			RUNNER_ENGINES: "dsp, rvc,dsp",
			RUNNER_CAPACITY: "4",
			RUNNER_HEALTH_PORT: "",
		});
		expect(config).toMatchObject({
			apiBaseUrl: "https://api.example.com",
			capacity: 4,
			engines: ["dsp", "rvc"],
			healthPort: 8080,
			shutdownGraceSeconds: 60,
			rvcContentvecInt8: false,
			rvcFeatureArenas: undefined,
			rvcModelThreads: undefined,
			rvcCachedVoices: undefined,
			rvcIndexCacheBytes: undefined,
			artifactCacheBytes: 20e9,
		});
		expect(loadConfig({ ...minimal, RUNNER_ARTIFACT_CACHE_GB: "2.5" }).artifactCacheBytes).toBe(2.5e9);
		expect(() => loadConfig({ ...minimal, RUNNER_ARTIFACT_CACHE_GB: "0.5" })).toThrow(/RUNNER_ARTIFACT_CACHE_GB/);
		expect(loadConfig({ ...minimal, RUNNER_RVC_MODEL_THREADS: "1" }).rvcModelThreads).toBe(1);
		expect(() => loadConfig({ ...minimal, RUNNER_RVC_MODEL_THREADS: "0" })).toThrow(/RUNNER_RVC_MODEL_THREADS/);
		expect(loadConfig({ ...minimal, RUNNER_RVC_CACHED_VOICES: "3" }).rvcCachedVoices).toBe(3);
		for (const bad of ["0", "17", "1.5", "many"])
			expect(() => loadConfig({ ...minimal, RUNNER_RVC_CACHED_VOICES: bad })).toThrow(/RUNNER_RVC_CACHED_VOICES/);
		expect(loadConfig({ ...minimal, RUNNER_RVC_INDEX_CACHE_MB: "2500" }).rvcIndexCacheBytes).toBe(2.5e9);
		for (const bad of ["0", "99", "1500.5", "2GB", "1000001"])
			expect(() => loadConfig({ ...minimal, RUNNER_RVC_INDEX_CACHE_MB: bad })).toThrow(/RUNNER_RVC_INDEX_CACHE_MB: /);
		expect(config.rvcUploadedSynthesizerLimits).toEqual({});
		expect(
			loadConfig({
				...minimal,
				RUNNER_RVC_ONNX_RUN_SECONDS_PER_AUDIO_SECOND: "2.5",
				RUNNER_RVC_ONNX_RUN_MIN_SECONDS: "30",
				RUNNER_RVC_ONNX_MEMORY_MB: "4096",
			}).rvcUploadedSynthesizerLimits,
		).toEqual({ secondsPerAudioSecond: 2.5, minRunSeconds: 30, memoryBytes: 4096 * 1024 * 1024 });
		for (const [name, bad] of [
			["RUNNER_RVC_ONNX_RUN_SECONDS_PER_AUDIO_SECOND", "0"],
			["RUNNER_RVC_ONNX_RUN_MIN_SECONDS", "-1"],
			["RUNNER_RVC_ONNX_MEMORY_MB", "1.5"],
			["RUNNER_RVC_ONNX_MEMORY_MB", "8GB"],
		] as const)
			expect(() => loadConfig({ ...minimal, [name]: bad })).toThrow(new RegExp(`${name}: `));
		expect(loadConfig({ ...minimal, RUNNER_RVC_CONTENTVEC_INT8: "1" }).rvcContentvecInt8).toBe(true);
		expect(() => loadConfig({ ...minimal, RUNNER_RVC_CONTENTVEC_INT8: "yes" })).toThrow(/RUNNER_RVC_CONTENTVEC_INT8/);
		expect(loadConfig({ ...minimal, RUNNER_RVC_FEATURE_ARENAS: "true" }).rvcFeatureArenas).toBe(true);
		expect(loadConfig({ ...minimal, RUNNER_RVC_FEATURE_ARENAS: "0" }).rvcFeatureArenas).toBe(false);
		expect(() => loadConfig({ ...minimal, RUNNER_RVC_FEATURE_ARENAS: "on" })).toThrow(/RUNNER_RVC_FEATURE_ARENAS/);
	});

	it("takes only an http or https API address", () => {
		expect(loadConfig({ ...minimal, RUNNER_API_BASE_URL: "http://127.0.0.1:8787" }).apiBaseUrl).toBe(
			"http://127.0.0.1:8787",
		);
		for (const url of ["mailto:ops@example.com", "ftp://api.example.com", "file:///etc/passwd"]) {
			expect(() => loadConfig({ ...minimal, RUNNER_API_BASE_URL: url })).toThrow(
				/RUNNER_API_BASE_URL: must be an http:\/\/ or https:\/\/ URL/,
			);
		}
	});

	it("lists every problem and never echoes the secret", () => {
		let error: unknown;
		try {
			loadConfig({
				RUNNER_API_BASE_URL: "not a url",
				RUNNER_CLIENT_SECRET: "s3cret",
				RUNNER_CAPACITY: "0",
				RUNNER_ENGINES: "dsp,tts",
			});
		} catch (e) {
			error = e;
		}
		expect(error).toBeInstanceOf(ConfigError);
		const message = (error as ConfigError).message;
		for (const name of ["RUNNER_API_BASE_URL", "RUNNER_CLIENT_ID", "RUNNER_CAPACITY", "RUNNER_ENGINES"])
			expect(message).toContain(name);
		expect(message).not.toContain("s3cret");
	});
});
