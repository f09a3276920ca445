/**
 * What tests read of child processes from `/proc` (Linux): whether one is gone, its peak memory, and the children of
 * a process whose command line names a module (the runner's model and inspection processes).
 */
import { readdirSync, readFileSync } from "node:fs";

/** `/proc/<pid>/stat`'s fields after the command's name: state, parent, ...; undefined once the process is gone. */
export function statOf(pid: number): string[] | undefined {
	try {
		const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
		return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
	} catch {
		return undefined;
	}
}

/** Whether process `pid` is gone (reaped, or dead and waiting to be). */
export const gone = (pid: number): boolean => {
	const state = statOf(pid)?.[0];
	return state === undefined || state === "Z";
};

/** The peak resident memory of process `pid` in MiB (0 once it is gone). */
export function peakMiB(pid: number): number {
	try {
		const kib = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
		return Number(kib ?? 0) / 1024;
	} catch {
		return 0;
	}
}

/** The children of process `parent` whose command line contains `module`. */
export function childrenRunning(parent: number, module: string): number[] {
	return readdirSync("/proc")
		.filter((entry) => /^\d+$/.test(entry))
		.map(Number)
		.filter((pid) => {
			if (Number(statOf(pid)?.[1]) !== parent) return false;
			try {
				return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(module);
			} catch {
				return false;
			}
		});
}
