/**
 * `npm run dev`: the whole service on this machine. Generates local secrets, applies migrations, seeds the demo
 * account and voices, starts the Worker (API, queues, Durable Objects, cron) with `wrangler dev` and one GPU
 * runner with the CPU engine, prints where to reach them, and stops everything on Ctrl-C.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { localBackend, ROOT } from "./lib/admin-backend.ts";
import { ensureDevVars, setDevVars } from "./lib/dev-vars.ts";
import { keepLocalRunsLocal } from "./lib/local-only.ts";
import { type Managed, start, stop, waitForHttp } from "./lib/processes.ts";
import { seedDemo } from "./lib/seed.ts";

const PORT = Number(process.env.PORT ?? 8787);
const BASE_URL = `http://127.0.0.1:${PORT}`;
const RUNNER_HEALTH_PORT = Number(process.env.RUNNER_HEALTH_PORT ?? PORT + 1);
const CREDENTIALS_FILE = path.join(ROOT, ".wrangler", "demo-credentials.json");
const RUNNER_DIR = path.join(ROOT, "gpu-runner");

function run(name: string, args: string[]): Promise<void> {
	const managed = start(name, "npx", args, { cwd: ROOT });
	return managed.exited.then((code) => {
		if (code !== 0) throw new Error(`${name} failed (exit ${code})`);
	});
}

async function main(): Promise<void> {
	const children: Managed[] = [];
	let stopping = false;
	const shutdown = async (code: number) => {
		if (stopping) return;
		stopping = true;
		console.log("\nStopping…");
		await Promise.all(children.map((c) => stop(c)));
		process.exit(code);
	};
	process.on("SIGINT", () => void shutdown(0));
	process.on("SIGTERM", () => void shutdown(0));

	keepLocalRunsLocal();
	const devVars = path.join(ROOT, ".dev.vars");
	await ensureDevVars(devVars);
	await run("migrate", ["wrangler", "d1", "migrations", "apply", "DB", "--local"]);

	process.env.WRANGLER_LOG ??= "error";
	const backend = await localBackend();
	const credentials = await seedDemo(backend, CREDENTIALS_FILE, BASE_URL).finally(() => backend.close());
	// Prefills the playground; only ever set here, in local development.
	await setDevVars(devVars, {
		PLAYGROUND_CLIENT_ID: credentials.client_id,
		PLAYGROUND_CLIENT_SECRET: credentials.client_secret,
	});

	const worker = start(
		"worker",
		"npx",
		["wrangler", "dev", "--ip", "127.0.0.1", "--port", String(PORT), "--show-interactive-dev-session=false"],
		{
			cwd: ROOT,
		},
	);
	children.push(worker);
	void worker.exited.then((code) => {
		if (!stopping) {
			console.error(`wrangler dev exited (code ${code}); stopping.`);
			void shutdown(1);
		}
	});
	await waitForHttp(`${BASE_URL}/openapi.json`, 120_000, () => worker.child.exitCode === null);

	if (existsSync(path.join(RUNNER_DIR, "package.json"))) {
		const runner = start("runner", "npm", ["run", "start", "--silent"], {
			cwd: RUNNER_DIR,
			env: {
				RUNNER_API_BASE_URL: BASE_URL,
				RUNNER_CLIENT_ID: credentials.runner_client_id,
				RUNNER_CLIENT_SECRET: credentials.runner_client_secret,
				RUNNER_ENGINES: "dsp",
				RUNNER_CACHE_DIR: path.join(ROOT, ".wrangler", "runner-cache"),
				RUNNER_HEALTH_HOST: "127.0.0.1",
				RUNNER_HEALTH_PORT: String(RUNNER_HEALTH_PORT),
				RUNNER_CAPACITY: "2",
			},
		});
		children.push(runner);
		void runner.exited.then((code) => {
			if (!stopping)
				console.error(`runner exited (code ${code}); the API keeps running. Restart npm run dev to get it back.`);
		});
	}

	console.log(`
Voice conversion service running locally
  API base URL     ${BASE_URL}/api/v1
  Token endpoint   ${BASE_URL}/oauth2/token
  API reference    ${BASE_URL}/docs
  Playground       ${BASE_URL}/playground/
  Runner health    http://127.0.0.1:${RUNNER_HEALTH_PORT}/health
  Demo client      client_id=${credentials.client_id}
                   client_secret=${credentials.client_secret}
  Scope            voice-conversion-api/base

  curl -s -X POST ${BASE_URL}/oauth2/token -d grant_type=client_credentials \\
    -d client_id=${credentials.client_id} -d client_secret=${credentials.client_secret} \\
    -d scope=voice-conversion-api/base

Press Ctrl-C to stop.
`);
}

main().catch((error) => {
	console.error(`npm run dev failed: ${(error as Error).message}`);
	process.exit(1);
});
