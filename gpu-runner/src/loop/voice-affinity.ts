/**
 * Voices whose model artifacts this runner already holds, most recent first. Sent with lease requests as
 * `loaded_voice_ids` so the broker prefers jobs that need no download (model affinity). Voices without
 * artifacts (dsp) are not worth preferring and are not recorded; a voice is forgotten when the artifact cache
 * removes one of its files (`forgetArtifact`).
 */
export class VoiceAffinity {
	readonly #limit: number;
	#recent: string[] = [];
	/** Each remembered voice's artifact checksums. */
	#artifacts = new Map<string, readonly string[]>();

	/** `limit` matches the contract's maximum of 64 ids per lease request. */
	constructor(limit = 64) {
		this.#limit = limit;
	}

	remember(voiceId: string, artifactSha256s: readonly string[]): void {
		this.#artifacts.set(voiceId, artifactSha256s);
		this.#keep([voiceId, ...this.#recent.filter((id) => id !== voiceId)].slice(0, this.#limit));
	}

	/** The cache removed this artifact: the voices that use it are no longer at hand. */
	forgetArtifact(sha256: string): void {
		this.#keep(this.#recent.filter((id) => !this.#artifacts.get(id)?.includes(sha256)));
	}

	#keep(recent: string[]): void {
		this.#recent = recent;
		for (const id of this.#artifacts.keys()) if (!recent.includes(id)) this.#artifacts.delete(id);
	}

	list(): string[] {
		return [...this.#recent];
	}
}
