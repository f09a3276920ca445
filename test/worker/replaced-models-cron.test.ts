/**
 * The cron safety net's removal of the service's model files that a newer one replaced (`base-model set`, `voice
 * update --model`), in the real local D1 and R2: never before every lease that could name them has expired, never a
 * file a row still names, never anything outside `base-models/` and `models/`. R2 stamps uploads with the real clock,
 * so the passes run at times ahead of it.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { REPLACED_FILE_RETENTION_SECONDS, removeReplacedModelFiles } from "../../src/cron/replaced-model-files.ts";
import { runSafetyNet } from "../../src/cron/safety-net.ts";
import { sha256Hex, utf8 } from "../../src/lib/encoding.ts";
import { LEASE_URL_SECONDS } from "../../src/routes/internal/build-lease.ts";
import { signStorageUrl, verifyStorageUrl } from "../../src/storage/signed-url.ts";

const HOUR = 3600_000;
/** A moment `ms` after `from`. */
const at = (from: number, ms: number) => new Date(from + ms);
const RETENTION = REPLACED_FILE_RETENTION_SECONDS * 1000;

const checksum = (text: string) => sha256Hex(utf8(text));

async function put(...keys: string[]) {
	for (const key of keys) await env.BUCKET.put(key, utf8(`bytes of ${key}`));
}

/** Which of `keys` are in the bucket. */
async function stored(keys: string[]): Promise<string[]> {
	const found = await Promise.all(keys.map(async (key) => ((await env.BUCKET.head(key)) ? key : null)));
	return found.filter((key) => key !== null);
}

async function setBaseModelRow(name: string, key: string, updatedAt: Date) {
	await env.DB.prepare(
		`INSERT INTO base_models (name, object_key, sha256, size_bytes, updated_at) VALUES (?, ?, ?, 1, ?)
		 ON CONFLICT (name) DO UPDATE SET object_key = excluded.object_key, updated_at = excluded.updated_at`,
	)
		.bind(name, key, key.split("/").pop(), updatedAt.toISOString())
		.run();
}

/** A voice row naming these keys as its artifacts; a service voice unless `accountId` is given. */
async function insertVoice(
	artifacts: Record<string, string>,
	updatedAt: Date,
	options: { id?: string; accountId?: string } = {},
) {
	const id = options.id ?? crypto.randomUUID();
	const when = updatedAt.toISOString();
	if (options.accountId) {
		await env.DB.prepare("INSERT INTO accounts (id, name, created_at) VALUES (?, 'Acme', ?)")
			.bind(options.accountId, when)
			.run();
	}
	const list = Object.entries(artifacts).map(([name, key]) => ({ name, key, sha256: "0".repeat(64), size_bytes: 1 }));
	await env.DB.prepare(
		`INSERT INTO voices (id, account_id, name, tags, engine, engine_params, artifacts, is_active, created_at, updated_at)
		 VALUES (?, ?, ?, '[]', 'rvc', '{}', ?, 1, ?, ?)`,
	)
		.bind(id, options.accountId ?? null, `Voice ${id}`, JSON.stringify(list), when, when)
		.run();
	return id;
}

/** `base-model set rmvpe NEW` at `when`: the file it replaces, and the new one. */
async function replaceRmvpe(when: Date) {
	const replaced = `base-models/rmvpe/${await checksum("old rmvpe")}`;
	const current = `base-models/rmvpe/${await checksum("new rmvpe")}`;
	await put(replaced, current);
	await setBaseModelRow("rmvpe", current, when);
	return { replaced, current };
}

beforeEach(async () => {
	// Each test sees only its own files and rows under the prefixes the pass reads.
	await env.DB.prepare("DELETE FROM base_models").run();
	for (const prefix of ["base-models/", "models/"]) {
		const keys = (await env.BUCKET.list({ prefix })).objects.map((object) => object.key);
		if (keys.length) await env.BUCKET.delete(keys);
	}
});

