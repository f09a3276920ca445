/**
 * Voices whose model artifacts this runner already holds, most recent first. Sent with lease requests as
 * `loaded_voice_ids` so the broker prefers jobs that need no download (model affinity). Voices without
 * artifacts (dsp) are not worth preferring and are not recorded; a voice is forgotten when the artifact cache
 * removes one of its files (`forgetArtifact`).
 */
import { BASE_MODEL_NAMES, type ModelArtifact } from "../../../src/contracts/runner.ts";

export class VoiceAffinity {
	readonly #limit: number;
	#recent: string[] = [];
	/** Each remembered voice's artifact checksums. */
	#artifacts = new Map<string, readonly string[]>();
	/** The checksums of each remembered voice's own files (not the deployment's base models it shares). */
	#own = new Map<string, readonly string[]>();

	/** `limit` matches the contract's maximum of 64 ids per lease request. */
	constructor(limit = 64) {
		this.#limit = limit;
	}

	/** `ownSha256s`: those of `artifactSha256s` that are the voice's own files (all of them when not given). */
	remember(voiceId: string, artifactSha256s: readonly string[], ownSha256s = artifactSha256s): void {
		this.#artifacts.set(voiceId, artifactSha256s);
		this.#own.set(voiceId, ownSha256s);
		this.#keep([voiceId, ...this.#recent.filter((id) => id !== voiceId)].slice(0, this.#limit));
	}

	/** `remember` with the voice's files as a lease names them: its own are all but the deployment's base models. */
	rememberVoice(voice: { id: string; artifacts: readonly ModelArtifact[] }): void {
		const own = voice.artifacts.filter((a) => !(BASE_MODEL_NAMES as readonly string[]).includes(a.name));
		this.remember(
			voice.id,
			voice.artifacts.map((a) => a.sha256),
			own.map((a) => a.sha256),
		);
	}

	/** The checksums of the voice's own files that no other remembered voice uses (what its deletion removes). */
	ownFiles(voiceId: string): string[] {
		const others = new Set([...this.#artifacts].filter(([id]) => id !== voiceId).flatMap(([, artifacts]) => artifacts));
		return (this.#own.get(voiceId) ?? []).filter((sha256) => !others.has(sha256));
	}

	forget(voiceId: string): void {
		this.#keep(this.#recent.filter((id) => id !== voiceId));
	}

	/** The cache removed this artifact: the voices that use it are no longer at hand. */
	forgetArtifact(sha256: string): void {
		this.#keep(this.#recent.filter((id) => !this.#artifacts.get(id)?.includes(sha256)));
	}

	#keep(recent: string[]): void {
		this.#recent = recent;
		for (const id of this.#artifacts.keys()) {
			if (recent.includes(id)) continue;
			this.#artifacts.delete(id);
			this.#own.delete(id);
		}
	}

	list(): string[] {
		return [...this.#recent];
	}
}
