/**
 * The artifact cache names each file by the checksum it verified at download (`<sha256>.bin`), and on reuse hashes it
 * again unless it is the very file (inode, size, mtime, ctime) a runner sharing the folder last knew to have it (its
 * verification record, `<sha256>.verified`). A file that fails to load is checked in full too (it may have changed
 * after the job found it, or rotted under unchanged stamps): one that no longer has the checksum it is named by was
 * damaged on disk, and is removed with its record, so the next attempt downloads it again.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { rm } from "node:fs/promises";
import { basename } from "node:path";

/** How many files this process has hashed through (`sha256Of`): lets tests see when a file is read again. */
export const filesHashed = { count: 0 };

export async function sha256Of(path: string): Promise<string> {
	filesHashed.count++;
	const hash = createHash("sha256");
	for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
	return hash.digest("hex");
}

/** How a verification record's name ends, beside its artifact: `<sha256>.verified` (`artifact-cache.ts`). */
export const VERIFICATION_RECORD = ".verified";

/** The checksum a file of the artifact cache is named by (`<sha256>.bin`); undefined for any other file. */
export function cachedArtifactSha256(path: string): string | undefined {
	return /^([0-9a-f]{64})\.bin$/.exec(basename(path))?.[1];
}

/**
 * Throws a transient error (plain `Error`: the job is tried again) after removing `path` when it is named by a
 * checksum it no longer has; returns when it has it, or is not named by one (a file the operator gave by path).
 * `sha256`: the file's checksum, where the caller has it already.
 */
export async function removeIfDamaged(path: string, what: string, sha256?: string): Promise<void> {
	const named = cachedArtifactSha256(path);
	if (named === undefined || named === (sha256 ?? (await sha256Of(path)))) return;
	await rm(path, { force: true });
	await rm(path.replace(/\.bin$/, VERIFICATION_RECORD), { force: true });
	throw new Error(
		`the cached ${what} ${path} no longer has the checksum it is named by (damaged on disk): removed, to be downloaded again`,
	);
}
