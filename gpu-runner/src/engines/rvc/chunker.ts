/**
 * Long audio in bounded memory: the input stream is cut into segments at quiet points, each segment is
 * converted with context on both sides, and neighbouring outputs are joined with a short crossfade.
 *
 * This follows RVC's `Pipeline.pipeline` (`infer/modules/vc/pipeline.py`): near every `target` samples it
 * looks `search` samples either way for the minimum of a 160-sample moving sum of |x|, cuts there (here: at
 * the quietest allowed cut position, a multiple of `cutStep`), and converts each piece with `context` samples of real audio around it (reflect padding at the
 * ends of the stream). RVC then concatenates the trimmed pieces; here the pieces overlap by a crossfade so a
 * join is click-free even where the quietest point is not silent. Unlike RVC, which needs the whole file up
 * front, segments are cut as the input arrives, so at most about target + search + 2 x context samples of
 * input are held.
 *
 * Where a join falls inside a sustained note, neighbouring pieces carry it with phases of their own (RVC's NSF
 * source starts each window's harmonics at random phases), and a crossfade of two out-of-phase tones dips, down to
 * -12 dB for 40 ms in singing. So before the crossfade, each piece is shifted by up to `alignSamples` either way
 * (10 ms: half the period of a 50 Hz note) to where its start matches the previous piece's end best; the piece's
 * timing moves by at most that much, and the output keeps its length.
 */
import { reflectIndex } from "./reflect-pad.ts";

export interface ChunkPlan {
	/** Input samples per model frame (160 at 16 kHz). */
	hop: number;
	/**
	 * Every cut is on a multiple of this many input samples (a multiple of `hop`). The engine uses 320, ContentVec's
	 * stride, so every window samples ContentVec frames on the same 20 ms grid and crossfaded neighbours agree.
	 */
	cutStep: number;
	/** Aim for segments of about this many input samples. */
	targetSamples: number;
	/** Look this many input samples either side of the target for the quietest point. */
	searchSamples: number;
	/** Input samples of context converted on each side of a segment and thrown away afterwards. */
	contextSamples: number;
	/** Output samples over which neighbouring segments are crossfaded (even). */
	crossfadeSamples: number;
	/** Output samples a piece may be shifted either way to line up with the previous one before their crossfade. */
	alignSamples: number;
	/** Output samples per input sample; `hop * outputPerInput` must be a whole number. */
	outputPerInput: number;
	/**
	 * Every window's length is a multiple of this many input samples (a multiple of `hop`): the right context
	 * is lengthened with real audio (reflected past the end of the stream) up to the next multiple, so a model
	 * sees only a few distinct input shapes. `hop` leaves windows as they are.
	 */
	windowMultiple: number;
}

export interface ChunkPlanSeconds {
	inputRate: number;
	outputRate: number;
	hop: number;
	/** Defaults to `hop`. */
	cutStep?: number;
	chunkSeconds: number;
	searchSeconds: number;
	contextSeconds: number;
	crossfadeSeconds: number;
	/** Defaults to one hop (windows as long as their segment plus context). */
	windowMultipleSeconds?: number;
}

/** How far a piece may be shifted to line up with the previous one (`ChunkPlan.alignSamples`), where context allows. */
export const JOIN_ALIGN_SECONDS = 0.01;

/** Turns durations into a plan with every input length on a frame boundary; throws on inconsistent settings. */
export function makeChunkPlan(s: ChunkPlanSeconds): ChunkPlan {
	const frames = (seconds: number): number => Math.round((seconds * s.inputRate) / s.hop) * s.hop;
	const contextSamples = frames(s.contextSeconds);
	const crossfadeSamples = 2 * Math.round((s.crossfadeSeconds * s.outputRate) / 2);
	const outputPerInput = s.outputRate / s.inputRate;
	const plan: ChunkPlan = {
		hop: s.hop,
		cutStep: s.cutStep ?? s.hop,
		targetSamples: frames(s.chunkSeconds),
		searchSamples: frames(s.searchSeconds),
		contextSamples,
		crossfadeSamples,
		// The shifted piece is read from its context, which half the crossfade uses already.
		alignSamples: Math.max(
			0,
			Math.min(Math.round(JOIN_ALIGN_SECONDS * s.outputRate), contextSamples * outputPerInput - crossfadeSamples / 2),
		),
		outputPerInput,
		windowMultiple: Math.max(s.hop, frames(s.windowMultipleSeconds ?? 0)),
	};
	validateChunkPlan(plan);
	return plan;
}

