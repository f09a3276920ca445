/** The admin commands against a real local D1 and R2 (wrangler's local persistence in a temporary folder). */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AdminBackend, localBackend, ROOT } from "../../scripts/lib/admin-backend.ts";
import { runAdmin, UsageError } from "../../scripts/lib/admin-commands.ts";
import { DEMO_VOICES, demoVoiceImage, demoVoiceSample } from "../../scripts/lib/demo-voices.ts";
import { hashClientSecret } from "../../src/contracts/client-credentials.ts";

let dir: string;
let backend: AdminBackend;

beforeAll(async () => {
	dir = await mkdtemp(path.join(tmpdir(), "vc-admin-test-"));
	execFileSync("npx", ["wrangler", "d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], {
		cwd: ROOT,
		stdio: "ignore",
	});
	process.env.WRANGLER_LOG = "error";
	backend = await localBackend(dir);
});

afterAll(async () => {
	await backend?.close();
	await rm(dir, { recursive: true, force: true });
});

const admin = (...argv: string[]) => runAdmin(argv, backend);

describe("admin CLI", () => {
	it("creates an account and API and runner clients, storing only a hash of each secret", async () => {
		const account = (await admin("account", "create", "--name", "Acme")) as { account_id: string };
		const client = (await admin("client", "create", "--account", account.account_id)) as Record<string, string>;
		expect(client).toMatchObject({ account_id: account.account_id, scope: "voice-conversion-api/base" });
		expect(client.client_secret).toMatch(/^vcs_[A-Za-z0-9_-]{43}$/);
		const runner = (await admin("runner-client", "create", "--account", account.account_id)) as Record<string, string>;
		expect(runner.scope).toBe("voice-conversion-api/runner");
		const rows = await backend.query<{ id: string; secret_hash: string }>("SELECT id, secret_hash FROM api_clients");
		const stored = rows.find((r) => r.id === client.client_id);
		expect(stored?.secret_hash).toBe(await hashClientSecret(String(client.client_secret)));
		expect(JSON.stringify(rows)).not.toContain(String(client.client_secret));
	});

	it("creates and updates a voice with its image and sample in the bucket", async () => {
		const voice = DEMO_VOICES[0];
		if (!voice) throw new Error("no demo voice");
		const image = path.join(dir, "portrait.png");
		const sample = path.join(dir, "sample.wav");
		await writeFile(image, demoVoiceImage(voice));
		await writeFile(sample, demoVoiceSample(voice));
		const created = (await admin(
			"voice",
			"create",
			"--name",
			"Tenor",
			"--tags",
			"male, bright",
			"--params",
			'{"formant_shift":2}',
			"--image",
			image,
			"--sample",
			sample,
		)) as { voice_id: string };
		await admin("voice", "update", "--name", "Tenor", "--rename", "Tenor II", "--active", "false");
		const list = (await admin("voice", "list")) as Record<string, unknown>[];
		expect(list.find((v) => v.voice_id === created.voice_id)).toMatchObject({
			name: "Tenor II",
			engine: "dsp",
			tags: ["male", "bright"],
			engine_params: { formant_shift: 2 },
			is_active: 0,
		});
		const keys = await backend.query<{ image_key: string; sample_key: string }>(
			`SELECT image_key, sample_key FROM voices WHERE id = '${created.voice_id}'`,
		);
		expect(keys[0]).toEqual({
			image_key: `voices/${created.voice_id}/image.png`,
			sample_key: `voices/${created.voice_id}/sample.wav`,
		});
	});

	it.each([
		[["frobnicate"], /Unknown command/],
		[["account", "create"], /--name is required/],
		[["client", "create", "--account", "42"], /must be a UUID/],
		[["client", "create", "--account", "00000000-0000-4000-8000-000000000000"], /No account/],
		[["voice", "create", "--name", "X", "--engine", "gpu"], /--engine must be one of/],
		[["voice", "create", "--name", "X", "--params", "[1]"], /JSON object/],
		[["voice", "create", "--name", "X", "--image", "/nonexistent.png"], /Cannot read image/],
		[["voice", "update", "--name", "Nobody", "--tags", "a"], /No voice named/],
		[["voice", "create", "--name", "X", "--artifact", "bad name=/tmp/x"], /NAME=FILE/],
	])("refuses %j with a clear message", async (argv, message) => {
		await expect(admin(...argv)).rejects.toThrow(message);
		await expect(admin(...argv)).rejects.toBeInstanceOf(UsageError);
	});

	it("refuses a sample that is not audio, and writes nothing", async () => {
		const notAudio = path.join(dir, "notes.txt");
		await writeFile(notAudio, "just some text");
		await expect(admin("voice", "create", "--name", "Broken", "--sample", notAudio)).rejects.toThrow(
			/not a WAV, FLAC or MP3/,
		);
		expect(await backend.query("SELECT id FROM voices WHERE name = 'Broken'")).toEqual([]);
	});
});
