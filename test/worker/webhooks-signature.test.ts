import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { verifyWebhook } from "../../sdk/verify-webhook.ts";
import { computeWebhookSignature, signatureHeader } from "../../src/contracts/webhook-signature.ts";
import { generateWebhookSecret, openSecret, sealSecret } from "../../src/webhooks/secret-box.ts";

const VECTOR = {
	secret: "It's a Secret to Everybody",
	timestamp: "1614265330",
	body: "Hello, World!",
	header: "sha256=f37376a318b83773050e9e3ac8c6d599d2254e4f69edd75a1419cb54dc7264f3",
};
const VECTOR_NOW = 1614265330 * 1000;

describe("delivery signature", () => {
	it("matches the published test vector", async () => {
		expect(await signatureHeader(VECTOR.secret, VECTOR.timestamp, VECTOR.body)).toBe(VECTOR.header);
		expect(await computeWebhookSignature(VECTOR.secret, 1614265330, new TextEncoder().encode(VECTOR.body))).toBe(
			VECTOR.header.slice("sha256=".length),
		);
	});

	it("covers the timestamp: another timestamp gives another signature", async () => {
		expect(await signatureHeader(VECTOR.secret, "1614265331", VECTOR.body)).not.toBe(VECTOR.header);
	});
});

describe("verifyWebhook (receiver helper)", () => {
	const headers = (overrides: Record<string, string | undefined> = {}) => {
		const all: Record<string, string | undefined> = {
			"X-Webhook-Signature": VECTOR.header,
			"X-Webhook-Timestamp": VECTOR.timestamp,
			"X-Webhook-Id": "5b0b3f4e-2a64-4e36-9a53-0f8f7e0e2a11",
			"X-Webhook-Event": "conversion_completed",
			...overrides,
		};
		return new Headers(Object.entries(all).filter((e): e is [string, string] => e[1] !== undefined));
	};
	const verify = (h: Headers | Record<string, string>, body: string | Uint8Array = VECTOR.body, now = VECTOR_NOW) =>
		verifyWebhook({ secret: VECTOR.secret, headers: h, body, now });

	it("accepts the vector and reports id and event", async () => {
		expect(await verify(headers())).toEqual({
			ok: true,
			timestamp: 1614265330,
			id: "5b0b3f4e-2a64-4e36-9a53-0f8f7e0e2a11",
			event: "conversion_completed",
		});
	});

	it("accepts Node-style lower-case header objects, byte bodies and timestamps up to 5 minutes off", async () => {
		const plain = { "x-webhook-signature": VECTOR.header, "x-webhook-timestamp": VECTOR.timestamp };
		expect((await verify(plain, new TextEncoder().encode(VECTOR.body))).ok).toBe(true);
		expect((await verify(headers(), VECTOR.body, VECTOR_NOW + 300_000)).ok).toBe(true);
		expect((await verify(headers(), VECTOR.body, VECTOR_NOW - 300_000)).ok).toBe(true);
	});

	it.each([
		[
			"no signature header",
			headers({ "X-Webhook-Signature": undefined }),
			VECTOR.body,
			VECTOR_NOW,
			"missing_signature",
		],
		[
			"no timestamp header",
			headers({ "X-Webhook-Timestamp": undefined }),
			VECTOR.body,
			VECTOR_NOW,
			"missing_timestamp",
		],
		[
			"a signature that is not hex",
			headers({ "X-Webhook-Signature": "sha256=xyz" }),
			VECTOR.body,
			VECTOR_NOW,
			"malformed_signature",
		],
		[
			"a timestamp that is not seconds",
			headers({ "X-Webhook-Timestamp": "1614265330.5" }),
			VECTOR.body,
			VECTOR_NOW,
			"malformed_timestamp",
		],
		["a timestamp 5 min + 1 s old", headers(), VECTOR.body, VECTOR_NOW + 301_000, "timestamp_out_of_tolerance"],
		["a timestamp 5 min + 1 s ahead", headers(), VECTOR.body, VECTOR_NOW - 301_000, "timestamp_out_of_tolerance"],
		["a changed body", headers(), "Hello, World?", VECTOR_NOW, "signature_mismatch"],
		["re-serialised JSON-ish body", headers(), "Hello, World! ", VECTOR_NOW, "signature_mismatch"],
		[
			"a signature made with another secret",
			headers({ "X-Webhook-Signature": `sha256=${"0".repeat(64)}` }),
			VECTOR.body,
			VECTOR_NOW,
			"signature_mismatch",
		],
		[
			"a replayed signature under a new timestamp",
			headers({ "X-Webhook-Timestamp": "1614265331" }),
			VECTOR.body,
			VECTOR_NOW,
			"signature_mismatch",
		],
	])("rejects %s", async (_name, h, body, now, reason) => {
		expect(await verify(h, body, now)).toEqual({ ok: false, reason });
	});
});

describe("sealed webhook secrets", () => {
	const keyEnv = (current: string, previous?: string) =>
		({ WEBHOOK_SECRET_KEY: current, WEBHOOK_SECRET_KEY_PREVIOUS: previous }) as Pick<
			Env,
			"WEBHOOK_SECRET_KEY" | "WEBHOOK_SECRET_KEY_PREVIOUS"
		>;
	const newKey = (version: string) => {
		const bytes = crypto.getRandomValues(new Uint8Array(32));
		return `${version}:${btoa(String.fromCharCode(...bytes))
			.replaceAll("+", "-")
			.replaceAll("/", "_")
			.replace(/=+$/, "")}`;
	};

	it("generates whsec_ secrets of 32 random bytes", () => {
		const secret = generateWebhookSecret();
		expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
		expect(generateWebhookSecret()).not.toBe(secret);
	});

	it("seals with the current key version and opens again; the ciphertext does not contain the secret", async () => {
		const secret = generateWebhookSecret();
		const sealed = await sealSecret(env, "sub-1", secret);
		expect(sealed.keyVersion).toBe("1");
		expect(sealed.ciphertext).not.toContain(secret.slice(6));
		expect(await openSecret(env, "sub-1", sealed)).toBe(secret);
	});

	it("binds the ciphertext to its subscription", async () => {
		const sealed = await sealSecret(env, "sub-1", generateWebhookSecret());
		await expect(openSecret(env, "sub-2", sealed)).rejects.toThrow();
	});

	it("opens secrets sealed under a previous key version after rotation", async () => {
		const oldKey = newKey("1");
		const sealed = await sealSecret(keyEnv(oldKey), "sub-1", "whsec_abc");
		const rotated = keyEnv(newKey("2"), `${newKey("0")}, ${oldKey}`);
		expect(await openSecret(rotated, "sub-1", sealed)).toBe("whsec_abc");
		expect((await sealSecret(rotated, "sub-1", "whsec_abc")).keyVersion).toBe("2");
		await expect(openSecret(keyEnv(newKey("2")), "sub-1", sealed)).rejects.toThrow(/version "1"/);
	});
});
