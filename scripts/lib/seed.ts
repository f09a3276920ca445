/**
 * Local seed data: a demo account with an API client and a runner client, and the demo voices. Idempotent:
 * credentials are kept in `.wrangler/demo-credentials.json` (ignored by git) and reused while they still work.
 * The file also says where the local service listens (`base_url`), for the CLI (`cli/config.ts` reads it).
 */
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { AdminBackend } from "./admin-backend.ts";
import { DEMO_VOICES, demoVoiceImage, demoVoiceSample } from "./demo-voices.ts";
import { createAccount, createClient, createVoice, updateVoice, voiceObjectKeys } from "./provisioning.ts";
import { samplePitchRange } from "./sample-pitch.ts";
import { sqlValue } from "./sql.ts";

export interface DemoCredentials {
	account_id: string;
	client_id: string;
	client_secret: string;
	runner_client_id: string;
	runner_client_secret: string;
}

async function clientUsable(backend: AdminBackend, id: string): Promise<boolean> {
	const rows = await backend.query(`SELECT id FROM api_clients WHERE id = ${sqlValue(id)} AND revoked_at IS NULL`);
	return rows.length > 0;
}

/** `.wrangler/demo-credentials.json`: the demo credentials and the base URL of the service they are for. */
export interface DemoClientFile extends DemoCredentials {
	base_url: string;
}

/** Seeds the demo data for the local service at `baseUrl` and saves its credentials and address in `credentialsFile`. */
export async function seedDemo(
	backend: AdminBackend,
	credentialsFile: string,
	baseUrl: string,
): Promise<DemoCredentials> {
	let credentials: DemoCredentials | null = null;
	if (existsSync(credentialsFile)) {
		const { base_url: _, ...saved } = JSON.parse(await readFile(credentialsFile, "utf8")) as DemoClientFile;
		if ((await clientUsable(backend, saved.client_id)) && (await clientUsable(backend, saved.runner_client_id))) {
			credentials = saved;
		}
	}
	if (!credentials) {
		const account = createAccount("Demo");
		const api = await createClient(account.output.account_id, { name: "demo client", kind: "api" });
		const runner = await createClient(account.output.account_id, { name: "local runner", kind: "runner" });
		await backend.execute([...account.statements, ...api.statements, ...runner.statements]);
		credentials = {
			account_id: account.output.account_id,
			client_id: api.output.client_id,
			client_secret: api.output.client_secret,
			runner_client_id: runner.output.client_id,
			runner_client_secret: runner.output.client_secret,
		};
	}
	// Written on every start: reused credentials may be served on another port (PORT) than last time.
	const file: DemoClientFile = { ...credentials, base_url: baseUrl };
	await mkdir(path.dirname(credentialsFile), { recursive: true });
	await writeFile(credentialsFile, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });

	for (const voice of DEMO_VOICES) {
		const existing = await backend.query<{ id: string }>(
			`SELECT id FROM voices WHERE account_id IS NULL AND name = ${sqlValue(voice.name)}`,
		);
		const id = existing[0]?.id ?? crypto.randomUUID();
		const keys = voiceObjectKeys(id);
		await backend.putObject(keys.image("png"), demoVoiceImage(voice), "image/png");
		const sample = demoVoiceSample(voice);
		await backend.putObject(keys.sample("wav"), sample, "audio/wav");
		// Measured from the sample, as `admin voice create --sample` does, so `pitch_shift: "auto"` works.
		const range = await samplePitchRange(sample);
		const fields = {
			tags: voice.tags,
			engine: "dsp" as const,
			params: voice.params,
			imageKey: keys.image("png"),
			sampleKey: keys.sample("wav"),
			...(range ? { pitchRangeHz: range } : {}),
		};
		const plan = existing[0] ? updateVoice(id, fields) : createVoice(id, { ...fields, name: voice.name });
		await backend.execute(plan.statements);
	}
	return credentials;
}
