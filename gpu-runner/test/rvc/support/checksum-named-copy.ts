import { createHash } from "node:crypto";
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** `file` copied into `dir` as the runner's artifact cache names what it keeps: by its sha256, `.bin`, no extension. */
export function checksumNamedCopy(file: string, dir: string): string {
	const path = join(dir, `${createHash("sha256").update(readFileSync(file)).digest("hex")}.bin`);
	copyFileSync(file, path);
	return path;
}
