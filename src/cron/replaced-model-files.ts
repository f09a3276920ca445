/**
 * The service's model files that a newer one replaced (`base-model set`, `voice update --model|--index|--artifact`)
 * leave R2 once no lease can still fetch them. The admin tool stores each under its checksum and never overwrites
 * it, so a runner leased before the change still downloads what its lease names; the old object is then no row's,
 * and after the longest life of a lease's signed addresses it is no one's.
 *
 * What is removed, only under `base-models/` and `models/` (an account's voice files, under `account-voices/`, go
 * with their voice): an object that no base model row and no voice row names (in any column that holds a key), that
 * was uploaded before the cutoff (not a file being set right now), and whose owner (the base model of that name, the
 * service voice of that id) last changed before the cutoff: a replacement is a change of that row, so every lease
 * that named the object was granted before then. An object under a voice id no row has is a `voice create` that
 * stopped before writing its row, and goes; one under a base model without a row is kept (nothing says when it was
 * last used).
 */
import { BASE_MODEL_KEY_PREFIX, SERVICE_ARTIFACT_KEY_PREFIX } from "../contracts/service-model-keys.ts";
import { LEASE_URL_SECONDS } from "../routes/internal/build-lease.ts";
import { VALIDATION_URL_SECONDS } from "../routes/internal/build-validation-lease.ts";

/**
 * An owner's `updated_at` is stamped by the admin tool on the operator's machine, before its write reaches D1: a lease
 * granted meanwhile still reads the old row, and that clock is not the Worker's. An hour covers a slow write and a
 * clock somewhat behind.
 */
const OWNER_CLOCK_SLACK_SECONDS = 3600;

/**
 * How long a replaced file stays: the longest life of an address a lease (conversion or validation) signs for it, from
 * when its owner's row says it changed, plus that slack.
 */
export const REPLACED_FILE_RETENTION_SECONDS =
	Math.max(LEASE_URL_SECONDS, VALIDATION_URL_SECONDS) + OWNER_CLOCK_SLACK_SECONDS;

/** R2 returns at most 1000 keys a page. */
const LIST_PAGE = 1000;

/** What D1 says of the service's model files: every key a row names, and when each owner last changed. */
async function modelFileOwners(env: Pick<Env, "DB">) {
	const prefixed = (column: string) =>
		`(${column} LIKE '${BASE_MODEL_KEY_PREFIX}%' OR ${column} LIKE '${SERVICE_ARTIFACT_KEY_PREFIX}%')`;
	const [keys, bases, voices] = await env.DB.batch<{ key: string; owner: string; updated_at: string }>([
		env.DB.prepare(
			`SELECT json_extract(a.value, '$.key') AS key FROM voices v, json_each(v.artifacts) a
			 WHERE ${prefixed("json_extract(a.value, '$.key')")}
			 UNION SELECT object_key FROM base_models
			 UNION SELECT image_key FROM voices WHERE ${prefixed("image_key")}
			 UNION SELECT sample_key FROM voices WHERE ${prefixed("sample_key")}`,
		),
		env.DB.prepare("SELECT name AS owner, updated_at FROM base_models"),
		// Every voice: an account voice's row (no time, so never removed) is not a missing one.
		env.DB.prepare(
			"SELECT id AS owner, CASE WHEN account_id IS NULL THEN updated_at ELSE '' END AS updated_at FROM voices",
		),
	]);
	// A missing answer would read as "no row names anything": nothing is removed without all three.
	if (!keys?.results || !bases?.results || !voices?.results) throw new Error("D1 left out a result of the batch");
	const changedAt = (rows: { owner: string; updated_at: string }[]) =>
		new Map(rows.map((row) => [row.owner, Date.parse(row.updated_at)]));
	return {
		referenced: new Set(keys.results.map((row) => row.key)),
		changedAt: {
			[BASE_MODEL_KEY_PREFIX]: changedAt(bases.results),
			[SERVICE_ARTIFACT_KEY_PREFIX]: changedAt(voices.results),
		},
	};
}

/**
 * Removes up to `limit` replaced files; returns how many it removed. Every page of each prefix is read (the first
 * ones may hold only files in use), until `limit` candidates are found.
 */
export async function removeReplacedModelFiles(
	env: Pick<Env, "DB" | "BUCKET">,
	now: Date,
	limit: number,
	pageSize = LIST_PAGE,
): Promise<number> {
	const cutoff = now.getTime() - REPLACED_FILE_RETENTION_SECONDS * 1000;
	// D1 first: a row naming a file again after this read (a file set back) comes after its upload, seen below.
	const { referenced, changedAt } = await modelFileOwners(env);
	const candidates: string[] = [];
	for (const prefix of [BASE_MODEL_KEY_PREFIX, SERVICE_ARTIFACT_KEY_PREFIX] as const) {
		if (candidates.length >= limit) break;
		let cursor: string | undefined;
		do {
			const page = await env.BUCKET.list({ prefix, cursor, limit: pageSize });
			for (const object of page.objects) {
				const owner = object.key.slice(prefix.length).split("/")[0] ?? "";
				// No voice row: a `voice create` that stopped before writing it (voices are never removed from D1), so no
				// lease ever named the file. A base model's row may have been removed by hand while leased: kept.
				const ownerChanged =
					changedAt[prefix].get(owner) ??
					(prefix === SERVICE_ARTIFACT_KEY_PREFIX ? Number.NEGATIVE_INFINITY : undefined);
				if (
					!referenced.has(object.key) &&
					object.uploaded.getTime() <= cutoff &&
					ownerChanged !== undefined &&
					ownerChanged <= cutoff
				) {
					candidates.push(object.key);
				}
			}
			cursor = page.truncated ? page.cursor : undefined;
		} while (cursor && candidates.length < limit);
	}
	let removed = 0;
	for (const key of candidates.slice(0, limit)) {
		// Uploaded again since it was listed (the same file set back, which the admin tool always uploads before the row
		// names it): in use again. R2 has no conditional delete, so an upload landing between this look and the delete
		// is lost; setting the file again restores it.
		const object = await env.BUCKET.head(key);
		if (!object || object.uploaded.getTime() > cutoff) continue;
		await env.BUCKET.delete(key);
		removed++;
	}
	return removed;
}
