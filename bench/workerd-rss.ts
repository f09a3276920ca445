/**
 * Resident memory of the workerd processes a benchmark started (the Worker isolates plus miniflare's local R2, D1
 * and queue emulation), read from /proc; Linux only, elsewhere the figures read 0.
 */
import { readdirSync, readFileSync } from "node:fs";

/** workerd processes descended from this one. */
export function workerdPids(): number[] {
	const parents = new Map<number, number>();
	const names = new Map<number, string>();
	for (const entry of readdirSync("/proc")) {
		if (!/^\d+$/.test(entry)) continue;
		try {
			const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
			const close = stat.lastIndexOf(")");
			names.set(Number(entry), stat.slice(stat.indexOf("(") + 1, close));
			parents.set(Number(entry), Number(stat.slice(close + 2).split(" ")[1]));
		} catch {}
	}
	const descends = (pid: number): boolean => {
		for (let p = parents.get(pid), hops = 0; p && hops < 16; p = parents.get(p), hops++)
			if (p === process.pid) return true;
		return false;
	};
	return [...names].filter(([pid, name]) => name.includes("workerd") && descends(pid)).map(([pid]) => pid);
}

export function rssBytes(pids: number[]): number {
	let total = 0;
	for (const pid of pids) {
		try {
			const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
			total += Number(match?.[1] ?? 0) * 1024;
		} catch {}
	}
	return total;
}
