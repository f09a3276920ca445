/**
 * Whether this thread stays free while `work` runs: a 2 ms timer ticks throughout, and a thread busy with the
 * work itself (a native onnxruntime run, say) shows as one gap between ticks as long as that stretch of work.
 */
export async function timerGapsDuring<T>(
	work: () => Promise<T>,
): Promise<{ result: T; took: number; ticks: number; longestGap: number }> {
	const ticks: number[] = [];
	const timer = setInterval(() => ticks.push(performance.now()), 2);
	const started = performance.now();
	try {
		const result = await work();
		const took = performance.now() - started;
		const gaps = ticks.slice(1).map((t, i) => t - (ticks[i] as number));
		return { result, took, ticks: ticks.length, longestGap: Math.max(0, ...gaps) };
	} finally {
		clearInterval(timer);
	}
}
