/**
 * A stream that was read ahead (to sniff a format, to peek at the first block) must be handed on whole: the items
 * already taken, then the rest of the same iterator. Closing the result closes the underlying iterator.
 */
export async function* replayThen<T>(taken: readonly T[], iterator: AsyncIterator<T>): AsyncGenerator<T> {
	try {
		yield* taken;
		for (;;) {
			const next = await iterator.next();
			if (next.done) return;
			yield next.value;
		}
	} finally {
		await iterator.return?.();
	}
}