describe("removal of replaced model files", () => {
	it("keeps replaced files at least as long as the signed addresses of a lease live", () => {
		expect(REPLACED_FILE_RETENTION_SECONDS).toBeGreaterThanOrEqual(LEASE_URL_SECONDS);
	});

	it("removes a replaced base model's file once every lease that could name it has expired, never the current one", async () => {
		const start = Date.now();
		// Replaced now: a lease granted a moment before signed `replaced` for its whole life.
		const { replaced, current } = await replaceRmvpe(at(start, 0));

		expect(await removeReplacedModelFiles(env, at(start, RETENTION - 60_000), 100)).toBe(0);
		expect(await stored([replaced, current])).toEqual([replaced, current]);
		expect(await removeReplacedModelFiles(env, at(start, RETENTION + 60_000), 100)).toBe(1);
		expect(await stored([replaced, current])).toEqual([current]);
	});

	it("keeps a replaced file while a lease granted as the admin tool's write reached D1 can still fetch it", async () => {
		const start = Date.now();
		// The admin tool stamps updated_at on the operator's machine, before its write reaches D1 (a slow wrangler call,
		// a clock a few minutes behind the Worker's): a lease granted ten minutes after that stamp read the old row.
		const { replaced } = await replaceRmvpe(at(start, 0));
		const leasedAt = at(start, 10 * 60_000);
		const url = new URL(
			await signStorageUrl(env, "https://api.example", {
				method: "GET",
				key: replaced,
				expiresAt: at(leasedAt.getTime(), LEASE_URL_SECONDS * 1000),
			}),
		);
		const lastMinute = at(leasedAt.getTime(), LEASE_URL_SECONDS * 1000 - 60_000);
		expect((await verifyStorageUrl(env, url, "GET", lastMinute)).key).toBe(replaced);

		expect(await removeReplacedModelFiles(env, lastMinute, 100)).toBe(0);
		expect(await stored([replaced])).toEqual([replaced]);
	});

	it("counts the retention from the replacement, however long before it the file was uploaded", async () => {
		const start = Date.now();
		const replaced = `base-models/contentvec/${await checksum("old contentvec")}`;
		const current = `base-models/contentvec/${await checksum("new contentvec")}`;
		await put(replaced, current);
		// Replaced three hours after the upload: leases granted until then name it.
		await setBaseModelRow("contentvec", current, at(start, 3 * HOUR));

		expect(await removeReplacedModelFiles(env, at(start, 3 * HOUR + RETENTION - 60_000), 100)).toBe(0);
		expect(await stored([replaced])).toEqual([replaced]);
		expect(await removeReplacedModelFiles(env, at(start, 3 * HOUR + RETENTION + 60_000), 100)).toBe(1);
		expect(await stored([replaced, current])).toEqual([current]);
	});

	it("removes a service voice's replaced model files, those stored before checksums were in keys too", async () => {
		const start = Date.now();
		const voiceId = crypto.randomUUID();
		const current = `models/${voiceId}/synthesizer/${await checksum("new model")}`;
		const replaced = `models/${voiceId}/synthesizer/${await checksum("old model")}`;
		// Stored by an admin tool that kept no checksum in the key: one replaced, one still the voice's.
		const legacyReplaced = `models/${voiceId}/synthesizer`;
		const legacyCurrent = `models/${voiceId}/index`;
		await put(current, replaced, legacyReplaced, legacyCurrent);
		await insertVoice({ synthesizer: current, index: legacyCurrent }, at(start, 0), { id: voiceId });

		expect(await removeReplacedModelFiles(env, at(start, RETENTION - 60_000), 100)).toBe(0);
		expect(await removeReplacedModelFiles(env, at(start, RETENTION + 60_000), 100)).toBe(2);
		expect(await stored([current, replaced, legacyReplaced, legacyCurrent])).toEqual([current, legacyCurrent]);
	});

	it("removes the files of a voice create that stopped before writing its row, once their upload is old enough", async () => {
		const start = Date.now();
		// Uploaded under a new voice id; the row's write failed (wrangler lost the connection), and a retry takes
		// another id: no lease ever named these, and no row ever will.
		const voiceId = crypto.randomUUID();
		const left = [
			`models/${voiceId}/synthesizer/${await checksum("model")}`,
			`models/${voiceId}/index/${await checksum("index")}`,
		];
		await put(...left);

		expect(await removeReplacedModelFiles(env, at(start, RETENTION - 60_000), 100)).toBe(0);
		expect(await removeReplacedModelFiles(env, at(start, RETENTION + 60_000), 100)).toBe(2);
		expect(await stored(left)).toEqual([]);
	});

	it("never removes a file a row still names, a base model's without a row, an account voice's, or anything outside the service's model files", async () => {
		const start = Date.now();
		const contentvec = `base-models/contentvec/${await checksum("contentvec")}`;
		await setBaseModelRow("contentvec", contentvec, at(start, 0));
		// Named by a row of another base model (an old row), and by a voice's own artifacts.
		const namedByOtherBase = `base-models/contentvec/${await checksum("as contentvec_v1")}`;
		await setBaseModelRow("contentvec_v1", namedByOtherBase, at(start, 0));
		const namedByVoice = `base-models/contentvec/${await checksum("a voice's own")}`;
		const serviceVoice = await insertVoice({}, at(start, 0));
		const namedByOtherVoice = `models/${serviceVoice}/index/${await checksum("shared index")}`;
		await insertVoice({ contentvec: namedByVoice, index: namedByOtherVoice }, at(start, 0), {
			accountId: crypto.randomUUID(),
		});
		// No row says when this was last used (a row removed by hand may have been leased).
		const noBaseRow = `base-models/rmvpe/${await checksum("rmvpe")}`;
		const accountVoice = await insertVoice({}, at(start, 0), { accountId: crypto.randomUUID() });
		const underAccountVoice = `models/${accountVoice}/synthesizer/${await checksum("account")}`;
		// Other prefixes: an account voice's file (its own lifecycle), a service voice's image.
		const accountVoiceFile = `account-voices/${crypto.randomUUID()}/model`;
		const image = `voices/${serviceVoice}/image.png`;
		const kept = [
			contentvec,
			namedByOtherBase,
			namedByVoice,
			namedByOtherVoice,
			noBaseRow,
			underAccountVoice,
			accountVoiceFile,
			image,
		];
		await put(...kept);

		expect(await removeReplacedModelFiles(env, at(start, 100 * HOUR), 100)).toBe(0);
		expect(await stored(kept)).toEqual(kept);
	});

	it("reads every page of the listing, and removes at most `limit` files a pass", async () => {
		const start = Date.now();
		const voiceId = crypto.randomUUID();
		// The files in use sort first: a pass that read one page would never reach the replaced ones.
		const keyOf = async (name: string) => `models/${voiceId}/${name}/${await checksum(name)}`;
		const names = ["a", "b", "c", "d", "e"];
		const inUse = await Promise.all(names.map(keyOf));
		const replaced = await Promise.all(["x", "y", "z"].map(keyOf));
		await put(...inUse, ...replaced);
		await insertVoice(Object.fromEntries(names.map((name, i) => [name, String(inUse[i])])), at(start, 0), {
			id: voiceId,
		});
		const later = at(start, RETENTION + 60_000);

		expect(await removeReplacedModelFiles(env, later, 2, 2)).toBe(2);
		expect(await removeReplacedModelFiles(env, later, 2, 2)).toBe(1);
		expect(await stored([...inUse, ...replaced])).toEqual(inUse);
	});

	it("runs in the cron safety net", async () => {
		const start = Date.now();
		const { replaced, current } = await replaceRmvpe(at(start, 0));

		expect((await runSafetyNet(env)).replacedModelFilesRemoved).toBe(0);
		const report = await runSafetyNet(env, at(start, RETENTION + 60_000));
		expect(report.replacedModelFilesRemoved).toBe(1);
		expect(await stored([replaced, current])).toEqual([current]);
	});
});
