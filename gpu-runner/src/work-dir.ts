/**
 * The work dir (`RUNNER_WORK_DIR`) holds output WAVs while they upload, up to 2 GiB each. Runner processes on one
 * machine may share it, so each works in a folder of its own, `runner-<pid>`, and removes it when it stops. A
 * process killed mid-job (SIGKILL, out of memory, a crash) cannot, so a starting runner removes what processes
 * that are gone left behind; without that, a crash loop fills the disk.
 */
import type { Dirent } from "node:fs";
import { lstat, readdir, rm } from "node:fs/promises";
import { join } from "node:path";

/** No leading zero, so a name stands for exactly one pid, and never 0 (`kill(0)` is the process group). */
const PROCESS_FOLDER = /^runner-([1-9]\d*)$/;
/** What runners before process folders wrote at the top of the work dir. */
const LOOSE_OUTPUT = /^output-.+\.wav$/;

export interface StaleWork {
	files: number;
	bytes: number;
	/** Top-level entries that could not be removed, with why. */
	failures: { name: string; error: string }[];
}

/** The folder the runner process `pid` writes its outputs in. */
export function processWorkDir(workDir: string, pid: number = process.pid): string {
	return join(workDir, `runner-${pid}`);
}

/** Whether a process with this id exists on this machine (EPERM: it does, under another user). */
export function processAlive(pid: number): boolean {
	try {
		process.kill(pid, 0);
		return true;
	} catch (error) {
		return (error as NodeJS.ErrnoException).code !== "ESRCH";
	}
}

/**
 * Removes what earlier runner processes left in `workDir`: the `runner-<pid>` folders of processes that no longer
 * exist, the one of `ownPid` (a restarted container reuses its pids, so that one is an earlier process's), and
 * loose `output-*.wav` files. Folders of live processes and anything else there are left alone.
 */
export async function removeStaleWork(
	workDir: string,
	options: { ownPid?: number; isAlive?: (pid: number) => boolean } = {},
): Promise<StaleWork> {
	const ownPid = options.ownPid ?? process.pid;
	const isAlive = options.isAlive ?? processAlive;
	const removed: StaleWork = { files: 0, bytes: 0, failures: [] };
	let entries: Dirent[];
	try {
		entries = await readdir(workDir, { withFileTypes: true });
	} catch (error) {
		if ((error as NodeJS.ErrnoException).code === "ENOENT") return removed;
		throw error;
	}
	for (const entry of entries) {
		const pid = entry.isDirectory() ? Number(PROCESS_FOLDER.exec(entry.name)?.[1]) : Number.NaN;
		const stale = (entry.isFile() && LOOSE_OUTPUT.test(entry.name)) || (pid > 0 && (pid === ownPid || !isAlive(pid)));
		if (!stale) continue;
		const path = join(workDir, entry.name);
		try {
			const size = await sizeOf(path);
			await rm(path, { recursive: true, force: true });
			removed.files += size.files;
			removed.bytes += size.bytes;
		} catch (error) {
			removed.failures.push({ name: entry.name, error: String(error) });
		}
	}
	return removed;
}

/** Files and their bytes under `path`, links not followed; what another runner removes meanwhile counts 0. */
async function sizeOf(path: string): Promise<{ files: number; bytes: number }> {
	try {
		const stats = await lstat(path);
		if (!stats.isDirectory()) return { files: 1, bytes: stats.size };
		const total = { files: 0, bytes: 0 };
		for (const name of await readdir(path)) {
			const size = await sizeOf(join(path, name));
			total.files += size.files;
			total.bytes += size.bytes;
		}
		return total;
	} catch (error) {
		if ((error as NodeJS.ErrnoException).code === "ENOENT") return { files: 0, bytes: 0 };
		throw error;
	}
}
