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

/** SIGTERM to the whole group, then SIGKILL after `graceMs`. */
export async function stop(managed: Managed, graceMs = 10_000): Promise<void> {
	const pid = managed.child.pid;
	if (!pid || managed.child.exitCode !== null) return;
	const signal = (sig: NodeJS.Signals) => {
		try {
			process.kill(-pid, sig);
		} catch {
			// Already gone.
		}
	};
	signal("SIGTERM");
	const timer = setTimeout(() => signal("SIGKILL"), graceMs);
	await managed.exited;
	clearTimeout(timer);
	signal("SIGKILL"); // anything the leader left behind in its group
}

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
