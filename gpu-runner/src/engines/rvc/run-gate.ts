/**
 * At most `slots` model runs at once across all sessions, the others waiting in arrival order. On the CPU each
 * run already uses the session's threads (by default one per core): two jobs running models at the same time
 * (`RUNNER_CAPACITY` 2) would put twice as many threads on the cores, and each run would wait on the other's.
 * Through the gate the jobs take turns run by run, so they share the cores without contention and the
 * non-model work of one (decoding, log-mel, pitch, upload) overlaps the other's model runs.
 */
export class RunGate {
	readonly #slots: number;
	#running = 0;
	readonly #waiting: (() => void)[] = [];

	constructor(slots: number) {
		if (!(slots >= 1)) throw new RangeError(`a run gate needs at least one slot, got ${slots}`);
		this.#slots = slots;
	}

	async run<T>(task: () => Promise<T>): Promise<T> {
		if (this.#running < this.#slots) this.#running++;
		else await new Promise<void>((resolve) => this.#waiting.push(resolve));
		try {
			return await task();
		} finally {
			// Hand the slot straight to the next in line, or give it back.
			const next = this.#waiting.shift();
			if (next !== undefined) next();
			else this.#running--;
		}
	}
}
