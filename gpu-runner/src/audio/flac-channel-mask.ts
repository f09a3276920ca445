/**
 * The speakers a FLAC stream states for its channels. FLAC fixes a layout for each channel count (3 to 8), and a
 * file may state another in its Vorbis comment as `WAVEFORMATEXTENSIBLE_CHANNEL_MASK=0x...`: the reference
 * encoder (`flac`, libFLAC 1.2.1 on) writes that tag for a WAV source whose extensible header names speakers other
 * than FLAC's defaults, and its decoder writes the mask back into the WAV it restores.
 *
 * The tag is read as the bytes pass on to the decoder, without holding them: the metadata's other blocks (pictures
 * of up to 16 MiB, seek tables) and comments longer than any mask are skipped as they stream by.
 */

/**
 * The speakers of FLAC's own layouts, as WAVE_FORMAT_EXTENSIBLE channel masks: L R C; FL FR BL BR; FL FR FC BL BR;
 * 5.1; 6.1 (back centre, side left and right); 7.1 (side left and right after the back pair).
 */
const FLAC_DEFAULT_MASKS: Readonly<Record<number, number>> = {
	3: 0x7,
	4: 0x33,
	5: 0x37,
	6: 0x3f,
	7: 0x70f,
	8: 0x63f,
};

const MASK_TAG = "WAVEFORMATEXTENSIBLE_CHANNEL_MASK=";
/** Longer comments cannot be the mask tag (its value is at most "0x" and 8 hex digits); they are skipped. */
const LONGEST_MASK_COMMENT = MASK_TAG.length + 10;
const VORBIS_COMMENT_BLOCK = 4;

/** The channel mask for `channels` channels: the stream's tag where it names that many speakers, else FLAC's. */
export function flacChannelMask(channels: number, tagged: number | undefined): number | undefined {
	if (tagged !== undefined && tagged > 0 && bitCount(tagged) === channels) return tagged;
	return FLAC_DEFAULT_MASKS[channels];
}

/** What the reader wants next from the stream: the next `read` bytes, or to let `skip` bytes go by. */
type Want = { read: number } | { skip: number };

/**
 * Watches a FLAC stream (starting at "fLaC") as it passes through, unchanged. `mask()` is the tag's mask once the
 * metadata has gone by (the decoder has read it all before it yields audio), undefined where there is none or the
 * metadata is not as the format says (the decoder judges that).
 */
export function watchFlacChannelMask(bytes: AsyncIterable<Uint8Array>): {
	stream: AsyncIterable<Uint8Array>;
	mask: () => number | undefined;
} {
	const reader = maskTag();
	let found: number | undefined;
	let want: Want | undefined = reader.next(new Uint8Array(0)).value as Want;
	let pending = new Uint8Array(0);

	/** Feeds one chunk to the reader until it is done or wants more than the chunk holds. */
	const feed = (chunk: Uint8Array): void => {
		let at = 0;
		while (want !== undefined && at < chunk.length) {
			if ("skip" in want) {
				const step = Math.min(want.skip, chunk.length - at);
				at += step;
				want = want.skip > step ? { skip: want.skip - step } : next(new Uint8Array(0));
				continue;
			}
			const step = Math.min(want.read - pending.length, chunk.length - at);
			const joined = new Uint8Array(pending.length + step);
			joined.set(pending);
			joined.set(chunk.subarray(at, at + step), pending.length);
			pending = joined;
			at += step;
			if (pending.length === want.read) {
				const read = pending;
				pending = new Uint8Array(0);
				want = next(read);
			}
		}
	};
	const next = (bytes: Uint8Array): Want | undefined => {
		const step = reader.next(bytes);
		if (step.done) {
			found = step.value;
			return undefined;
		}
		return step.value;
	};

	return {
		stream: (async function* () {
			for await (const chunk of bytes) {
				if (want !== undefined) feed(chunk);
				yield chunk;
			}
		})(),
		mask: () => found,
	};
}

/** Reads the metadata blocks up to the Vorbis comment and returns its mask tag's value. */
function* maskTag(): Generator<Want, number | undefined, Uint8Array> {
	yield { skip: 4 }; // "fLaC"
	for (;;) {
		const header = yield { read: 4 };
		const length = ((header[1] as number) << 16) | ((header[2] as number) << 8) | (header[3] as number);
		if (((header[0] as number) & 0x7f) === VORBIS_COMMENT_BLOCK) return yield* commentMask(length);
		if ((header[0] as number) & 0x80) return undefined; // the last metadata block, and no comment
		yield { skip: length };
	}
}

/** The mask tag among a Vorbis comment block's comments (little-endian lengths, unlike the rest of FLAC). */
function* commentMask(blockLength: number): Generator<Want, number | undefined, Uint8Array> {
	let left = blockLength;
	function* length(): Generator<Want, number | undefined, Uint8Array> {
		if (left < 4) return undefined;
		left -= 4;
		const bytes = yield { read: 4 };
		return new DataView(bytes.buffer, bytes.byteOffset, 4).getUint32(0, true);
	}
	const vendor = yield* length();
	if (vendor === undefined || vendor > left) return undefined;
	left -= vendor;
	if (vendor > 0) yield { skip: vendor };
	const count = yield* length();
	for (let i = 0; count !== undefined && i < count; i++) {
		const size = yield* length();
		if (size === undefined || size > left) return undefined;
		left -= size;
		if (size === 0) continue;
		if (size > LONGEST_MASK_COMMENT) {
			yield { skip: size };
			continue;
		}
		const mask = parseMaskComment(new TextDecoder().decode(yield { read: size }));
		if (mask !== undefined) return mask;
	}
	return undefined;
}

/** `WAVEFORMATEXTENSIBLE_CHANNEL_MASK=0x0603` → 0x603 (the field name in any case, as Vorbis comments allow). */
function parseMaskComment(comment: string): number | undefined {
	if (comment.slice(0, MASK_TAG.length).toUpperCase() !== MASK_TAG) return undefined;
	const value = /^0x([0-9a-f]{1,8})$/i.exec(comment.slice(MASK_TAG.length));
	return value ? Number.parseInt(value[1] as string, 16) : undefined;
}

function bitCount(mask: number): number {
	let count = 0;
	for (let rest = mask >>> 0; rest !== 0; rest &= rest - 1) count++;
	return count;
}
