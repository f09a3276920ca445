/**
 * Offline access to Signalsmith Stretch (MIT, by Geraint Luff; a maintained phase-vocoder pitch/time
 * library with formant compensation) from its official npm build.
 *
 * The npm package only ships an AudioWorklet wrapper around the wasm module. Loaded where
 * `AudioWorkletProcessor` and `registerProcessor` exist, it registers a processor class whose constructor
 * instantiates the wasm module; we provide those two globals for the import, construct the class once per
 * job to get a private wasm instance, and call the module's C exports directly (`_presetDefault`,
 * `_setBuffers`, `_process`, ...). These exports are the library's C API, but the way we reach them is an
 * implementation detail of the package: the version is pinned in package.json and the dsp tests exercise
 * this path end to end, so an upgrade that changes it fails loudly.
 */

interface StretchWasm {
	HEAP8?: Int8Array;
	exports?: { memory: { buffer: ArrayBuffer } };
	_presetDefault(channels: number, sampleRate: number): void;
	_configure(channels: number, blockSamples: number, intervalSamples: number, splitComputation: boolean): void;
	_setBuffers(channels: number, length: number): number;
	_inputLatency(): number;
	_outputLatency(): number;
	_reset(): void;
	_setTransposeSemitones(semitones: number, tonalityLimit: number): void;
	_setFormantSemitones(semitones: number, compensatePitch: boolean): void;
	_setFormantBase(baseFrequency: number): void;
	_process(inputSamples: number, outputSamples: number): void;
}

type ProcessorClass = new (options: object) => { wasmModule: StretchWasm | null };

let processorClass: Promise<ProcessorClass> | undefined;

function loadProcessorClass(): Promise<ProcessorClass> {
	processorClass ??= (async () => {
		const scope = globalThis as Record<string, unknown>;
		let captured: ProcessorClass | undefined;
		scope.AudioWorkletProcessor = class {
			port = { postMessage() {}, onmessage: null };
		};
		scope.registerProcessor = (_name: string, cls: ProcessorClass) => {
			captured = cls;
		};
		try {
			await import("signalsmith-stretch");
		} finally {
			delete scope.AudioWorkletProcessor;
			delete scope.registerProcessor;
		}
		if (!captured) throw new Error("signalsmith-stretch did not register its processor; has the package changed?");
		return captured;
	})();
	return processorClass;
}

let instantiating = 0;

async function instantiate(): Promise<StretchWasm> {
	const Processor = await loadProcessorClass();
	const scope = globalThis as Record<string, unknown>;
	// The processor reads the AudioWorkletGlobalScope's `sampleRate` in its constructor and again when its wasm
	// is ready; keep a placeholder until then (our real rate is set later by `_presetDefault`).
	instantiating++;
	scope.sampleRate = 48_000;
	try {
		const processor = new Processor({});
		for (let waited = 0; !processor.wasmModule; waited++) {
			if (waited > 5000) throw new Error("signalsmith-stretch wasm did not initialise within 5 s");
			await new Promise((resolve) => setTimeout(resolve, 1));
		}
		return processor.wasmModule;
	} finally {
		if (--instantiating === 0) delete scope.sampleRate;
	}
}

export interface StretchSettings {
	semitones: number;
	/** Formant shift in semitones, applied on top of formant compensation. */
	formantSemitones: number;
	/** Rough fundamental for the formant analysis in Hz; 0 lets the library track it. */
	formantBaseHz: number;
	/** Partials above this frequency are treated as noise, not tones. */
	tonalityLimitHz: number;
}

/** One pitch shifter: fixed channel count and rate, processes blocks of up to `maxBlock` frames in place order. */
export class PitchShifter {
	readonly latencyFrames: number;
	/** Input frames the library needs beyond the current position (input-side latency). */
	readonly inputLatencyFrames: number;
	/** How far, in output frames, the output lags the library's processing position. */
	readonly outputLatencyFrames: number;
	readonly maxBlock: number;
	#wasm: StretchWasm;
	#channels: number;
	#pointer: number;

	private constructor(wasm: StretchWasm, channels: number, maxBlock: number) {
		this.#wasm = wasm;
		this.#channels = channels;
		this.maxBlock = maxBlock;
		this.#pointer = wasm._setBuffers(channels, maxBlock);
		this.inputLatencyFrames = wasm._inputLatency();
		this.outputLatencyFrames = wasm._outputLatency();
		this.latencyFrames = this.inputLatencyFrames + this.outputLatencyFrames;
	}

	/**
	 * The library as a pure time-stretcher: no transposition, no formant handling. `process` with more output than
	 * input frames stretches the audio in time and keeps every frequency where it was (the library only misplaces
	 * frequencies when it transposes; see the README's dsp section). The default preset's block (0.12 s), with
	 * `intervalFrames` between analyses.
	 */
	static async createTimeStretcher(
		channels: number,
		sampleRate: number,
		maxBlock: number,
		intervalFrames: number,
	): Promise<PitchShifter> {
		const wasm = await instantiate();
		wasm._configure(channels, Math.round(0.12 * sampleRate), intervalFrames, false);
		return new PitchShifter(wasm, channels, maxBlock);
	}

	static async create(
		channels: number,
		sampleRate: number,
		settings: StretchSettings,
		maxBlock = 2048,
	): Promise<PitchShifter> {
		const wasm = await instantiate();
		wasm._presetDefault(channels, sampleRate);
		const shifter = new PitchShifter(wasm, channels, maxBlock);
		wasm._setTransposeSemitones(settings.semitones, settings.tonalityLimitHz / sampleRate);
		// `true`: compensate the formants for the pitch shift (keep the vocal tract), then move them by formantSemitones.
		wasm._setFormantSemitones(settings.formantSemitones, true);
		wasm._setFormantBase(settings.formantBaseHz / sampleRate);
		return shifter;
	}

