/** Command-line audio tools from apt (espeak-ng, sox, flac, lame), used to generate test inputs. */
import { execFileSync, spawnSync } from "node:child_process";

export function hasTool(name: string): boolean {
	return spawnSync("sh", ["-c", `command -v ${name}`]).status === 0;
}

export function run(command: string, args: string[]): void {
	execFileSync(command, args, { stdio: ["ignore", "ignore", "pipe"] });
}

export function missingToolsMessage(tools: string[]): string | undefined {
	const missing = tools.filter((t) => !hasTool(t));
	return missing.length
		? `skipped: ${missing.join(", ")} not installed (apt-get install -y espeak-ng sox flac lame)`
		: undefined;
}
