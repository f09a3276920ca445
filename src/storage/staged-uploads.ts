/** Objects of uploads through signed addresses whose hook takes them (`upload-hooks.ts`). */

/** Where one PUT through the signed `key` stores its body when the key's hook is `staged`. */
export const stagedUploadKey = (key: string) => `${key}.upload-${crypto.randomUUID()}`;

/**
 * Deletes every object whose key starts with `prefix`: a file's object and any upload the database never took
 * (a request that ended between storing its body and `afterPut`).
 */
export async function deleteObjectsUnder(env: Pick<Env, "BUCKET">, prefix: string): Promise<void> {
	let cursor: string | undefined;
	do {
		const page = await env.BUCKET.list({ prefix, ...(cursor ? { cursor } : {}) });
		if (page.objects.length > 0) await env.BUCKET.delete(page.objects.map((object) => object.key));
		cursor = page.truncated ? page.cursor : undefined;
	} while (cursor);
}
