/** `action` behind a guard that lets it run once: later calls do nothing (a `release` that may be called twice). */
export function once(action: () => void): () => void {
	let done = false;
	return () => {
		if (done) return;
		done = true;
		action();
	};
}
