/**
 * What the CLI draws on stderr: a progress bar and a live status line. On a terminal they redraw in place; when
 * stderr is a file or a pipe (CI logs) they print a plain line now and then instead, so logs stay readable.
 */

export interface Output {
	write(text: string): void;
	isTTY: boolean;
	columns?: number;
}

export const stderr: Output = {
	write: (text) => void process.stderr.write(text),
	get isTTY() {
		return Boolean(process.stderr.isTTY);
	},
	get columns() {
		return process.stderr.columns;
	},
};

export function formatBytes(bytes: number): string {
	if (bytes < 1000) return `${bytes} B`;
	if (bytes < 1e6) return `${(bytes / 1e3).toFixed(1)} kB`;
	return `${(bytes / 1e6).toFixed(1)} MB`;
}

export function formatDuration(ms: number): string {
	const seconds = Math.floor(ms / 1000);
	return `${String(Math.floor(seconds / 60)).padStart(2, "0")}:${String(seconds % 60).padStart(2, "0")}`;
}

/** An upload progress bar: `Uploading [#####-----]  50%  4.9/9.8 MB  3.1 MB/s`. */
export function progressBar(label: string, out: Output = stderr, now: () => number = Date.now) {
	const started = now();
	let lastPercentPrinted = -1;
	let finished = false;
	return {
		update(loaded: number, total: number) {
			if (finished) return;
			const fraction = total > 0 ? Math.min(1, loaded / total) : 1;
			const percent = Math.floor(fraction * 100);
			const elapsed = Math.max(1, now() - started) / 1000;
			const rate = `${formatBytes(loaded / elapsed)}/s`;
			if (out.isTTY) {
				const width = 24;
				const filled = Math.round(fraction * width);
				const bar = `${"#".repeat(filled)}${"-".repeat(width - filled)}`;
				out.write(
					`\r${label} [${bar}] ${String(percent).padStart(3)}%  ${formatBytes(loaded)}/${formatBytes(total)}  ${rate}\x1b[K`,
				);
			} else if (percent >= lastPercentPrinted + 25 || (percent === 100 && lastPercentPrinted < 100)) {
				lastPercentPrinted = percent - (percent % 25);
				out.write(`${label} ${percent}% (${formatBytes(loaded)} of ${formatBytes(total)})\n`);
			}
		},
		done(total: number) {
			this.update(total, total);
			finished = true;
			if (out.isTTY) out.write("\n");
		},
		/** Ends the bar's line without claiming completion (on failure). */
		abort() {
			if (!finished && out.isTTY) out.write("\n");
			finished = true;
		},
	};
}

/** A status line with a spinner and the time spent in each status: `⠹ processing 00:04 (total 00:07)`. */
export function statusLine(out: Output = stderr, now: () => number = Date.now) {
	const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
	const started = now();
	let status = "";
	let since = started;
	let frame = 0;
	const draw = () => {
		const icon = frames[frame++ % frames.length];
		out.write(`\r${icon} ${status} ${formatDuration(now() - since)} (total ${formatDuration(now() - started)})\x1b[K`);
	};
	const timer = out.isTTY ? setInterval(draw, 120) : null;
	return {
		set(next: string) {
			if (next === status) return;
			status = next;
			since = now();
			if (out.isTTY) draw();
			else out.write(`Status: ${next} (after ${formatDuration(now() - started)})\n`);
		},
		stop(final?: string) {
			if (timer) clearInterval(timer);
			if (out.isTTY) out.write(`\r${final ?? status} after ${formatDuration(now() - started)}\x1b[K\n`);
			else if (final) out.write(`${final} after ${formatDuration(now() - started)}\n`);
		},
	};
}

/** Plain columns, padded to the widest cell. */
export function table(headers: string[], rows: string[][]): string {
	const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
	const line = (cells: string[]) =>
		cells
			.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
			.join("  ")
			.trimEnd();
	return [line(headers), ...rows.map(line)].join("\n");
}
