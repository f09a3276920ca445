/** Child processes of `npm run dev`: started in their own process group so Ctrl-C stops them and all they spawned. */
import { type ChildProcess, spawn } from "node:child_process";

export interface Managed {
	name: string;
	child: ChildProcess;
	exited: Promise<number | null>;
}

export function start(
	name: string,
	command: string,
	args: string[],
	options: { cwd: string; env?: NodeJS.ProcessEnv },
): Managed {
	const child = spawn(command, args, {
		cwd: options.cwd,
		env: { ...process.env, ...options.env },
		stdio: ["ignore", "pipe", "pipe"],
		detached: true,
	});
	const prefix = (line: string) => `${`[${name}]`.padEnd(10)} ${line}`;
	for (const stream of [child.stdout, child.stderr]) {
		let buffer = "";
		stream?.on("data", (data: Buffer) => {
			buffer += data.toString();
			const lines = buffer.split("\n");
			buffer = lines.pop() ?? "";
			for (const line of lines) if (line.trim()) process.stdout.write(`${prefix(line)}\n`);
		});
	}
	const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
	return { name, child, exited };
}

/**
 * SIGTERM to the whole group, then SIGKILL to what is left of it after `graceMs`. The leader (often `npm`) may exit
 * before what it started has finished stopping (a runner finishing its job and removing its work folder), so the
 * grace runs until the group is empty, not until the leader exits.
 */
export async function stop(managed: Managed, graceMs = 10_000): Promise<void> {
	const pid = managed.child.pid;
	if (!pid || managed.child.exitCode !== null) return;
	/** Sends `sig` to the group (0 only asks whether any of it is left); false when none is. */
	const signal = (sig: NodeJS.Signals | 0) => {
		try {
			process.kill(-pid, sig);
			return true;
		} catch {
			return false;
		}
	};
	signal("SIGTERM");
	const deadline = Date.now() + graceMs;
	await Promise.race([managed.exited, sleep(graceMs)]);
	while (Date.now() < deadline && signal(0)) await sleep(100);
	signal("SIGKILL");
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function waitForHttp(url: string, timeoutMs: number, isAlive: () => boolean): Promise<void> {
	const deadline = Date.now() + timeoutMs;
	while (Date.now() < deadline) {
		if (!isAlive()) throw new Error(`process serving ${url} exited during start-up`);
		try {
			const response = await fetch(url);
			if (response.ok) return;
		} catch {
			// Not listening yet.
		}
		await new Promise((r) => setTimeout(r, 250));
	}
	throw new Error(`${url} did not answer within ${timeoutMs / 1000} s`);
}