export function validateChunkPlan(plan: ChunkPlan): void {
	const problems: string[] = [];
	const hopOut = plan.hop * plan.outputPerInput;
	if (!Number.isInteger(hopOut))
		problems.push(`a frame of ${plan.hop} input samples must map to whole output samples (got ${hopOut})`);
	if (plan.cutStep < plan.hop || plan.cutStep % plan.hop !== 0)
		problems.push("the cut step must be a multiple of the hop");
	if (plan.targetSamples - plan.searchSamples < plan.cutStep)
		problems.push("chunks must be at least one cut step long");
	if (plan.contextSamples < plan.hop) problems.push("context must be at least one frame");
	if (plan.windowMultiple < plan.hop || plan.windowMultiple % plan.hop !== 0)
		problems.push("the window multiple must be a multiple of the hop");
	if (plan.searchSamples < 0 || plan.searchSamples >= plan.targetSamples)
		problems.push("search radius must be >= 0 and shorter than the chunk");
	if (plan.crossfadeSamples < 0 || plan.crossfadeSamples % 2 !== 0)
		problems.push("crossfade must be an even, non-negative number of samples");
	if (plan.crossfadeSamples / 2 > plan.contextSamples * plan.outputPerInput)
		problems.push("half the crossfade must fit in the context");
	if (!Number.isInteger(plan.alignSamples) || plan.alignSamples < 0)
		problems.push("the alignment must be a non-negative whole number of samples");
	else if (plan.crossfadeSamples / 2 + plan.alignSamples > plan.contextSamples * plan.outputPerInput)
		problems.push("half the crossfade and the alignment must fit in the context");
	for (const key of ["targetSamples", "searchSamples", "contextSamples"] as const) {
		if (plan[key] % plan.hop !== 0) problems.push(`${key} must be a multiple of the hop`);
	}
	if (problems.length > 0) throw new RangeError(`invalid chunk plan: ${problems.join("; ")}`);
}

/** One piece of work: a segment of the input with its context, ready to convert. */
export interface ChunkWindow {
	index: number;
	/** Absolute input sample positions: the segment this window is responsible for, and the converted span. */
	segmentStart: number;
	segmentEnd: number;
	windowStart: number;
	windowEnd: number;
	/** Input samples of [windowStart, windowEnd), reflect-padded where the span passes an end of the stream. */
	samples: Float32Array;
	final: boolean;
}

/** Converts one window; must return at least (windowEnd - windowStart) x outputPerInput samples. */
export type ConvertWindow = (window: ChunkWindow) => Promise<Float32Array>;

/** Growable buffer of the most recent input samples, addressed by absolute sample position. */
class InputBuffer {
	#data = new Float32Array(1 << 16);
	/** Absolute position of #data[0]. */
	#start = 0;
	#length = 0;

	get start(): number {
		return this.#start;
	}

	get end(): number {
		return this.#start + this.#length;
	}

