/** The CLI as a user runs it (`node cli/main.ts ...`, what `npm run cli --` does), pointed at a local stack. */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Credentials, ROOT } from "./local-stack.ts";

/** The CLI keeps its tokens under XDG_CACHE_HOME: the tests' runs keep theirs here, never in the user's home. */
const CACHE_HOME = mkdtempSync(path.join(tmpdir(), "vc-cli-cache-"));
process.on("exit", () => rmSync(CACHE_HOME, { recursive: true, force: true }));

export interface CliRun {
	code: number | null;
	stdout: string;
	stderr: string;
}

/** Runs the CLI in `cwd` with the client's credentials in the environment (`env` adds to or overrides them). */
export function runCli(
	args: string[],
	target: { url: string; credentials: Pick<Credentials, "clientId" | "clientSecret">; cwd?: string },
	env: Record<string, string | undefined> = {},
): Promise<CliRun> {
	return new Promise((resolve, reject) => {
		const child = spawn(process.execPath, [path.join(ROOT, "cli/main.ts"), ...args], {
			cwd: target.cwd ?? ROOT,
			env: {
				...process.env,
				VOICE_API_URL: target.url,
				VOICE_API_CLIENT_ID: target.credentials.clientId,
				VOICE_API_CLIENT_SECRET: target.credentials.clientSecret,
				XDG_CACHE_HOME: CACHE_HOME,
				...env,
			},
			stdio: ["ignore", "pipe", "pipe"],
		});
		let stdout = "";
		let stderr = "";
		child.stdout.on("data", (d) => {
			stdout += d;
		});
		child.stderr.on("data", (d) => {
			stderr += d;
		});
		child.on("error", reject);
		child.on("close", (code) => resolve({ code, stdout, stderr }));
	});
}
