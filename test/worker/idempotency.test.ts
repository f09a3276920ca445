/** `Idempotency-Key` on POST /api/v1/voice-conversions: replay, conflicts, scoping, and what is not kept. */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { canonicalJson, IDEMPOTENCY_WINDOW_SECONDS } from "../../src/http/idempotency.ts";
import { sha256Hex } from "../../src/lib/encoding.ts";
import { insertAudioFile, insertVoice, json, resetBroker, user } from "./conversion-fixtures.ts";

beforeEach(resetBroker);

async function setup() {
	const alice = await user();
	const voiceId = await insertVoice();
	const file = await insertAudioFile(alice.accountId, "pending");
	return { alice, body: { audio_file_id: file.id, voice_model_id: voiceId, use_preview: true } };
}

const countFor = async (accountId: string) =>
	(
		await env.DB.prepare("SELECT COUNT(*) AS n FROM voice_conversions WHERE account_id = ?")
			.bind(accountId)
			.first<{ n: number }>()
	)?.n;

describe("Idempotency-Key", () => {
	it("replays the first response for the same key and body, creating one conversion", async () => {
		const { alice, body } = await setup();
		const first = await alice.create(body, { "Idempotency-Key": "order-42" });
		expect(first.status).toBe(201);
		const firstBody = await json<{ data: { id: string } }>(first);
		// Same body with keys in another order and different spacing is the same request.
		const again = await alice.api("/api/v1/voice-conversions", {
			method: "POST",
			headers: { "Content-Type": "application/json", "Idempotency-Key": "order-42" },
			body: `{ "use_preview": true, "voice_model_id": "${body.voice_model_id}", "audio_file_id": "${body.audio_file_id}" }`,
		});
		expect(again.status).toBe(201);
		expect(again.headers.get("Idempotent-Replayed")).toBe("true");
		expect(await json(again)).toEqual(firstBody);
		expect(await countFor(alice.accountId)).toBe(1);
		const stored = await env.DB.prepare("SELECT created_at, expires_at, operation FROM idempotency_keys WHERE key = ?")
			.bind("order-42")
			.first<{ created_at: string; expires_at: string; operation: string }>();
		expect(stored?.operation).toBe("POST /api/v1/voice-conversions");
		expect(Date.parse(stored!.expires_at) - Date.parse(stored!.created_at)).toBe(IDEMPOTENCY_WINDOW_SECONDS * 1000);
	});

	it("answers 409 when the key is reused with a different body", async () => {
		const { alice, body } = await setup();
		expect((await alice.create(body, { "Idempotency-Key": "k1" })).status).toBe(201);
		const other = await alice.create({ ...body, pitch_shift: "third_up" }, { "Idempotency-Key": "k1" });
		expect(other.status).toBe(409);
		expect(await json(other)).toMatchObject({ success: false, code: "idempotency_key_reused" });
		expect(await countFor(alice.accountId)).toBe(1);
	});

	it("scopes keys per account, and requests without a key are never deduplicated", async () => {
		const { alice, body } = await setup();
		const bob = await user();
		const bobsFile = await insertAudioFile(bob.accountId, "pending");
		const bobsBody = { ...body, audio_file_id: bobsFile.id };
		expect((await alice.create(body, { "Idempotency-Key": "shared" })).status).toBe(201);
		const bobs = await bob.create(bobsBody, { "Idempotency-Key": "shared" });
		expect(bobs.status).toBe(201);
		expect(bobs.headers.get("Idempotent-Replayed")).toBeNull();
		await alice.create(body);
		await alice.create(body);
		expect(await countFor(alice.accountId)).toBe(3);
	});

	it("replays a client error but leaves the key free after a validation error", async () => {
		const { alice, body } = await setup();
		const invalid = await alice.create({ ...body, pitch_shift: "nope" }, { "Idempotency-Key": "fix-me" });
		expect(invalid.status).toBe(400);
		expect((await alice.create(body, { "Idempotency-Key": "fix-me" })).status).toBe(201);

		const missingVoice = { ...body, voice_model_id: crypto.randomUUID() };
		const first = await alice.create(missingVoice, { "Idempotency-Key": "nf" });
		expect(first.status).toBe(404);
		const replay = await alice.create(missingVoice, { "Idempotency-Key": "nf" });
		expect(replay.status).toBe(404);
		expect(replay.headers.get("Idempotent-Replayed")).toBe("true");
	});

	it("tells a concurrent duplicate to retry, and refuses malformed keys", async () => {
		const { alice, body } = await setup();
		// A first request still running holds the key without a stored response.
		const now = new Date().toISOString();
		await env.DB.prepare(
			`INSERT INTO idempotency_keys (account_id, key, operation, request_hash, created_at, expires_at)
			 VALUES (?, 'busy', 'POST /api/v1/voice-conversions', ?, ?, ?)`,
		)
			.bind(alice.accountId, await sha256Hex(canonicalJson(body)), now, new Date(Date.now() + 3600_000).toISOString())
			.run();
		const busy = await alice.create(body, { "Idempotency-Key": "busy" });
		expect(busy.status).toBe(409);
		expect(busy.headers.get("Retry-After")).toBe("1");
		expect(await json(busy)).toMatchObject({ code: "idempotency_request_in_progress" });
		const tooLong = await alice.create(body, { "Idempotency-Key": "x".repeat(256) });
		expect(tooLong.status).toBe(400);
		expect(await json(tooLong)).toMatchObject({ errors: [{ field: "Idempotency-Key" }] });
	});

	it("lets an expired key be used again", async () => {
		const { alice, body } = await setup();
		const first = await json<{ data: { id: string } }>(await alice.create(body, { "Idempotency-Key": "old" }));
		await env.DB.prepare("UPDATE idempotency_keys SET expires_at = ? WHERE key = 'old'")
			.bind(new Date(Date.now() - 1000).toISOString())
			.run();
		const fresh = await json<{ data: { id: string } }>(
			await alice.create({ ...body, use_preview: false }, { "Idempotency-Key": "old" }),
		);
		expect(fresh.data.id).not.toBe(first.data.id);
	});

	it("canonicalises bodies by key order only", () => {
		expect(canonicalJson({ b: 1, a: [{ d: 2, c: null }] })).toBe('{"a":[{"c":null,"d":2}],"b":1}');
		expect(canonicalJson({ a: 1 })).not.toBe(canonicalJson({ a: "1" }));
	});
});