	append(block: Float32Array): void {
		if (this.#length + block.length > this.#data.length) {
			const grown = new Float32Array(Math.max(this.#data.length * 2, this.#length + block.length));
			grown.set(this.#data.subarray(0, this.#length));
			this.#data = grown;
		}
		this.#data.set(block, this.#length);
		this.#length += block.length;
	}

	at(position: number): number {
		const i = position - this.#start;
		if (i < 0 || i >= this.#length)
			throw new RangeError(`sample ${position} is not buffered (${this.#start}..${this.end})`);
		return this.#data[i] as number;
	}

	/** Forget samples before `position`. */
	discardBefore(position: number): void {
		const drop = Math.min(Math.max(0, position - this.#start), this.#length);
		if (drop === 0) return;
		this.#data.copyWithin(0, drop, this.#length);
		this.#start += drop;
		this.#length -= drop;
	}
}

/**
 * The cut near `target`: of the multiples of `cutStep` within `search` of it, the first whose centred
 * `hop`-sample sum of |x| is smallest. RVC (`opt_ts`) takes the quietest sample and floors it to a frame;
 * choosing among the allowed cut positions directly keeps the cut inside a quiet stretch.
 */
function findQuietCut(buffer: InputBuffer, target: number, search: number, hop: number, cutStep: number): number {
	const half = hop / 2;
	const first = Math.ceil((target - search) / cutStep) * cutStep;
	let best = first;
	let bestSum = Number.POSITIVE_INFINITY;
	for (let p = first; p <= target + search; p += cutStep) {
		let sum = 0;
		for (let i = p - half; i < p + half; i++) sum += Math.abs(buffer.at(i));
		if (sum < bestSum) {
			bestSum = sum;
			best = p;
		}
	}
	return best;
}

/**
 * The shift within ±`maxShift` at which `next[at + shift ..]` matches `tail` best: the largest normalised
 * cross-correlation over the tail's length. Ties go to the smaller shift, so pieces that agree are not moved.
 */
function bestShift(tail: Float32Array, next: Float32Array, at: number, maxShift: number): number {
	const n = tail.length;
	let best = 0;
	let bestScore = Number.NEGATIVE_INFINITY;
	for (let distance = 0; distance <= maxShift; distance++) {
		for (const shift of distance === 0 ? [0] : [-distance, distance]) {
			let dot = 0;
			let energy = 0;
			for (let k = 0; k < n; k++) {
				const b = next[at + shift + k] as number;
				dot += (tail[k] as number) * b;
				energy += b * b;
			}
			const score = energy > 0 ? dot / Math.sqrt(energy) : 0;
			if (score > bestScore) {
				bestScore = score;
				best = shift;
			}
		}
	}
	return best;
}

/** Raised-cosine fade-in weight for sample k of an n-sample crossfade; the fade-out weight is 1 minus it. */
function fadeIn(k: number, n: number): number {
	return 0.5 - 0.5 * Math.cos((Math.PI * (k + 0.5)) / n);
}

/**
 * Splits `input` (mono blocks) into windows, converts each with `convert` one at a time, and yields the joined
 * output in order. The total output length is round(input length x outputPerInput).
 */
export async function* convertInChunks(
	input: AsyncIterable<Float32Array>,
	plan: ChunkPlan,
	convert: ConvertWindow,
	signal?: AbortSignal,
): AsyncGenerator<Float32Array> {
	validateChunkPlan(plan);
	const { hop, targetSamples, searchSamples, contextSamples, crossfadeSamples, windowMultiple } = plan;
	const ratio = plan.outputPerInput;
	const half = crossfadeSamples / 2;
	const buffer = new InputBuffer();
	let segmentStart = 0;
	let index = 0;
	let previousTail: Float32Array | undefined;

	const process = async function* (segmentEnd: number, total: number | undefined): AsyncGenerator<Float32Array> {
		signal?.throwIfAborted();
		const final = total !== undefined;
		const windowStart = segmentStart - contextSamples;
		const contextEnd = final ? Math.ceil((segmentEnd + contextSamples) / hop) * hop : segmentEnd + contextSamples;
		const windowEnd = windowStart + Math.ceil((contextEnd - windowStart) / windowMultiple) * windowMultiple;
		const samples = new Float32Array(windowEnd - windowStart);
		for (let i = 0; i < samples.length; i++) {
			const p = windowStart + i;
			samples[i] = buffer.at(total !== undefined ? reflectIndex(p, total) : p < 0 ? -p : p);
		}
		const window: ChunkWindow = {
			index,
			segmentStart,
			segmentEnd,
			windowStart,
			windowEnd,
			samples,
			final,
		};
		const converted = await convert(window);
		signal?.throwIfAborted();
		const outOffset = windowStart * ratio;
		const needed = samples.length * ratio;
		if (converted.length < needed) {
			throw new RangeError(
				`chunk ${index}: converter returned ${converted.length} samples for a window that needs ${needed}`,
			);
		}
		let emitStart = 0;
		// Where this piece's output is read from: its own position, shifted to line up with the previous piece.
		let offset = outOffset;
		if (previousTail !== undefined) {
			const from = segmentStart * ratio - half - outOffset;
			offset -= previousTail.length > 0 ? bestShift(previousTail, converted, from, plan.alignSamples) : 0;
			const joined = new Float32Array(crossfadeSamples);
			for (let k = 0; k < crossfadeSamples; k++) {
				const w = fadeIn(k, crossfadeSamples);
				joined[k] = (previousTail[k] as number) * (1 - w) + (converted[from + outOffset - offset + k] as number) * w;
			}
			yield joined;
			emitStart = segmentStart * ratio + half;
		}
		const emitEnd = final ? Math.round(total * ratio) : segmentEnd * ratio - half;
		if (emitEnd > emitStart) yield converted.slice(emitStart - offset, emitEnd - offset);
		previousTail = final
			? undefined
			: converted.slice(segmentEnd * ratio - half - offset, segmentEnd * ratio + half - offset);
		index++;
		segmentStart = segmentEnd;
		buffer.discardBefore(segmentStart - contextSamples);
	};

	for await (const block of input) {
		signal?.throwIfAborted();
		buffer.append(block);
		// Enough is buffered for the furthest cut, its context and the lengthening of its window.
		while (buffer.end >= segmentStart + targetSamples + searchSamples + contextSamples + windowMultiple) {
			const cut = findQuietCut(buffer, segmentStart + targetSamples, searchSamples, hop, plan.cutStep);
			yield* process(Math.max(cut, segmentStart + plan.cutStep), undefined);
		}
	}
	const total = buffer.end;
	if (total > segmentStart) yield* process(total, total);
}
