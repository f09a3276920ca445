import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { signedInClient } from "./helpers.ts";
import { createSubscription, patchSubscription } from "./webhooks-helpers.ts";

const PATH = "/api/v1/webhooks/subscriptions";
const json = (body: unknown): RequestInit => ({
	method: "POST",
	headers: { "Content-Type": "application/json" },
	body: JSON.stringify(body),
});

async function errorOf(response: Response) {
	return {
		status: response.status,
		...((await response.json()) as { code: string; message: string; errors?: unknown[] }),
	};
}

afterEach(() => vi.restoreAllMocks());

describe("webhook subscriptions API", () => {
	it("creates a subscription and shows its secret only in that response", async () => {
		const { api } = await signedInClient();
		const created = await createSubscription(api, {
			url: "https://hooks.example.com/voice",
			events: ["conversion_completed", "conversion_completed"],
			description: "orders service",
		});
		expect(created).toMatchObject({
			url: "https://hooks.example.com/voice",
			description: "orders service",
			events: ["conversion_completed"],
			is_active: true,
			last_success_at: null,
			last_failure_at: null,
			consecutive_failures: 0,
		});
		expect(created.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
		expect(Date.parse(created.created_at as string)).not.toBeNaN();

		const got = (await (await api(`${PATH}/${created.id}`)).json()) as { data: Record<string, unknown> };
		const listed = (await (await api(PATH)).json()) as { data: Record<string, unknown>[] };
		expect(got.data).not.toHaveProperty("secret");
		expect(listed.data.map((s) => s.id)).toEqual([created.id]);
		expect(JSON.stringify([got, listed])).not.toContain(created.secret);

		// Stored sealed: the secret is not in the database either.
		const row = await env.DB.prepare("SELECT * FROM webhook_subscriptions WHERE id = ?").bind(created.id).first();
		expect(JSON.stringify(row)).not.toContain(created.secret.slice(6));
		expect(row).toMatchObject({ secret_key_version: "1" });
	});

	it.each([
		[{ url: "http://hooks.example.com/x", events: ["conversion_completed"] }, 400, "invalid_webhook_url", "url"],
		[{ url: "https://10.0.0.1/x", events: ["conversion_completed"] }, 400, "invalid_webhook_url", "url"],
		[{ url: "https://hooks.example.com/x", events: [] }, 400, "invalid_request", "events"],
		[{ url: "https://hooks.example.com/x", events: ["conversion.completed"] }, 400, "invalid_request", "events"],
		[{ url: "https://hooks.example.com/x", events: ["webhook_test"] }, 400, "invalid_request", "events"],
		[{ url: "https://hooks.example.com/x" }, 400, "invalid_request", "events"],
		[{ events: ["conversion_failed"] }, 400, "invalid_request", "url"],
		[
			{ url: "https://hooks.example.com/x", events: ["conversion_failed"], secret: "mine" },
			400,
			"invalid_request",
			"secret",
		],
	])("refuses %j with a clear 4xx", async (body, status, code, field) => {
		const { api } = await signedInClient();
		const error = await errorOf(await api(PATH, json(body)));
		expect(error).toMatchObject({ status, code, success: false });
		expect(error.message).toContain(field);
	});

	it("allows at most 5 active subscriptions, counting neither inactive nor deleted ones", async () => {
		const { api } = await signedInClient();
		const subs = [];
		for (let i = 0; i < 5; i++) subs.push(await createSubscription(api, { url: `https://hooks.example.com/${i}` }));
		const sixth = await errorOf(
			await api(PATH, json({ url: "https://hooks.example.com/6", events: ["conversion_failed"] })),
		);
		expect(sixth).toMatchObject({ status: 409, code: "subscription_limit_reached" });

		// An inactive one frees a slot; reactivating it while 5 others are active is refused.
		const [first, second] = subs as unknown as [{ id: string }, { id: string }];
		expect((await patchSubscription(api, first.id, { is_active: false })).status).toBe(200);
		const replacement = await createSubscription(api, { url: "https://hooks.example.com/replacement" });
		const reactivate = await errorOf(await patchSubscription(api, first.id, { is_active: true }));
		expect(reactivate).toMatchObject({ status: 409, code: "subscription_limit_reached" });

		// A deleted one frees a slot too, and then reactivation succeeds.
		expect((await api(`${PATH}/${second.id}`, { method: "DELETE" })).status).toBe(200);
		expect((await patchSubscription(api, first.id, { is_active: true })).status).toBe(200);
		expect((await api(PATH, json({ url: "https://hooks.example.com/7", events: ["conversion_failed"] }))).status).toBe(
			409,
		);
		// PATCHing an already active subscription with is_active: true is not a reactivation and is not refused.
		expect((await patchSubscription(api, replacement.id, { is_active: true })).status).toBe(200);
	});

	it("updates partially; reactivation resets consecutive_failures", async () => {
		const { api } = await signedInClient();
		const sub = await createSubscription(api, { description: "before" });
		await env.DB.prepare("UPDATE webhook_subscriptions SET is_active = 0, consecutive_failures = 10 WHERE id = ?")
			.bind(sub.id)
			.run();

		const renamed = (await (await patchSubscription(api, sub.id, { description: "after" })).json()) as {
			data: Record<string, unknown>;
		};
		expect(renamed.data).toMatchObject({
			description: "after",
			url: sub.url,
			events: sub.events,
			is_active: false,
			consecutive_failures: 10,
		});
		expect(renamed.data).not.toHaveProperty("secret");

		const moved = await patchSubscription(api, sub.id, {
			url: "https://other.example.org/hook",
			events: ["conversion_failed"],
			is_active: true,
		});
		expect(((await moved.json()) as { data: unknown }).data).toMatchObject({
			url: "https://other.example.org/hook",
			events: ["conversion_failed"],
			is_active: true,
			consecutive_failures: 0,
			description: "after",
		});

		expect(await errorOf(await patchSubscription(api, sub.id, { url: "https://localhost/x" }))).toMatchObject({
			status: 400,
			code: "invalid_webhook_url",
		});
		expect(await errorOf(await patchSubscription(api, sub.id, {}))).toMatchObject({ status: 400 });
		expect(await errorOf(await patchSubscription(api, sub.id, { events: [] }))).toMatchObject({ status: 400 });
		expect(await errorOf(await patchSubscription(api, sub.id, { is_active: "yes" }))).toMatchObject({ status: 400 });
	});

	it("soft-deletes a subscription and its delivery log", async () => {
		const { api, client } = await signedInClient();
		const sub = await createSubscription(api);
		await env.DB.prepare(
			`INSERT INTO webhook_deliveries (id, subscription_id, account_id, event_id, event_type, attempt, status, created_at)
			 VALUES (?, ?, ?, ?, 'conversion.completed', 1, 'delivered', ?)`,
		)
			.bind(crypto.randomUUID(), sub.id, client.accountId, crypto.randomUUID(), new Date().toISOString())
			.run();

		const deleted = await api(`${PATH}/${sub.id}`, { method: "DELETE" });
		expect(deleted.status).toBe(200);
		expect(await deleted.json()).toEqual({ success: true, data: { id: sub.id, deleted: true } });

		for (const [path, init] of [
			[`${PATH}/${sub.id}`, {}],
			[`${PATH}/${sub.id}/deliveries`, {}],
			[`${PATH}/${sub.id}`, { method: "DELETE" }],
			[`${PATH}/${sub.id}/regenerate-secret`, { method: "POST" }],
		] as const) {
			expect((await api(path, init)).status).toBe(404);
		}
		expect(((await (await api(PATH)).json()) as { data: unknown[] }).data).toEqual([]);
		const rows = await env.DB.prepare(
			"SELECT s.deleted_at AS sub_deleted, d.deleted_at AS log_deleted FROM webhook_subscriptions s JOIN webhook_deliveries d ON d.subscription_id = s.id WHERE s.id = ?",
		)
			.bind(sub.id)
			.all<{ sub_deleted: string; log_deleted: string }>();
		expect(rows.results).toHaveLength(1);
		expect(rows.results[0]?.sub_deleted).toBeTruthy();
		expect(rows.results[0]?.log_deleted).toBe(rows.results[0]?.sub_deleted);
	});

	it("keeps every account to its own subscriptions (404 for another account's)", async () => {
		const owner = await signedInClient();
		const other = await signedInClient();
		const sub = await createSubscription(owner.api);
		const attempts: [string, RequestInit][] = [
			[`${PATH}/${sub.id}`, {}],
			[`${PATH}/${sub.id}`, { ...json({ description: "mine now" }), method: "PATCH" }],
			[`${PATH}/${sub.id}`, { method: "DELETE" }],
			[`${PATH}/${sub.id}/regenerate-secret`, { method: "POST" }],
			[`${PATH}/${sub.id}/test`, { method: "POST" }],
			[`${PATH}/${sub.id}/deliveries`, {}],
			[`${PATH}/${sub.id}/deliveries/${crypto.randomUUID()}/redeliver`, { method: "POST" }],
		];
		const fetchSpy = vi.spyOn(globalThis, "fetch");
		for (const [path, init] of attempts) {
			const response = await other.api(path, init);
			expect(response.status, `${init.method ?? "GET"} ${path}`).toBe(404);
		}
		expect(fetchSpy).not.toHaveBeenCalled();
		expect(((await (await other.api(PATH)).json()) as { data: unknown[] }).data).toEqual([]);
		const still = (await (await owner.api(`${PATH}/${sub.id}`)).json()) as { data: Record<string, unknown> };
		expect(still.data).toMatchObject({ id: sub.id, description: null });
	});

	it("answers 404 for malformed ids and 401 without a token", async () => {
		const { api } = await signedInClient();
		expect((await api(`${PATH}/not-a-uuid`)).status).toBe(404);
		const anonymous = await (await import("./helpers.ts")).call(PATH);
		expect(anonymous.status).toBe(401);
	});

	it("regenerates the secret: a new one, shown once, replacing the stored one", async () => {
		const { api } = await signedInClient();
		const sub = await createSubscription(api);
		const before = await env.DB.prepare("SELECT secret_ciphertext FROM webhook_subscriptions WHERE id = ?")
			.bind(sub.id)
			.first<string>("secret_ciphertext");
		const response = await api(`${PATH}/${sub.id}/regenerate-secret`, { method: "POST" });
		expect(response.status).toBe(200);
		const body = (await response.json()) as { data: { new_secret: string; message: string } };
		expect(Object.keys(body.data).sort()).toEqual(["message", "new_secret"]);
		expect(body.data.new_secret).toMatch(/^whsec_/);
		expect(body.data.new_secret).not.toBe(sub.secret);
		const after = await env.DB.prepare("SELECT secret_ciphertext FROM webhook_subscriptions WHERE id = ?")
			.bind(sub.id)
			.first<string>("secret_ciphertext");
		expect(after).not.toBe(before);
	});

	it("documents the endpoints in the OpenAPI document", async () => {
		const { call } = await import("./helpers.ts");
		const document = (await (await call("/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
		expect(Object.keys(document.paths[PATH] ?? {}).sort()).toEqual(["get", "post"]);
		expect(Object.keys(document.paths[`${PATH}/{id}`] ?? {}).sort()).toEqual(["delete", "get", "patch"]);
		for (const suffix of ["regenerate-secret", "test", "deliveries", "deliveries/{delivery_id}/redeliver"]) {
			expect(document.paths).toHaveProperty([`${PATH}/{id}/${suffix}`]);
		}
	});
});
