/**
 * Scratch folders for tests. Each is made fresh under the system's temp folder and removed once its test file has
 * run (`scratch-cleanup.ts`, a setup file of the runner's and the root's Node tests), so repeated test runs leave
 * nothing behind, wherever in the file (module level, a hook, a test) the folder was asked for.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const made = new Set<string>();

/** A new empty folder named `<prefix>-XXXXXX`, removed after the file's tests. */
export function scratchDir(prefix: string): string {
	const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
	made.add(dir);
	return dir;
}

/** Removes every scratch folder made so far in this test file. */
export function removeScratchDirs(): void {
	for (const dir of made) rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
	made.clear();
}
