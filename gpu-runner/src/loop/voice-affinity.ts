/**
 * Voices whose model artifacts this runner already holds, most recent first. Sent with lease requests as
 * `loaded_voice_ids` so the broker prefers jobs that need no download (model affinity). Voices without
 * artifacts (dsp) are not worth preferring and are not recorded.
 */
export class VoiceAffinity {
	readonly #limit: number;
	#recent: string[] = [];

	/** `limit` matches the contract's maximum of 64 ids per lease request. */
	constructor(limit = 64) {
		this.#limit = limit;
	}

	remember(voiceId: string): void {
		this.#recent = [voiceId, ...this.#recent.filter((id) => id !== voiceId)].slice(0, this.#limit);
	}

	list(): string[] {
		return [...this.#recent];
	}
}
