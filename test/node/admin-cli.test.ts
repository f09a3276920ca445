/**
 * The admin commands, and the demo seed of `npm run dev`, against a real local D1 and R2 (wrangler's local persistence
 * in a temporary folder).
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getPlatformProxy } from "wrangler";
import { resolveConnection } from "../../cli/config.ts";
import {
	buildTinyContentVec,
	buildTinyRmvpe,
	buildTinySynthesizer,
} from "../../gpu-runner/test/rvc/support/tiny-models.ts";
import { type AdminBackend, bucketName, localBackend, ROOT, remoteBackend } from "../../scripts/lib/admin-backend.ts";
import { runAdmin, UsageError } from "../../scripts/lib/admin-commands.ts";
import { DEMO_VOICES, demoVoiceImage, demoVoiceSample } from "../../scripts/lib/demo-voices.ts";
import { seedDemo } from "../../scripts/lib/seed.ts";
import { hashClientSecret } from "../../src/contracts/client-credentials.ts";
import { makeFlac } from "../support/flac-generator.ts";

/** RVC checkpoints and faiss indexes made by the real tools (the generator scripts in that folder). */
const FIXTURES = path.join(ROOT, "gpu-runner/test/rvc/fixtures");

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
/** A service voice's stored engine params, as `voice list` shows them. */
const engineParams = async (name: string) =>
	((await admin("voice", "list")) as Record<string, unknown>[]).find((v) => v.name === name)?.engine_params;

/** Lists the keys under `prefix` in the same local bucket the admin commands write (a second proxy onto it). */
async function bucketObjects(prefix: string) {
	const configPath = path.join(dir, "bucket-only.toml");
	await writeFile(
		configPath,
		`name = "admin-test"\ncompatibility_date = "2026-11-01"\n[[r2_buckets]]\nbinding = "BUCKET"\nbucket_name = "${await bucketName()}"\n`,
	);
	const proxy = await getPlatformProxy<{
		BUCKET: {
			list(o: { prefix: string }): Promise<{ objects: { key: string }[] }>;
			get(key: string): Promise<{ arrayBuffer(): Promise<ArrayBuffer> } | null>;
		};
	}>({
		configPath,
		persist: { path: path.join(dir, "v3") },
		remoteBindings: false,
	});
	const objects = async () => (await proxy.env.BUCKET.list({ prefix })).objects.map((o) => o.key).sort();
	/** The sha256 of the bytes stored under `key`, as a runner checks them; null when there is no such object. */
	const checksum = async (key: string) => {
		const object = await proxy.env.BUCKET.get(key);
		return object ? sha256Hex(new Uint8Array(await object.arrayBuffer())) : null;
	};
	return { objects, checksum, proxy };
}

