import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { signStorageUrl } from "../../src/storage/signed-url.ts";
import { call, ORIGIN } from "./helpers.ts";

const inAnHour = () => new Date(Date.now() + 3600_000);
const bytes = (n: number) => Uint8Array.from({ length: n }, (_, i) => i % 251);

async function storedObject(size = 1000) {
	const key = `tests/${crypto.randomUUID()}/object.bin`;
	const body = bytes(size);
	await env.BUCKET.put(key, body, { httpMetadata: { contentType: "application/x-test" } });
	return { key, body };
}

async function expect403(response: Response, message: RegExp) {
	expect(response.status).toBe(403);
	const body = (await response.json()) as { success: boolean; message: string };
	expect(body.success).toBe(false);
	expect(body.message).toMatch(message);
}

describe("signed storage addresses", () => {
	it("downloads an object with its content type, without a bearer token", async () => {
		const { key, body } = await storedObject();
		const url = await signStorageUrl(env, ORIGIN, { method: "GET", key, expiresAt: inAnHour() });
		const response = await call(url);
		expect(response.status).toBe(200);
		expect(response.headers.get("Content-Type")).toBe("application/x-test");
		expect(response.headers.get("Content-Length")).toBe("1000");
		expect(new Uint8Array(await response.arrayBuffer())).toEqual(body);
		const head = await call(url, { method: "HEAD" });
		expect(head.status).toBe(200);
		expect(head.headers.get("Content-Length")).toBe("1000");
	});

	it("serves byte ranges", async () => {
		const { key, body } = await storedObject();
		const url = await signStorageUrl(env, ORIGIN, { method: "GET", key, expiresAt: inAnHour() });
		const middle = await call(url, { headers: { Range: "bytes=100-199" } });
		expect(middle.status).toBe(206);
		expect(middle.headers.get("Content-Range")).toBe("bytes 100-199/1000");
		expect(new Uint8Array(await middle.arrayBuffer())).toEqual(body.slice(100, 200));
		const suffix = await call(url, { headers: { Range: "bytes=-10" } });
		expect(suffix.headers.get("Content-Range")).toBe("bytes 990-999/1000");
		expect(new Uint8Array(await suffix.arrayBuffer())).toEqual(body.slice(990));
		const open = await call(url, { headers: { Range: "bytes=995-" } });
		expect(new Uint8Array(await open.arrayBuffer())).toEqual(body.slice(995));
		const beyond = await call(url, { headers: { Range: "bytes=5000-" } });
		expect(beyond.status).toBe(416);
		expect(beyond.headers.get("Content-Range")).toBe("bytes */1000");
	});

	it("answers 304 without a body to If-None-Match naming the object's version, and takes Range units in any case", async () => {
		const { key, body } = await storedObject();
		const url = await signStorageUrl(env, ORIGIN, { method: "GET", key, expiresAt: inAnHour() });
		const first = await call(url);
		const etag = first.headers.get("ETag") ?? "";
		await first.arrayBuffer();
		for (const validator of [etag, `W/${etag}`, `"other", ${etag}`, "*"]) {
			for (const method of ["GET", "HEAD"]) {
				const again = await call(url, { method, headers: { "If-None-Match": validator } });
				expect(again.status, `${method} ${validator}`).toBe(304);
				expect(again.headers.get("ETag")).toBe(etag);
				expect(again.headers.get("Cache-Control")).toMatch(/^private, max-age=\d+$/);
				expect(await again.text()).toBe("");
			}
		}
		const changed = await call(url, { headers: { "If-None-Match": '"other"' } });
		expect(changed.status).toBe(200);
		expect(new Uint8Array(await changed.arrayBuffer())).toEqual(body);

		const shouted = await call(url, { headers: { Range: "BYTES=10-19" } });
		expect(shouted.status).toBe(206);
		expect(new Uint8Array(await shouted.arrayBuffer())).toEqual(body.slice(10, 20));
	});

	it("resumes a download only while If-Range names the object's version, else sends it whole", async () => {
		const { key, body } = await storedObject();
		const url = await signStorageUrl(env, ORIGIN, { method: "GET", key, expiresAt: inAnHour() });
		const first = await call(url, { headers: { Range: "bytes=0-499" } });
		const etag = first.headers.get("ETag") ?? "";
		expect(new Uint8Array(await first.arrayBuffer())).toEqual(body.slice(0, 500));
		const resumed = await call(url, { headers: { Range: "bytes=500-", "If-Range": etag } });
		expect(resumed.status).toBe(206);
		expect(new Uint8Array(await resumed.arrayBuffer())).toEqual(body.slice(500));
		// The object at the key is replaced (as a voice's sample is): the old version's rest would splice two files.
		const replaced = Uint8Array.from({ length: 1200 }, (_, i) => (i * 7) % 256);
		await env.BUCKET.put(key, replaced, { httpMetadata: { contentType: "application/x-test" } });
		for (const validator of [etag, "Tue, 24 Nov 2026 10:00:00 GMT", `W/${etag}`]) {
			const whole = await call(url, { headers: { Range: "bytes=500-", "If-Range": validator } });
			expect(whole.status, validator).toBe(200);
			expect(whole.headers.get("Content-Range")).toBeNull();
			expect(new Uint8Array(await whole.arrayBuffer())).toEqual(replaced);
		}
		const unsatisfiable = await call(url, { headers: { Range: "bytes=5000-", "If-Range": etag } });
		expect(unsatisfiable.status).toBe(200);
		await unsatisfiable.arrayBuffer();
	});

	it.each(["bytes=5000-", "bytes=1000-1000", "bytes=-0", "bytes=500-100"])(
		"answers the unsatisfiable Range %s with 416 in the error envelope",
		async (range) => {
			const { key } = await storedObject();
			const url = await signStorageUrl(env, ORIGIN, { method: "GET", key, expiresAt: inAnHour() });
			const response = await call(url, { headers: { Range: range } });
			expect(response.status).toBe(416);
			expect(response.headers.get("Content-Range")).toBe("bytes */1000");
			expect(response.headers.get("Content-Type")).toMatch(/application\/json/);
			expect(await response.json()).toEqual({
				success: false,
				code: "range_not_satisfiable",
				message: expect.stringMatching(/range.*1000 bytes/),
			});
			const head = await call(url, { method: "HEAD", headers: { Range: range } });
			expect(head.status).toBe(416);
			expect(head.headers.get("Content-Range")).toBe("bytes */1000");
		},
	);

	describe("malformed paths", () => {
		const malformed = ["%E0%A4%A", "%", "a/%ZZ/b", "%C0%AF", "tests/%ED%A0%80", "%E0%A4%A/object.bin"];
		const cases = malformed.flatMap((path) => (["GET", "HEAD", "PUT"] as const).map((method) => [method, path]));

		it.each(cases)("%s /storage/v1/%s is a 403 in the envelope, logging nothing", async (method, path) => {
			const errors = vi.spyOn(console, "error");
			try {
				// A well-formed signed query, so the path is the only thing wrong.
				const signed = new URL(
					await signStorageUrl(env, ORIGIN, {
						method: method === "PUT" ? "PUT" : "GET",
						key: "tests/object.bin",
						expiresAt: inAnHour(),
						contentType: "audio/wav",
						maxBytes: 5000,
						generation: 0,
					}),
				);
				const response = await call(`${ORIGIN}/storage/v1/${path}${signed.search}`, {
					method,
					...(method === "PUT" ? { body: bytes(10), headers: { "Content-Type": "audio/wav" } } : {}),
				});
				expect(response.status).toBe(403);
				if (method !== "HEAD") {
					expect(await response.json()).toEqual({
						success: false,
						code: "signature_invalid",
						message: expect.stringMatching(/malformed/),
					});
				}
				expect(errors).not.toHaveBeenCalled();
			} finally {
				errors.mockRestore();
			}
		});
	});

	it.each([
		["the object key", (u: URL) => u.pathname.replace("object.bin", "other.bin")],
		["the expiry", (u: URL) => u.searchParams.set("exp", String(Number(u.searchParams.get("exp")) + 3600))],
		["the method", (u: URL) => u.searchParams.set("method", "PUT")],
		[
			"the signature",
			(u: URL) => {
				// Another second-to-last character, whatever it was: a fixed "AA" left about 1 signature in 1000 as it was.
				const sig = u.searchParams.get("sig") ?? "";
				u.searchParams.set("sig", `${sig.slice(0, -2)}${sig.at(-2) === "A" ? "B" : "A"}${sig.slice(-1)}`);
			},
		],
		["the key id", (u: URL) => u.searchParams.set("kid", "unknown-key")],
		["a removed signature", (u: URL) => u.searchParams.delete("sig")],
	])("refuses an address with tampered %s", async (_what, tamper) => {
		const { key } = await storedObject();
		const url = new URL(await signStorageUrl(env, ORIGIN, { method: "GET", key, expiresAt: inAnHour() }));
		const result = tamper(url);
		if (typeof result === "string") url.pathname = result;
		await expect403(await call(url.toString()), /signature|not signed/);
	});

	it("refuses an expired address", async () => {
		const { key } = await storedObject();
		const url = await signStorageUrl(env, ORIGIN, { method: "GET", key, expiresAt: new Date(Date.now() - 1000) });
		await expect403(await call(url), /expired/);
	});

	it("refuses the wrong method", async () => {
		const { key } = await storedObject();
		const getUrl = await signStorageUrl(env, ORIGIN, { method: "GET", key, expiresAt: inAnHour() });
		await expect403(
			await call(getUrl, { method: "PUT", body: "x", headers: { "Content-Type": "text/plain" } }),
			/signed for GET/,
		);
		const putUrl = await signStorageUrl(env, ORIGIN, {
			method: "PUT",
			key,
			expiresAt: inAnHour(),
			contentType: "audio/wav",
		});
		await expect403(await call(putUrl), /signed for PUT/);
	});

	describe("uploads", () => {
		const putUrl = (key: string, maxBytes = 5000) =>
			signStorageUrl(env, ORIGIN, { method: "PUT", key, expiresAt: inAnHour(), contentType: "audio/wav", maxBytes });

		it("streams the body into the bucket and answers 200 with an empty body", async () => {
			const key = `tests/${crypto.randomUUID()}`;
			const body = bytes(4000);
			const response = await call(await putUrl(key), { method: "PUT", body, headers: { "Content-Type": "audio/wav" } });
			expect(response.status).toBe(200);
			expect(await response.text()).toBe("");
			const stored = await env.BUCKET.get(key);
			expect(stored?.httpMetadata?.contentType).toBe("audio/wav");
			expect(new Uint8Array(await (stored as R2ObjectBody).arrayBuffer())).toEqual(body);
		});

		it("refuses a content type other than the signed one (415)", async () => {
			const key = `tests/${crypto.randomUUID()}`;
			const response = await call(await putUrl(key), {
				method: "PUT",
				body: bytes(10),
				headers: { "Content-Type": "audio/mpeg" },
			});
			expect(response.status).toBe(415);
			expect(((await response.json()) as { message: string }).message).toMatch(/audio\/wav/);
			expect(await env.BUCKET.head(key)).toBeNull();
		});

		it("refuses a body at or over the signed size limit (413) and keeps nothing", async () => {
			const key = `tests/${crypto.randomUUID()}`;
			const response = await call(await putUrl(key, 100), {
				method: "PUT",
				body: bytes(100),
				headers: { "Content-Type": "audio/wav" },
			});
			expect(response.status).toBe(413);
			expect(await env.BUCKET.head(key)).toBeNull();
		});

		it("refuses a body that is shorter than its Content-Length and keeps nothing", async () => {
			const key = `tests/${crypto.randomUUID()}`;
			const stream = new ReadableStream({
				start(controller) {
					controller.enqueue(bytes(50));
					controller.close();
				},
			});
			const response = await call(await putUrl(key), {
				method: "PUT",
				body: stream,
				headers: { "Content-Type": "audio/wav", "Content-Length": "80" },
				duplex: "half",
			} as RequestInit);
			expect(response.status).toBe(400);
			expect(await env.BUCKET.head(key)).toBeNull();
		});
	});
});