	/**
	 * Process `frames` ≤ maxBlock input frames into `outputFrames` ≤ maxBlock output frames (by default as many:
	 * output delayed by `latencyFrames`; more or fewer stretch or squeeze the audio in time); returns new arrays.
	 */
	process(input: Float32Array[], frames: number, outputFrames = frames): Float32Array[] {
		const blockBytes = this.maxBlock * 4;
		let memory = this.#memory();
		for (let c = 0; c < this.#channels; c++) {
			const target = new Float32Array(memory, this.#pointer + blockBytes * c, frames);
			const source = input[c];
			if (source) target.set(source.subarray(0, frames));
			else target.fill(0);
		}
		this.#wasm._process(frames, outputFrames);
		memory = this.#memory(); // wasm memory may have grown and detached the old buffer
		const output: Float32Array[] = [];
		for (let c = 0; c < this.#channels; c++) {
			output.push(new Float32Array(memory, this.#pointer + blockBytes * (c + this.#channels), outputFrames).slice());
		}
		return output;
	}

	#memory(): ArrayBuffer {
		const buffer = this.#wasm.exports ? this.#wasm.exports.memory.buffer : this.#wasm.HEAP8?.buffer;
		if (!buffer) throw new Error("signalsmith-stretch wasm memory is not reachable");
		return buffer as ArrayBuffer;
	}
}

/**
 * A pitch shifter whose output lines up with its input frame for frame: the shifter's latency is dropped from the
 * start and pushed out with silence at the end (`flush`), so exactly as many frames come out as went in.
 */
export class AlignedPitchShifter {
	readonly #shifter: PitchShifter;
	#latencyLeft: number;
	#framesIn = 0;
	#framesOut = 0;

	private constructor(shifter: PitchShifter) {
		this.#shifter = shifter;
		this.#latencyLeft = shifter.latencyFrames;
	}

	static async create(channels: number, sampleRate: number, settings: StretchSettings): Promise<AlignedPitchShifter> {
		return new AlignedPitchShifter(await PitchShifter.create(channels, sampleRate, settings));
	}

	/** Shifts `block` (any length); yields, in order, the shifted frames it releases (none while the latency fills). */
	*push(block: Float32Array[]): Generator<Float32Array[]> {
		const total = block[0]?.length ?? 0;
		const { maxBlock } = this.#shifter;
		for (let start = 0; start < total; start += maxBlock) {
			const frames = Math.min(maxBlock, total - start);
			this.#framesIn += frames;
			const out = this.#aligned(
				this.#shifter.process(
					block.map((c) => c.subarray(start, start + frames)),
					frames,
				),
				frames,
			);
			if (out) yield out;
		}
	}

	/** Yields the frames still inside the shifter, pushing silence through until every input frame has come out. */
	*flush(): Generator<Float32Array[]> {
		const { maxBlock } = this.#shifter;
		const silence = [new Float32Array(maxBlock)];
		while (this.#framesOut < this.#framesIn) {
			const out = this.#aligned(this.#shifter.process(silence, maxBlock), maxBlock);
			if (out) yield out;
		}
	}

	#aligned(out: Float32Array[], frames: number): Float32Array[] | undefined {
		const drop = Math.min(this.#latencyLeft, frames);
		this.#latencyLeft -= drop;
		// The flush may run past the input's length.
		const length = Math.min(frames - drop, this.#framesIn - this.#framesOut);
		if (length <= 0) return undefined;
		this.#framesOut += length;
		return out.map((c) => c.subarray(drop, drop + length));
	}
}

/**
 * One mono `AlignedPitchShifter` per channel. Signalsmith Stretch shifts the channels of one instance together,
 * with one formant envelope and one frequency analysis for all of them; with formant compensation on, channels
 * whose content differs bleed into each other and lose their pitch (a stereo source with 440 Hz on the left and
 * 660 Hz on the right, shifted up 4 semitones, came out near 440 Hz on the left and 610 Hz on the right, each
 * channel also carrying the other's partials). Separate instances shift every channel on its own; identical
 * channels still come out identical, since the processing is deterministic.
 */
export class ChannelwisePitchShifter {
	readonly #shifters: AlignedPitchShifter[];

	private constructor(shifters: AlignedPitchShifter[]) {
		this.#shifters = shifters;
	}

	static async create(
		channels: number,
		sampleRate: number,
		settings: StretchSettings,
	): Promise<ChannelwisePitchShifter> {
		const shifters: AlignedPitchShifter[] = [];
		for (let c = 0; c < channels; c++) shifters.push(await AlignedPitchShifter.create(1, sampleRate, settings));
		return new ChannelwisePitchShifter(shifters);
	}

	/** Shifts `block` (one array per channel, any length); yields the shifted frames as they are released. */
	*push(block: Float32Array[]): Generator<Float32Array[]> {
		const frames = block[0]?.length ?? 0;
		yield* this.#zip(this.#shifters.map((shifter, c) => shifter.push([block[c] ?? new Float32Array(frames)])));
	}

	/** Yields the frames still inside the shifters. */
	*flush(): Generator<Float32Array[]> {
		yield* this.#zip(this.#shifters.map((shifter) => shifter.flush()));
	}

	/** The shifters see the same frame counts, so they release blocks of the same lengths in step. */
	*#zip(outputs: Generator<Float32Array[]>[]): Generator<Float32Array[]> {
		for (;;) {
			const next = outputs.map((output) => output.next());
			if (next.every((n) => n.done)) return;
			yield next.map((n) => {
				if (n.done) throw new Error("pitch shifters of one job fell out of step");
				return n.value[0] as Float32Array;
			});
		}
	}
}