const sha256Hex = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

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

	it("stores a service voice's name composed (NFC), so one typed with a combining accent is the same name", async () => {
		const decomposed = "Zoe\u0308 (admin)";
		const composed = decomposed.normalize("NFC");
		const created = (await admin("voice", "create", "--name", decomposed)) as { voice_id: string };
		await expect(admin("voice", "create", "--name", composed)).rejects.toThrow(/already exists; use voice update/);
		const listed = (await admin("voice", "list")) as { voice_id: string; name: string }[];
		expect(listed.find((voice) => voice.voice_id === created.voice_id)?.name).toBe(composed);
		// One stored before names were composed is the same name in any form.
		await backend.execute([`UPDATE voices SET name = 'Cle\u0301o (admin)' WHERE id = '${created.voice_id}'`]);
		await expect(admin("voice", "create", "--name", "Cl\u00e9o (admin)")).rejects.toThrow(
			/already exists; use voice update/,
		);
		await backend.execute([`UPDATE voices SET name = '${composed}' WHERE id = '${created.voice_id}'`]);
		// Found however it is typed, and renamed composed too.
		await admin("voice", "update", "--name", decomposed, "--rename", `Andre\u0301 ${composed}`);
		const renamed = (await admin("voice", "list")) as { voice_id: string; name: string }[];
		expect(renamed.find((voice) => voice.voice_id === created.voice_id)?.name).toBe(`André ${composed}`);
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

	it("removes the sample or image a voice update replaces with a file of another type", async () => {
		const voice = DEMO_VOICES[0];
		if (!voice) throw new Error("no demo voice");
		const wav = path.join(dir, "replaced.wav");
		const flac = path.join(dir, "replacing.flac");
		await writeFile(wav, demoVoiceSample(voice));
		await writeFile(flac, makeFlac({ sampleRate: 16_000, channels: 1, bitsPerSample: 16, frames: 16_000 }));
		const created = (await admin("voice", "create", "--name", "Replaced", "--sample", wav)) as { voice_id: string };
		const { objects, proxy } = await bucketObjects(`voices/${created.voice_id}/`);
		try {
			expect(await objects()).toEqual([`voices/${created.voice_id}/sample.wav`]);
			await admin("voice", "update", "--name", "Replaced", "--sample", flac);
			const [row] = await backend.query<{ sample_key: string }>(
				`SELECT sample_key FROM voices WHERE id = '${created.voice_id}'`,
			);
			expect(row?.sample_key).toBe(`voices/${created.voice_id}/sample.flac`);
			// The WAV it replaced is referred to by nothing: it leaves the bucket.
			expect(await objects()).toEqual([`voices/${created.voice_id}/sample.flac`]);
			// The same type goes under the same key, overwritten in place.
			await admin("voice", "update", "--name", "Replaced", "--sample", flac);
			expect(await objects()).toEqual([`voices/${created.voice_id}/sample.flac`]);
		} finally {
			await proxy.dispose();
		}
	});

	it.each([
		[["frobnicate"], /Unknown command/],
		[["account", "create"], /--name is required/],
		[["client", "create", "--account", "42"], /must be a UUID/],
		[["client", "create", "--account", "00000000-0000-4000-8000-000000000000"], /No account/],
		[["voice", "create", "--name", "X", "--engine", "gpu"], /--engine must be one of/],
		[["voice", "create", "--name", "X", "--params", "[1]"], /JSON object/],
		// Params the runner refuses would fail every conversion of the voice as an internal error.
		[["voice", "create", "--name", "X", "--params", '{"formant_shift":30}'], /--params for a dsp voice: formant_shift/],
		[["voice", "create", "--name", "X", "--params", '{"tonality_limit_hz":1000}'], /tonality_limit_hz/],
		[["voice", "create", "--name", "X", "--params", '{"pitch_method":"perfect"}'], /pitch_method/],
		[["voice", "update", "--name", "Tenor II", "--params", '{"brightness":"high"}'], /dsp voice: brightness/],
		[["voice", "create", "--name", "X", "--image", "/nonexistent.png"], /Cannot read image/],
		[["voice", "update", "--name", "Nobody", "--tags", "a"], /No voice named/],
		[["voice", "create", "--name", "X", "--artifact", "bad name=/tmp/x"], /NAME=FILE/],
	])("refuses %j with a clear message", async (argv, message) => {
		await expect(admin(...argv)).rejects.toThrow(message);
		await expect(admin(...argv)).rejects.toBeInstanceOf(UsageError);
	});

	it("looks voices up by name among the service's own: an account's voice may share the name", async () => {
		const account = (await admin("account", "create", "--name", "Voices of their own")) as { account_id: string };
		const now = new Date().toISOString();
		await backend.execute([
			`INSERT INTO voices (id, account_id, name, tags, engine, engine_params, artifacts, status, created_at, updated_at)
			 VALUES ('${crypto.randomUUID()}', '${account.account_id}', 'Shared name', '[]', 'rvc', '{}', '[]',
			 'awaiting_upload', '${now}', '${now}')`,
		]);
		await expect(admin("voice", "update", "--name", "Shared name", "--tags", "x")).rejects.toThrow(
			'No voice named "Shared name"',
		);
		const created = (await admin("voice", "create", "--name", "Shared name")) as { voice_id: string };
		const updated = (await admin("voice", "update", "--name", "Shared name", "--tags", "mine")) as { voice_id: string };
		expect(created.voice_id).toMatch(/^[0-9a-f-]{36}$/);
		expect(updated.voice_id).toBe(created.voice_id);
		await expect(admin("voice", "create", "--name", "Shared name")).rejects.toThrow(/already exists/);
	});

	it("leaves an account's own voice alone: voice update --id refuses it, and voice list does not show it", async () => {
		const account = (await admin("account", "create", "--name", "Owner of a voice")) as { account_id: string };
		const id = crypto.randomUUID();
		const now = new Date().toISOString();
		await backend.execute([
			`INSERT INTO voices (id, account_id, name, tags, engine, engine_params, artifacts, status, created_at, updated_at)
			 VALUES ('${id}', '${account.account_id}', 'Customer voice', '["theirs"]', 'rvc', '{"sample_rate":40000}', '[]',
			 'ready', '${now}', '${now}')`,
		]);
		await expect(admin("voice", "update", "--id", id, "--engine", "dsp", "--params", "{}")).rejects.toThrow(
			`No service voice with id ${id}`,
		);
		const [row] = await backend.query<{ engine: string; engine_params: string; tags: string }>(
			`SELECT engine, engine_params, tags FROM voices WHERE id = '${id}'`,
		);
		expect(row).toEqual({ engine: "rvc", engine_params: '{"sample_rate":40000}', tags: '["theirs"]' });
		const listed = (await admin("voice", "list")) as { voice_id: string }[];
		expect(listed.length).toBeGreaterThan(0);
		expect(listed.map((v) => v.voice_id)).not.toContain(id);
	});

	it("refuses a sample that is not audio, and writes nothing", async () => {
		const notAudio = path.join(dir, "notes.txt");
		await writeFile(notAudio, "just some text");
		await expect(admin("voice", "create", "--name", "Broken", "--sample", notAudio)).rejects.toThrow(
			/not a WAV, FLAC or MP3/,
		);
		expect(await backend.query("SELECT id FROM voices WHERE name = 'Broken'")).toEqual([]);
	});

	it("sets the deployment's base models by checksum, replaces them, and lists them", async () => {
		const first = path.join(dir, "contentvec.onnx");
		const second = path.join(dir, "contentvec-v2.onnx");
		await writeFile(first, buildTinyContentVec());
		await writeFile(second, buildTinyContentVec({ featureDim: 256 }));
		const digest = async (file: string) =>
			createHash("sha256")
				.update(await readFile(file))
				.digest("hex");
		const set = (await admin("base-model", "set", "contentvec", first)) as Record<string, unknown>;
		expect(set).toEqual({
			name: "contentvec",
			key: `base-models/contentvec/${await digest(first)}`,
			sha256: await digest(first),
			size_bytes: (await readFile(first)).length,
			feature_dim: 768,
		});
		await admin("base-model", "set", "contentvec", second);
		const list = (await admin("base-model", "list")) as Record<string, unknown>[];
		expect(list).toEqual([
			expect.objectContaining({
				name: "contentvec",
				sha256: await digest(second),
				key: `base-models/contentvec/${await digest(second)}`,
				feature_dim: 256,
			}),
		]);
	});

	it("uploads a base model set back to an earlier file again, so the safety net sees it as new", async () => {
		// The replaced file may be on its way out (src/cron/replaced-model-files.ts removes it by its upload time):
		// setting it back must not trust the object already under its key.
		const earlier = path.join(dir, "rmvpe-earlier.onnx");
		const later = path.join(dir, "rmvpe-later.onnx");
		await writeFile(earlier, buildTinyRmvpe({ pitchBin: 40 }));
		await writeFile(later, buildTinyRmvpe({ pitchBin: 60 }));
		const { key } = (await admin("base-model", "set", "rmvpe", earlier)) as { key: string };
		await admin("base-model", "set", "rmvpe", later);
		const { proxy } = await bucketObjects("base-models/rmvpe/");
		const bucket = proxy.env.BUCKET as unknown as { head(key: string): Promise<{ uploaded: Date } | null> };
		try {
			const before = (await bucket.head(key))?.uploaded.getTime() ?? 0;
			await new Promise((resolve) => setTimeout(resolve, 20));
			expect(await admin("base-model", "set", "rmvpe", earlier)).toMatchObject({ key });
			expect((await bucket.head(key))?.uploaded.getTime()).toBeGreaterThan(before);
		} finally {
			await proxy.dispose();
		}
	});

	it.each([
		[["base-model", "set", "hubert", "/tmp/x.onnx"], /base-model set contentvec\|contentvec_v1\|rmvpe FILE.onnx/],
		[["base-model", "set", "rmvpe"], /base-model set contentvec\|contentvec_v1\|rmvpe FILE.onnx/],
	])("refuses %j", async (argv, message) => {
		await expect(admin(...argv)).rejects.toThrow(message);
	});

	it("refuses a base model that is not ONNX, by its bytes", async () => {
		const index = path.join(FIXTURES, "index/flat-l2.index");
		await expect(admin("base-model", "set", "rmvpe", index)).rejects.toThrow(
			/^\/\S+\.index is not an RMVPE ONNX model .*\(it is a faiss index\)$/,
		);
	});

	it("refuses an ONNX model of the other role, or a synthesizer, as a base model, and writes nothing", async () => {
		const contentvec = path.join(dir, "swapped-contentvec.onnx");
		const rmvpe = path.join(dir, "swapped-rmvpe.onnx");
		const synthesizer = path.join(dir, "swapped-synthesizer.onnx");
		await writeFile(contentvec, buildTinyContentVec());
		await writeFile(rmvpe, buildTinyRmvpe({ pitchBin: 100 }));
		await writeFile(synthesizer, buildTinySynthesizer({ sampleRate: 40000 }));
		const before = await admin("base-model", "list");
		await expect(admin("base-model", "set", "contentvec", rmvpe)).rejects.toThrow(
			/is not a ContentVec ONNX model .*\(it is an ONNX model, role unknown: its input takes 128 channels, not 1\)/,
		);
		await expect(admin("base-model", "set", "rmvpe", contentvec)).rejects.toThrow(/is not an RMVPE ONNX model/);
		await expect(admin("base-model", "set", "rmvpe", synthesizer)).rejects.toThrow(/role synthesizer/);
		expect(await admin("base-model", "list")).toEqual(before);
		expect(await admin("base-model", "set", "rmvpe", rmvpe)).toMatchObject({ name: "rmvpe" });
	});

	it("takes a 256-wide ContentVec as contentvec_v1, the base model of v1 voices, and refuses a 768-wide one", async () => {
		const wide = path.join(dir, "contentvec-768.onnx");
		const narrow = path.join(dir, "contentvec-256.onnx");
		await writeFile(wide, buildTinyContentVec());
		await writeFile(narrow, buildTinyContentVec({ featureDim: 256 }));
		await expect(admin("base-model", "set", "contentvec_v1", wide)).rejects.toThrow(
			/is not a ContentVec ONNX model for RVC v1 voices, e\.g\. RVC's vec-256-layer-9 .*: its features are 768 wide; contentvec_v1 is the ContentVec of RVC v1 voices, 256 wide/,
		);
		expect(await admin("base-model", "set", "contentvec_v1", narrow)).toMatchObject({ name: "contentvec_v1" });
		const listed = (await admin("base-model", "list")) as { name: string }[];
		expect(listed.map((base) => base.name)).toContain("contentvec_v1");
	});

	/**
	 * Sets a ContentVec of `deployed` width as the deployment's, checks voice create refuses `model` (reading the other
	 * width) with `refusal`, writing nothing, and takes it with its own ContentVec of the model's width.
	 */
	async function refusedUnlessOwnContentVec(name: string, model: string, deployed: 256 | 768, refusal: RegExp) {
		const narrow = path.join(dir, `contentvec-256-${name}.onnx`);
		const wide = path.join(dir, `contentvec-768-${name}.onnx`);
		await writeFile(narrow, buildTinyContentVec({ featureDim: 256 }));
		await writeFile(wide, buildTinyContentVec());
		await admin("base-model", "set", "contentvec", deployed === 256 ? narrow : wide);
		const before = await admin("voice", "list");
		const create = ["voice", "create", "--name", name, "--engine", "rvc", "--model", model];
		await expect(admin(...create)).rejects.toThrow(refusal);
		expect(await admin("voice", "list")).toEqual(before);
		const own = (await admin(
			...create.with(3, `${name} own`),
			...["--artifact", `contentvec=${deployed === 256 ? wide : narrow}`],
		)) as { voice_id: string };
		expect(own.voice_id).toMatch(/^[0-9a-f-]{36}$/);
		return { narrow, wide };
	}

	it("creates a v1 voice only where a 256-wide ContentVec will feed it: contentvec_v1, or the voice's own", async () => {
		const model = path.join(FIXTURES, "v1-f0-40k.pth");
		await backend.execute(["DELETE FROM base_models WHERE name = 'contentvec_v1'"]);
		const { narrow } = await refusedUnlessOwnContentVec(
			"Old v1",
			model,
			768,
			/reads 256-wide features \(RVC v1\), but the deployment's ContentVec gives 768-wide ones: set one for v1 voices first \(base-model set contentvec_v1 FILE\.onnx/,
		);
		await admin("base-model", "set", "contentvec_v1", narrow);
		const shared = (await admin("voice", "create", "--name", "Old v1", "--engine", "rvc", "--model", model)) as {
			voice_id: string;
		};
		const listed = (
			(await admin("voice", "list")) as { voice_id: string; engine_params: Record<string, unknown> }[]
		).find((voice) => voice.voice_id === shared.voice_id);
		expect(listed?.engine_params).toMatchObject({ sample_rate: 40_000, f0: true, feature_dim: 256 });
	});

	it("refuses a v2 voice where the deployment's ContentVec is 256 wide, unless the voice brings its own", async () => {
		const { wide } = await refusedUnlessOwnContentVec(
			"V2 on v1",
			path.join(FIXTURES, "v2-f0-40k.pth"),
			256,
			/reads 768-wide features \(RVC v2\), but the deployment's ContentVec gives 256-wide ones: set a 768-wide one as contentvec/,
		);
		await admin("base-model", "set", "contentvec", wide);
	});

	it("checks a voice's own ContentVec and RMVPE as base models are checked, and its ContentVec's width against the model", async () => {
		const contentvec = path.join(dir, "own-contentvec-wide.onnx");
		const rmvpe = path.join(dir, "own-rmvpe.onnx");
		await writeFile(contentvec, buildTinyContentVec());
		await writeFile(rmvpe, buildTinyRmvpe({ pitchBin: 100 }));
		const before = await admin("voice", "list");
		const v1 = [
			"voice",
			"create",
			"--name",
			"Own models",
			"--engine",
			"rvc",
			"--model",
			path.join(FIXTURES, "v1-f0-40k.pth"),
		];
		const refusals: [string[], RegExp][] = [
			[
				[...v1, "--artifact", `contentvec=${contentvec}`],
				/--artifact contentvec=.* gives 768-wide features, but --model .* reads 256-wide ones: give a ContentVec of the model's width/,
			],
			[
				[...v1, "--artifact", `contentvec=${rmvpe}`],
				/--artifact contentvec=.*own-rmvpe\.onnx is not a ContentVec ONNX model/,
			],
			[[...v1, "--artifact", `rmvpe=${contentvec}`], /--artifact rmvpe=.* is not an RMVPE ONNX model/],
		];
		for (const [argv, message] of refusals) await expect(admin(...argv), argv.join(" ")).rejects.toThrow(message);
		expect(await admin("voice", "list")).toEqual(before);
		// Another name is the voice's own business (a file its engine does not read from the base models).
		await admin(...v1.with(3, "Own extra"), "--artifact", `notes=${rmvpe}`);
	});

	it("creates an rvc voice from its model and index, with its defaults and the pitch range of its sample", async () => {
		const model = path.join(dir, "voice.onnx");
		// 16-wide features, as the small test indexes hold.
		await writeFile(model, buildTinySynthesizer({ sampleRate: 40_000, featureDim: 16 }));
		const index = path.join(FIXTURES, "index/flat-ip.index");
		const voice = DEMO_VOICES[1]; // a sung phrase from 110 Hz up a fifth
		if (!voice) throw new Error("no demo voice");
		const sample = path.join(dir, "low-sample.wav");
		await writeFile(sample, demoVoiceSample(voice));
		const params = { sample_rate: 40_000, index_rate: 0.6, protect: 0.4, f0_method: "yin", transpose_semitones: -2 };
		const created = (await admin(
			"voice",
			"create",
			"--name",
			"Low rvc",
			"--engine",
			"rvc",
			"--model",
			model,
			"--index",
			index,
			"--params",
			JSON.stringify(params),
			"--sample",
			sample,
		)) as { voice_id: string; pitch_range_hz: { low: number; high: number } };
		expect(created.pitch_range_hz.low).toBeGreaterThan(100);
		expect(created.pitch_range_hz.low).toBeLessThan(130);
		expect(created.pitch_range_hz.high).toBeGreaterThan(150);
		expect(created.pitch_range_hz.high).toBeLessThan(175);
		const listed = ((await admin("voice", "list")) as Record<string, unknown>[]).find(
			(v) => v.voice_id === created.voice_id,
		);
		const digest = async (file: string) =>
			createHash("sha256")
				.update(await readFile(file))
				.digest("hex");
		expect(listed).toMatchObject({
			engine: "rvc",
			engine_params: params,
			pitch_range_hz: created.pitch_range_hz,
			artifacts: [
				{ name: "synthesizer", sha256: await digest(model) },
				{ name: "index", sha256: await digest(index) },
			],
		});

		// A new index replaces only the index; a given range replaces the measured one.
		const flat = path.join(FIXTURES, "index/flat-l2.index");
		await admin("voice", "update", "--name", "Low rvc", "--index", flat, "--pitch-range", "90-180");
		const updated = ((await admin("voice", "list")) as Record<string, unknown>[]).find(
			(v) => v.voice_id === created.voice_id,
		);
		expect(updated).toMatchObject({
			pitch_range_hz: { low: 90, high: 180 },
			artifacts: [
				{ name: "synthesizer", sha256: await digest(model) },
				{ name: "index", sha256: await digest(flat) },
			],
		});
	});

	it("creates an rvc voice from RVC's .pth checkpoint, taking its sample rate from the file", async () => {
		const created = (await admin(
			"voice",
			"create",
			"--name",
			"Checkpoint voice",
			"--engine",
			"rvc",
			"--model",
			path.join(FIXTURES, "v2-f0-48k.pth"),
			"--index",
			path.join(FIXTURES, "index/voice-v2-768.index"),
			"--pitch-range",
			"165-330",
		)) as { voice_id: string };
		const listed = ((await admin("voice", "list")) as Record<string, unknown>[]).find(
			(v) => v.voice_id === created.voice_id,
		);
		expect(listed).toMatchObject({
			engine: "rvc",
			engine_params: { sample_rate: 48_000, f0: true, feature_dim: 768 },
			pitch_range_hz: { low: 165, high: 330 },
			artifacts: [{ name: "synthesizer" }, { name: "index" }],
		});

		// A new model of another rate brings its rate: the one the replaced model gave does not hold it back.
		await admin("voice", "update", "--name", "Checkpoint voice", "--model", path.join(FIXTURES, "v2-f0-40k.pth"));
		const updated = ((await admin("voice", "list")) as Record<string, unknown>[]).find(
			(v) => v.voice_id === created.voice_id,
		);
		expect(updated).toMatchObject({ engine_params: { sample_rate: 40_000, f0: true, feature_dim: 768 } });
		// New --params still have to agree with the model.
		await expect(
			admin(
				...["voice", "update", "--name", "Checkpoint voice", "--model", path.join(FIXTURES, "v2-f0-48k.pth")],
				...["--params", '{"sample_rate":40000}'],
			),
		).rejects.toThrow(/--params sample_rate 40000 disagrees with the model's 48000 Hz/);
	});

	it("puts a voice's new model under its own key: a runner leased before the update still fetches what its lease names", async () => {
		const leasedFile = path.join(dir, "leased.onnx");
		const newerFile = path.join(dir, "newer.onnx");
		await writeFile(leasedFile, buildTinySynthesizer({ sampleRate: 40_000, featureDim: 16 }));
		await writeFile(newerFile, buildTinySynthesizer({ sampleRate: 40_000, featureDim: 24 }));
		const created = (await admin(
			"voice",
			"create",
			"--name",
			"Leased rvc",
			"--engine",
			"rvc",
			"--model",
			leasedFile,
		)) as {
			voice_id: string;
		};
		const synthesizer = async () => {
			const [row] = await backend.query<{ artifacts: string }>(
				`SELECT artifacts FROM voices WHERE id = '${created.voice_id}'`,
			);
			const artifacts = JSON.parse(String(row?.artifacts)) as { name: string; key: string; sha256: string }[];
			return artifacts.find((artifact) => artifact.name === "synthesizer");
		};
		// What a lease granted now names: this key (signed for hours), and this checksum.
		const leased = await synthesizer();
		expect(leased?.sha256).toBe(sha256Hex(await readFile(leasedFile)));
		await admin("voice", "update", "--name", "Leased rvc", "--model", newerFile);
		const current = await synthesizer();
		expect(current?.sha256).toBe(sha256Hex(await readFile(newerFile)));
		const { checksum, proxy } = await bucketObjects(`models/${created.voice_id}/`);
		try {
			// The earlier lease's download still passes its checksum; new leases get the new file.
			expect(await checksum(String(leased?.key))).toBe(leased?.sha256);
			expect(await checksum(String(current?.key))).toBe(current?.sha256);
			expect([leased?.key, current?.key]).toEqual([
				`models/${created.voice_id}/synthesizer/${leased?.sha256}`,
				`models/${created.voice_id}/synthesizer/${current?.sha256}`,
			]);
		} finally {
			await proxy.dispose();
		}
	});

	it("records whether the model takes pitch and its feature width, so f0_method and a wrong --index are refused later", async () => {
		// What the 40 kHz v2 models record beside the defaults.
		const recorded = (f0: boolean, defaults: Record<string, unknown> = {}) => ({
			...defaults,
			sample_rate: 40_000,
			f0,
			feature_dim: 768,
			speakers: 1,
		});
		await admin(
			"voice",
			"create",
			"--name",
			"No pitch",
			"--engine",
			"rvc",
			"--model",
			path.join(FIXTURES, "v2-nono-40k.pth"),
		);
		expect(await engineParams("No pitch")).toEqual(recorded(false));

		// New defaults (they replace the old) keep what the model recorded; f0 is the model's to say, and f0_method needs pitch.
		await admin("voice", "update", "--name", "No pitch", "--params", '{"sample_rate":40000,"rms_mix_rate":0.5}');
		expect(await engineParams("No pitch")).toEqual(recorded(false, { rms_mix_rate: 0.5 }));
		await expect(
			admin("voice", "update", "--name", "No pitch", "--params", '{"sample_rate":40000,"f0_method":"yin"}'),
		).rejects.toThrow(/f0_method does not apply: the model has no pitch input/);
		await expect(
			admin("voice", "update", "--name", "No pitch", "--params", '{"sample_rate":40000,"f0":true}'),
		).rejects.toThrow(/--params cannot set f0/);
		await expect(
			admin("voice", "update", "--name", "No pitch", "--params", '{"sample_rate":40000,"feature_dim":256}'),
		).rejects.toThrow(/--params cannot set feature_dim/);
		// An index alone is checked against the width the model recorded.
		await expect(
			admin("voice", "update", "--name", "No pitch", "--index", path.join(FIXTURES, "index/voice-v1-256.index")),
		).rejects.toThrow(/holds 256-wide features but the voice's model reads 768-wide ones/);
		await admin("voice", "update", "--name", "No pitch", "--index", path.join(FIXTURES, "index/voice-v2-768.index"));
		expect(await engineParams("No pitch")).toEqual(recorded(false, { rms_mix_rate: 0.5 }));
		// With an index, protect still has no unvoiced frames to keep from its blend: the model takes no pitch.
		await expect(
			admin("voice", "update", "--name", "No pitch", "--params", '{"sample_rate":40000,"protect":0.2}'),
		).rejects.toThrow(/protect does not apply: the model has no pitch input/);

		// A new model with pitch input replaces the record, and then f0_method applies.
		await admin("voice", "update", "--name", "No pitch", "--model", path.join(FIXTURES, "v2-f0-40k.pth"));
		expect(await engineParams("No pitch")).toEqual(recorded(true, { rms_mix_rate: 0.5 }));
		await admin("voice", "update", "--name", "No pitch", "--params", '{"sample_rate":40000,"f0_method":"yin"}');
		expect(await engineParams("No pitch")).toEqual(recorded(true, { f0_method: "yin" }));
		// ... and a model without it is refused while the defaults name an f0_method.
		await expect(
			admin("voice", "update", "--name", "No pitch", "--model", path.join(FIXTURES, "v2-nono-40k.pth")),
		).rejects.toThrow(/f0_method does not apply/);
	});

	it("refuses a default of f0_method rmvpe where neither the deployment nor the voice has an RMVPE model", async () => {
		await backend.execute(["DELETE FROM base_models WHERE name = 'rmvpe'"]);
		const create = (name: string, ...more: string[]) =>
			admin(
				"voice",
				"create",
				"--name",
				name,
				"--engine",
				"rvc",
				"--model",
				path.join(FIXTURES, "v2-f0-40k.pth"),
				...more,
			);
		await expect(create("Rmvpe default", "--params", '{"f0_method":"rmvpe"}')).rejects.toThrow(
			/f0_method rmvpe needs an RMVPE model, and this deployment has none/,
		);
		expect(await engineParams("Rmvpe default")).toBeUndefined();
		// Without a method named, conversions track pitch with yin; a named rmvpe is refused on update too.
		await create("Rmvpe default");
		await expect(
			admin("voice", "update", "--name", "Rmvpe default", "--params", '{"sample_rate":40000,"f0_method":"rmvpe"}'),
		).rejects.toThrow(/needs an RMVPE model/);
		// With the voice's own RMVPE, or once the deployment has one, it is taken.
		const rmvpe = path.join(dir, "own-rmvpe.onnx");
		await writeFile(rmvpe, buildTinyRmvpe({ pitchBin: 168 }));
		await create("Own rmvpe", "--artifact", `rmvpe=${rmvpe}`, "--params", '{"f0_method":"rmvpe"}');
		expect(await engineParams("Own rmvpe")).toMatchObject({ f0_method: "rmvpe" });
		await admin("base-model", "set", "rmvpe", rmvpe);
		await admin("voice", "update", "--name", "Rmvpe default", "--params", '{"sample_rate":40000,"f0_method":"rmvpe"}');
		expect(await engineParams("Rmvpe default")).toMatchObject({ f0_method: "rmvpe" });
	});

	/**
	 * A 3-speaker `model` as voice `name`: a speaker_id past the third refused at creation, the count recorded with
	 * the model's other facts, and new defaults checked against it.
	 */
	async function createThreeSpeakerVoice(name: string, model: string): Promise<void> {
		const create = (speakerId: number) =>
			admin(
				...["voice", "create", "--name", name, "--engine", "rvc", "--model", model],
				...["--params", JSON.stringify({ sample_rate: 40_000, speaker_id: speakerId })],
			);
		await expect(create(3)).rejects.toThrow(/speaker_id 3 is beyond the model's 3 speakers \(0 to 2\)/);
		await create(2);
		expect(await engineParams(name)).toEqual({
			sample_rate: 40_000,
			speaker_id: 2,
			f0: true,
			feature_dim: 768,
			speakers: 3,
		});
		await expect(
			admin("voice", "update", "--name", name, "--params", '{"sample_rate":40000,"speaker_id":7}'),
		).rejects.toThrow(/speaker_id 7 is beyond the model's 3 speakers/);
	}

	it("records the model's speaker count and refuses a speaker_id past it, as a runner would fail every job", async () => {
		await createThreeSpeakerVoice("Choir", path.join(FIXTURES, "v2-f0-40k-3-speakers.pth"));
		// The count is the model's, which new defaults cannot set themselves.
		await expect(
			admin("voice", "update", "--name", "Choir", "--params", '{"sample_rate":40000,"speakers":8}'),
		).rejects.toThrow(/--params cannot set speakers/);
		// A new model with one speaker does not keep a default for the third.
		await expect(
			admin("voice", "update", "--name", "Choir", "--model", path.join(FIXTURES, "v2-f0-40k.pth")),
		).rejects.toThrow(/speaker_id 2 is beyond the model's 1 speaker \(0 to 0\)/);
		expect(await engineParams("Choir")).toMatchObject({ speaker_id: 2, speakers: 3 });
	});

	it("records an ONNX export's speaker count from its graph and refuses a speaker_id past it", async () => {
		// torch.onnx.export of a 3-speaker synthesizer, as RVC exports one (make-torch-onnx.py): traced at 16 frames,
		// so the inspection's 4-frame probe cannot measure its rate, and --params gives it.
		await createThreeSpeakerVoice("Exported choir", path.join(FIXTURES, "torch-export-3-speakers.onnx"));
	});

	it("refuses a rename to a taken name with a usage error", async () => {
		await admin("voice", "create", "--name", "First name");
		await admin("voice", "create", "--name", "Second name");
		const rename = admin("voice", "update", "--name", "Second name", "--rename", "First name");
		await expect(rename).rejects.toBeInstanceOf(UsageError);
		await expect(rename).rejects.toThrow('A voice named "First name" already exists');
	});

	it("refuses an ONNX synthesizer whose cost grows faster with the input than RVC's, and writes nothing", async () => {
		// Standard operators only (make-hostile-onnx.py), nothing on the probe's 4 frames: an Expand to [frames, frames,
		// 640] floats, measured at 125 and 500 frames and carried out to the engine's longest window, as validation does.
		// (This is the file's first ONNX synthesizer: it also measures the reference, the runner's own graph.)
		const argv = ["voice", "create", "--name", "Costly", "--engine", "rvc", "--params", '{"sample_rate":40000}'];
		await expect(admin(...argv, "--model", path.join(FIXTURES, "onnx/quadratic-expand.onnx"))).rejects.toThrow(
			/--model .*quadratic-expand.onnx cannot be used: the synthesizer's memory grows faster with the input than an RVC synthesizer's: .* times RVC's published 40 kHz synthesizer \(at most 8 times\)$/,
		);
		expect(await backend.query("SELECT id FROM voices WHERE name = 'Costly'")).toEqual([]);
	});

	it("refuses rvc voice files and params it cannot use, and writes nothing", async () => {
		const model = path.join(dir, "refused.onnx");
		await writeFile(model, buildTinySynthesizer({ sampleRate: 40_000 }));
		const hnsw = path.join(FIXTURES, "index/hnsw.index");
		const wav = path.join(dir, "not-a-model.wav");
		await writeFile(wav, demoVoiceSample(DEMO_VOICES[0] as (typeof DEMO_VOICES)[0]));
		// w-okada's voice changer export: its inputs (export2onnx.py) are feats, p_len, pitch, pitchf, sid, no rnd.
		const okada = path.join(dir, "okada.onnx");
		const okadaNames = { phone: "feats", phone_lengths: "p_len", ds: "sid", rnd: "noise_drawn_inside" };
		await writeFile(okada, buildTinySynthesizer({ sampleRate: 40_000, rename: okadaNames }));
		const rvc = ["voice", "create", "--name", "Refused", "--engine", "rvc"];
		const rate = ["--params", '{"sample_rate":40000}'];
		const refusals: [string[], RegExp][] = [
			[[...rvc, "--model", wav, ...rate], /--model .* is not an RVC .pth checkpoint or an ONNX synthesizer$/],
			[
				[...rvc, "--model", okada, ...rate],
				/--model .* is not an RVC .pth .*: this is w-okada's voice changer export, .*: upload the RVC .pth it was exported from\)$/,
			],
			[
				[...rvc, "--model", path.join(FIXTURES, "refused-os-system.pth")],
				/--model .*refused-os-system.pth cannot be used: .*os/,
			],
			// Graphs an account's validation refuses before running them (make-hostile-onnx.py): a Loop whose trip
			// count grows with the input's length, an If, and an operator of onnxruntime's own domain.
			[
				[...rvc, "--model", path.join(FIXTURES, "hostile/loop-frames.onnx"), ...rate],
				/--model .*loop-frames.onnx cannot be used: the ONNX graph holds the control-flow operator "Loop": /,
			],
			[
				[...rvc, "--model", path.join(FIXTURES, "hostile/if-input.onnx"), ...rate],
				/--model .*if-input.onnx cannot be used: the ONNX graph holds the control-flow operator "If": /,
			],
			// Nor past those checks under another flag.
			[
				[...rvc, "--artifact", `synthesizer=${path.join(FIXTURES, "hostile/loop-frames.onnx")}`, ...rate],
				/^--artifact synthesizer=FILE is not taken: give it as --model FILE, which is checked as runners read it$/,
			],
			[
				[...rvc, "--model", model, "--artifact", `index=${hnsw}`, ...rate],
				/^--artifact index=FILE is not taken: give it as --index FILE/,
			],
			[
				[...rvc, "--model", path.join(FIXTURES, "hostile/contrib-op.onnx"), ...rate],
				/--model .*contrib-op.onnx cannot be used: the ONNX graph holds the operator "FastGelu" \(node "gelu"\) of domain "com.microsoft": /,
			],
			[[...rvc, "--model", model, "--index", hnsw, ...rate], /--index .*hnsw.index cannot be used/],
			[
				[...rvc, "--model", model, "--index", model, ...rate],
				/is not a faiss feature index .* \(it is an ONNX model, role synthesizer\)/,
			],
			[
				[...rvc, "--model", model, "--params", '{"sample_rate":48000}'],
				/sample_rate 48000 disagrees with the model's 40000 Hz/,
			],
			[
				[
					...rvc,
					"--model",
					path.join(FIXTURES, "v2-f0-40k.pth"),
					"--index",
					path.join(FIXTURES, "index/voice-v1-256.index"),
				],
				/holds 256-wide features but --model reads 768-wide ones/,
			],
			[[...rvc, ...rate], /an rvc voice needs its model/],
			// Asked for the model first, not for the sample_rate it would give.
			[rvc, /an rvc voice needs its model/],
			[
				[...rvc, "--model", model, "--params", '{"sample_rate":40000,"index_rate":2}'],
				/index_rate must be a number from 0 to 1/,
			],
			[[...rvc, "--model", model, "--params", '{"sample_rate":40000,"formant_shift":3}'], /formant_shift must be 0/],
			[
				[...rvc, "--model", model, "--params", '{"sample_rate":40000,"chunk_seconds":0}'],
				/--params for an rvc voice: chunk_seconds must be a number in 1\.\.120, got 0/,
			],
			// Fine on a CPU runner (its cut search is 0.75 s), refused by any other (5 s).
			[
				[...rvc, "--model", model, "--params", '{"sample_rate":40000,"chunk_seconds":4}'],
				/--params for an rvc voice: chunk_search_seconds must be shorter than chunk_seconds/,
			],
			[["voice", "create", "--name", "Refused", "--model", model], /--model and --index are for rvc voices/],
			[[...rvc, "--model", model, ...rate, "--pitch-range", "300-200"], /--pitch-range must be LOW-HIGH/],
		];
		for (const [argv, message] of refusals) {
			await expect(admin(...argv)).rejects.toThrow(message);
		}
		expect(await backend.query("SELECT id FROM voices WHERE name = 'Refused'")).toEqual([]);
		// A dsp voice made rvc without a model: the model is what is missing, not its dsp params' fault.
		await admin("voice", "create", "--name", "Was dsp", "--params", '{"formant_shift":3}');
		await expect(admin("voice", "update", "--name", "Was dsp", "--engine", "rvc")).rejects.toThrow(
			/an rvc voice needs its model/,
		);
		// With one, the dsp params go and the model's rate comes.
		await admin("voice", "update", "--name", "Was dsp", "--engine", "rvc", "--model", model);
		const made = ((await admin("voice", "list")) as Record<string, unknown>[]).find((v) => v.name === "Was dsp");
		expect(made).toMatchObject({ engine: "rvc", engine_params: { sample_rate: 40_000, f0: true } });
		expect(made?.engine_params).not.toHaveProperty("formant_shift");
	});
});

/** What `npm run dev` saves for the CLI (scripts/lib/seed.ts), read back the way the CLI reads it (cli/config.ts). */
describe("admin CLI against the deployed D1 (--remote)", () => {
	it("says why wrangler failed a query, where the message was empty", async () => {
		// No Cloudflare credentials at all, so wrangler refuses before any network access, with its reason.
		const saved = { ...process.env };
		const home = await mkdtemp(path.join(tmpdir(), "vc-admin-home-"));
		for (const name of ["CLOUDFLARE_API_TOKEN", "CLOUDFLARE_API_KEY", "CLOUDFLARE_EMAIL", "CLOUDFLARE_ACCOUNT_ID"]) {
			delete process.env[name];
		}
		process.env.XDG_CONFIG_HOME = home;
		process.env.WRANGLER_LOG = "error"; // what `npm run admin` sets
		try {
			await expect(runAdmin(["account", "list"], remoteBackend())).rejects.toThrow(
				/wrangler d1 execute failed:\n.*CLOUDFLARE_API_TOKEN/,
			);
		} finally {
			process.env = saved;
			await rm(home, { recursive: true, force: true });
		}
	}, 60_000);
});

describe("demo seed", () => {
	it("saves the address the dev stack listens on with the demo client, and the CLI connects there", async () => {
		const file = path.join(dir, ".wrangler", "demo-credentials.json");
		const first = await seedDemo(backend, file, "http://127.0.0.1:8941");
		expect(JSON.parse(await readFile(file, "utf8"))).toEqual({ ...first, base_url: "http://127.0.0.1:8941" });
		expect((await stat(file)).mode & 0o777).toBe(0o600);
		expect(resolveConnection({}, {}, file)).toMatchObject({
			baseUrl: "http://127.0.0.1:8941",
			clientId: first.client_id,
			clientSecret: first.client_secret,
			source: "local demo",
		});

		// The next start on another port keeps the client and moves the address.
		const second = await seedDemo(backend, file, "http://127.0.0.1:8787");
		expect(second).toEqual(first);
		expect(resolveConnection({}, {}, file).baseUrl).toBe("http://127.0.0.1:8787");
	}, 120_000);
});
