/**
 * The voices this runner converted last, kept on disk beside the artifact cache so a restarted runner can load
 * and warm their models before it leases anything (`Engine.prepare`): the first job after a start then pays
 * only for its conversion. Only voices with artifacts are kept (a `dsp` voice has nothing to warm), without
 * their signed download addresses, which expire.
 */
import { readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { VoiceDescriptor } from "../../../src/contracts/runner.ts";
import type { ArtifactCache } from "../artifacts/artifact-cache.ts";
import type { LoadedEngine } from "../engines/registry.ts";
import { describeError, type Logger } from "../logger.ts";

const FILE_NAME = "recent-voices.json";
const StoredVoices = z.array(VoiceDescriptor);

export class RecentVoices {
	readonly #path: string;
	readonly #limit: number;
	#voices: VoiceDescriptor[] = [];
	#writing: Promise<void> = Promise.resolve();

	/**
	 * `limit`: voices remembered, most recent first. Start-up warms at most these, and fewer for an engine that keeps
	 * fewer loaded (`warmRecentVoices`: the rvc engine keeps one per model thread on the CPU, four on a GPU).
	 */
	constructor(cacheDir: string, limit = 2) {
		this.#path = join(cacheDir, FILE_NAME);
		this.#limit = limit;
	}

	/** Reads what an earlier run kept; a missing or unreadable file is an empty list. */
	async load(): Promise<VoiceDescriptor[]> {
		const text = await readFile(this.#path, "utf8").catch(() => "[]");
		let parsed: unknown;
		try {
			parsed = JSON.parse(text);
		} catch {
			parsed = [];
		}
		const result = StoredVoices.safeParse(parsed);
		this.#voices = result.success ? result.data.slice(0, this.#limit) : [];
		return [...this.#voices];
	}

	/** Records a voice as the most recent; the write is serialised and its failure only loses the hint. */
	remember(voice: VoiceDescriptor): Promise<void> {
		if (voice.artifacts.length === 0) return this.#writing;
		const stored = { ...voice, artifacts: voice.artifacts.map((a) => ({ ...a, url: "https://artifact.invalid/" })) };
		return this.#save([stored, ...this.#voices.filter((v) => v.id !== voice.id)].slice(0, this.#limit));
	}

	/** The voice was deleted: it is not warmed at the next start. */
	forget(voiceId: string): Promise<void> {
		if (!this.#voices.some((v) => v.id === voiceId)) return this.#writing;
		return this.#save(this.#voices.filter((v) => v.id !== voiceId));
	}

	#save(voices: VoiceDescriptor[]): Promise<void> {
		this.#voices = voices;
		const snapshot = JSON.stringify(this.#voices);
		this.#writing = this.#writing.then(async () => {
			const temporary = `${this.#path}.${process.pid}.tmp`;
			await writeFile(temporary, snapshot).catch(() => undefined);
			await rename(temporary, this.#path).catch(() => undefined);
		});
		return this.#writing;
	}
}

/**
 * The paths of a voice's artifacts by name when the cache holds every one intact (`ArtifactCache.cached`: its size,
 * and its checksum unless this process knows the file unchanged since it last checked); else the first missing.
 */
export async function cachedArtifactPaths(
	voice: VoiceDescriptor,
	artifacts: ArtifactCache,
): Promise<{ paths: Map<string, string> } | { missing: string }> {
	const paths = new Map<string, string>();
	for (const artifact of voice.artifacts) {
		const path = await artifacts.cached(artifact);
		if (path === undefined) return { missing: artifact.name };
		paths.set(artifact.name, path);
	}
	return { paths };
}

/**
 * Prepares (loads and warms) recent voices whose engine is loaded and can prepare, and whose artifacts are all in
 * the local cache: for each engine the most recent as many as it keeps loaded (`details.cached_voices`, when it
 * says; the rvc engine keeps one per model thread on the CPU), the oldest of them first, so the most recent is
 * loaded last and kept. Failures are logged and skipped: warming is an optimisation, never a reason not to start.
 */
export async function warmRecentVoices(
	voices: readonly VoiceDescriptor[],
	engines: ReadonlyMap<string, LoadedEngine>,
	artifacts: ArtifactCache,
	logger: Logger,
): Promise<void> {
	const kept = (name: VoiceDescriptor["engine"]): number => {
		const count = engines.get(name)?.info.details?.cached_voices;
		return typeof count === "number" && count >= 1 ? count : Number.POSITIVE_INFINITY;
	};
	const chosen = voices.filter(
		(voice, i) => voices.slice(0, i).filter((v) => v.engine === voice.engine).length < kept(voice.engine),
	);
	for (const voice of chosen.reverse()) {
		const engine = engines.get(voice.engine)?.engine;
		if (engine?.prepare === undefined) continue;
		const started = performance.now();
		try {
			const cached = await cachedArtifactPaths(voice, artifacts);
			if ("missing" in cached) throw new Error(`artifact ${cached.missing} is not in the cache`);
			await engine.prepare(voice, cached.paths);
			logger.info("voice warmed", {
				voice_id: voice.id,
				engine: voice.engine,
				milliseconds: Math.round(performance.now() - started),
			});
		} catch (error) {
			logger.warn("voice not warmed", { voice_id: voice.id, engine: voice.engine, error: describeError(error) });
		}
	}
}
