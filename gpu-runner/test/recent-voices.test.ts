/** Voices converted before a restart are loaded and warmed at start, from the local artifact cache. */
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { VoiceDescriptor } from "../../src/contracts/runner.ts";
import { ArtifactCache } from "../src/artifacts/artifact-cache.ts";
import { createRvcEngine } from "../src/engines/rvc/index.ts";
import type { Logger } from "../src/logger.ts";
import { RecentVoices, warmRecentVoices } from "../src/loop/recent-voices.ts";
import { buildTinyContentVec, buildTinyRmvpe, buildTinySynthesizer } from "./rvc/support/tiny-models.ts";

let dir: string;
beforeEach(() => {
	dir = mkdtempSync(join(tmpdir(), "recent-voices-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function recordingLogger(): Logger & { lines: { level: string; message: string; fields: Record<string, unknown> }[] } {
	const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
	const log =
		(level: string) =>
		(message: string, fields: Record<string, unknown> = {}) => {
			lines.push({ level, message, fields });
		};
	return { lines, info: log("info"), warn: log("warn"), error: log("error") };
}

/** An rvc voice whose tiny models are in `cache` under their checksums. */
function cachedRvcVoice(cache: ArtifactCache, id: string): VoiceDescriptor {
	const models = {
		contentvec: buildTinyContentVec(),
		rmvpe: buildTinyRmvpe({ pitchBin: 168 }),
		synthesizer: buildTinySynthesizer({ sampleRate: 40000 }),
	};
	const artifacts = Object.entries(models).map(([name, bytes]) => ({
		name,
		url: `https://models.example/${name}?signature=secret`,
		sha256: createHash("sha256").update(bytes).digest("hex"),
		size_bytes: bytes.length,
	}));
	for (const [i, bytes] of Object.values(models).entries())
		writeFileSync(cache.pathFor(artifacts[i] as (typeof artifacts)[number]), bytes);
	return { id, name: "tiny", engine: "rvc", params: { sample_rate: 40000 }, artifacts };
}

describe("recent voices", () => {
	it("keeps the last voices with artifacts across restarts, without their signed addresses", async () => {
		const recent = new RecentVoices(dir, 2);
		const voice = (id: string, artifacts = 1): VoiceDescriptor => ({
			id,
			name: id,
			engine: "rvc",
			params: { sample_rate: 40000 },
			artifacts: Array.from({ length: artifacts }, () => ({
				name: "synthesizer",
				url: "https://models.example/x?signature=secret",
				sha256: "a".repeat(64),
				size_bytes: 3,
			})),
		});
		await recent.remember(voice("6b1c2c8e-0000-4000-8000-000000000001"));
		await recent.remember(voice("6b1c2c8e-0000-4000-8000-000000000002"));
		await recent.remember(voice("6b1c2c8e-0000-4000-8000-000000000003", 0));
		await recent.remember(voice("6b1c2c8e-0000-4000-8000-000000000001"));
		await recent.remember(voice("6b1c2c8e-0000-4000-8000-000000000004"));
		const loaded = await new RecentVoices(dir, 2).load();
		expect(loaded.map((v) => v.id)).toEqual([
			"6b1c2c8e-0000-4000-8000-000000000004",
			"6b1c2c8e-0000-4000-8000-000000000001",
		]);
		expect(readFileSync(join(dir, "recent-voices.json"), "utf8")).not.toContain("signature");

		writeFileSync(join(dir, "recent-voices.json"), "{not json");
		expect(await new RecentVoices(dir).load()).toEqual([]);
	});

	it("prepares cached rvc voices at start, the most recent last, and skips, with a warning, one whose artifacts are gone", async () => {
		const cache = new ArtifactCache(join(dir, "artifacts"));
		mkdirSync(cache.dir, { recursive: true });
		const ready = cachedRvcVoice(cache, "6b1c2c8e-0000-4000-8000-0000000000aa");
		const gone = {
			...ready,
			id: "6b1c2c8e-0000-4000-8000-0000000000bb",
			artifacts: ready.artifacts.map((a) => ({ ...a, sha256: "b".repeat(64) })),
		};
		// An engine that keeps two voices loaded warms two.
		const engine = createRvcEngine({ cachedVoices: 2 });
		const info = await engine.init();
		const logger = recordingLogger();
		try {
			await warmRecentVoices([ready, gone], new Map([["rvc", { engine, info }]]), cache, logger);
		} finally {
			await engine.dispose();
		}
		const warmed = logger.lines.find((l) => l.message === "voice warmed");
		expect(warmed?.fields.voice_id).toBe(ready.id);
		expect(warmed?.fields.milliseconds).toBeTypeOf("number");
		const skipped = logger.lines.find((l) => l.message === "voice not warmed");
		expect(skipped?.fields.voice_id).toBe(gone.id);
		expect(String(skipped?.fields.error)).toMatch(/not in the cache/);
		// The older voice first, so an engine that keeps one voice keeps the most recent.
		expect(logger.lines.indexOf(skipped as (typeof logger.lines)[number])).toBeLessThan(
			logger.lines.indexOf(warmed as (typeof logger.lines)[number]),
		);
	});

	it("warms only as many recent voices as the engine keeps loaded, the most recent", async () => {
		const cache = new ArtifactCache(join(dir, "artifacts"));
		mkdirSync(cache.dir, { recursive: true });
		const newest = cachedRvcVoice(cache, "6b1c2c8e-0000-4000-8000-0000000000cc");
		const older = { ...newest, id: "6b1c2c8e-0000-4000-8000-0000000000dd" };
		const engine = createRvcEngine();
		const info = await engine.init();
		expect(info.details?.cached_voices).toBe(1);
		const logger = recordingLogger();
		try {
			await warmRecentVoices([newest, older], new Map([["rvc", { engine, info }]]), cache, logger);
		} finally {
			await engine.dispose();
		}
		expect(logger.lines.map((l) => [l.message, l.fields.voice_id])).toEqual([["voice warmed", newest.id]]);
	});
});
