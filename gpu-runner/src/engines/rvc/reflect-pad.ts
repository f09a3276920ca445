/**
 * Index into a signal of length `n` as numpy's and torch's "reflect" padding does: the edge sample is not
 * repeated (…, x2, x1, x0, x1, x2, …). Pads longer than the signal keep reflecting, as numpy does.
 */
export function reflectIndex(i: number, n: number): number {
	if (n <= 0) throw new RangeError("cannot reflect into an empty signal");
	if (n === 1) return 0;
	const period = 2 * (n - 1);
	const m = ((i % period) + period) % period;
	return m < n ? m : period - m;
}
