import { describe, expect, it } from "vitest";
import { API_ERROR_CODES } from "../../src/contracts/errors.ts";
import { MAX_JSON_BODY_BYTES, MAX_JSON_DEPTH } from "../../src/http/request-body.ts";
import { call, provisionClient, requestToken, signedInClient } from "./helpers.ts";

describe("error envelope", () => {
	it("answers 404 for an unknown route", async () => {
		const response = await call("/api/v1/nothing-here");
		expect(response.status).toBe(404);
		expect(await response.json()).toMatchObject({
			success: false,
			code: "not_found",
			message: expect.stringMatching(/No route/),
		});
	});

	it("answers 405 with Allow for a known path and an unsupported method", async () => {
		const { api } = await signedInClient();
		const response = await api("/api/v1/voices", { method: "DELETE" });
		expect(response.status).toBe(405);
		// GET lists voices, POST creates an account's own voice.
		expect(response.headers.get("Allow")).toBe("GET, HEAD, POST");
		expect(await response.json()).toMatchObject({ success: false, code: "method_not_allowed" });
	});

	it("answers HEAD wherever GET is served, with the GET's status and headers and no body", async () => {
		const { api } = await signedInClient();
		const get = await api("/api/v1/voices");
		const getBody = await get.arrayBuffer();
		const head = await api("/api/v1/voices", { method: "HEAD" });
		expect(head.status).toBe(200);
		expect(head.headers.get("Content-Type")).toBe(get.headers.get("Content-Type"));
		expect(head.headers.get("Content-Length")).toBe(String(getBody.byteLength));
		expect((await head.arrayBuffer()).byteLength).toBe(0);
		expect((await call("/api/v1/voices", { method: "HEAD" })).status).toBe(401);
		expect(
			(await api("/api/v1/voice-conversions/00000000-0000-4000-8000-000000000000", { method: "HEAD" })).status,
		).toBe(404);
		expect((await call("/openapi.json", { method: "HEAD" })).status).toBe(200);
		const onlyGet = await api("/api/v1/voice-conversions/00000000-0000-4000-8000-000000000000", { method: "PUT" });
		expect(onlyGet.headers.get("Allow")).toBe("GET, HEAD");
		expect((await call("/oauth2/token", { method: "HEAD" })).headers.get("Allow")).toBe("POST");
	});
});

describe("OpenAPI document", () => {
	it("is OpenAPI 3.1 and documents the public routes with their schemas", async () => {
		const response = await call("/openapi.json");
		expect(response.status).toBe(200);
		const doc = (await response.json()) as {
			openapi: string;
			paths: Record<string, Record<string, { security?: unknown[]; responses: Record<string, unknown> }>>;
		};
		expect(doc.openapi).toBe("3.1.0");
		expect(doc.paths["/api/v1/voices"]?.get?.security).toEqual([{ bearerAuth: [] }]);
		expect(doc.paths["/api/v1/voices/{id}"]?.get?.responses).toHaveProperty("404");
		expect(doc.paths["/oauth2/token"]?.post).toBeDefined();
		expect(Object.keys(doc.paths).some((p) => p.startsWith("/storage") || p.startsWith("/internal"))).toBe(false);
	});

	it("states the limits of request bodies that the routes enforce", async () => {
		const doc = (await (await call("/openapi.json")).json()) as { info: { description: string } };
		expect(doc.info.description).toContain(`at most ${MAX_JSON_BODY_BYTES / 1024} KiB`);
		expect(doc.info.description).toContain(`nested at most ${MAX_JSON_DEPTH} levels deep`);
		expect(doc.info.description).toContain("UTF-8 bytes, no unpaired surrogate escapes");
	});

	it("lists every error code in the error schema", async () => {
		const doc = (await (await call("/openapi.json")).json()) as {
			paths: Record<string, Record<string, { responses: Record<string, ErrorResponseDoc> }>>;
		};
		const notFound = doc.paths["/api/v1/voices/{id}"]?.get?.responses["404"];
		const codes = notFound?.content?.["application/json"]?.schema.properties?.code?.enum;
		expect(codes).toEqual(API_ERROR_CODES);
		expect(codes).toEqual(expect.arrayContaining(["invalid_request", "not_found", "lease_lost", "internal_error"]));
	});
});

describe("OpenAPI statuses the router answers", () => {
	type Operations = Record<string, Record<string, { responses: Record<string, unknown> }>>;
	const documented = async (path: string, method: string) => {
		const doc = (await (await call("/openapi.json")).json()) as { paths: Operations };
		return Object.keys(doc.paths[path]?.[method]?.responses ?? {});
	};

	it("lists 401 on every authenticated operation, as every one answers it", async () => {
		const doc = (await (await call("/openapi.json")).json()) as {
			paths: Record<string, Record<string, { security?: unknown[]; responses: Record<string, unknown> }>>;
		};
		const missing = Object.entries(doc.paths).flatMap(([path, operations]) =>
			Object.entries(operations)
				.filter(([, operation]) => operation.security !== undefined && !("401" in operation.responses))
				.map(([method]) => `${method} ${path}`),
		);
		expect(missing).toEqual([]);
		const response = await call("/api/v1/voices");
		expect(response.status).toBe(401);
		expect(await documented("/api/v1/voices", "get")).toContain("401");
	});

	it("lists 400 where a query is validated, and 413 and 415 where a JSON body is read", async () => {
		const { api } = await signedInClient();
		const badQuery = await api("/api/v1/voices?owner=nobody");
		expect(badQuery.status).toBe(400);
		expect(await documented("/api/v1/voices", "get")).toContain("400");
		const notJson = await api("/api/v1/webhooks/subscriptions", {
			method: "POST",
			headers: { "Content-Type": "text/plain" },
			body: "url=https://example.com",
		});
		expect(notJson.status).toBe(415);
		const tooLarge = await api("/api/v1/webhooks/subscriptions", {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({
				url: "https://example.com/hooks",
				events: ["conversion_completed"],
				description: "a".repeat(70_000),
			}),
		});
		expect(tooLarge.status).toBe(413);
		expect(await documented("/api/v1/webhooks/subscriptions", "post")).toEqual(
			expect.arrayContaining(["400", "401", "413", "415"]),
		);
	});
});

describe("OpenAPI request budgets", () => {
	it("declares Retry-After on every 429, as every one carries it", async () => {
		const doc = (await (await call("/openapi.json")).json()) as {
			paths: Record<string, Record<string, { responses: Record<string, { headers?: Record<string, unknown> }> }>>;
		};
		const operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
			Object.entries(methods).map(([method, operation]) => ({ name: `${method} ${path}`, operation })),
		);
		const limited = operations.filter(({ operation }) => "429" in operation.responses);
		expect(limited.map(({ name }) => name)).toEqual(
			expect.arrayContaining([
				"post /oauth2/token",
				"get /api/v1/voices",
				"post /api/v1/webhooks/subscriptions/{id}/test",
			]),
		);
		const without = limited.filter(({ operation }) => !operation.responses["429"]?.headers?.["Retry-After"]);
		expect(without.map(({ name }) => name)).toEqual([]);
	});

	it("documents the token endpoint's errors with OAuth's error and error_description, as it answers them", async () => {
		const refused = await call("/oauth2/token", {
			method: "POST",
			headers: { "Content-Type": "application/x-www-form-urlencoded" },
			body: "grant_type=client_credentials&client_id=nobody&client_secret=wrong&scope=voice-conversion-api/base",
		});
		expect(refused.status).toBe(401);
		const body = (await refused.json()) as Record<string, unknown>;
		expect(body).toMatchObject({ error: "invalid_client", code: "invalid_client" });
		const doc = (await (await call("/openapi.json")).json()) as {
			paths: Record<string, Record<string, { responses: Record<string, SchemaOf> }>>;
		};
		type SchemaOf = { content?: { "application/json"?: { schema?: { properties?: object; required?: string[] } } } };
		for (const status of ["400", "401", "429"]) {
			const schema = doc.paths["/oauth2/token"]?.post?.responses[status]?.content?.["application/json"]?.schema;
			expect(Object.keys(schema?.properties ?? {}), status).toEqual(expect.arrayContaining(Object.keys(body)));
			expect(schema?.required, status).toEqual(expect.arrayContaining(["error", "error_description"]));
		}
	});
});

describe("OpenAPI idempotent operations", () => {
	it("document the Idempotency-Key header and the 409 of a key reused, on every operation that honours it", async () => {
		const doc = (await (await call("/openapi.json")).json()) as {
			paths: Record<string, Record<string, { parameters?: { name: string; in: string }[]; responses: object }>>;
		};
		for (const path of ["/api/v1/audio-files", "/api/v1/voice-conversions", "/api/v1/voices"]) {
			const operation = doc.paths[path]?.post;
			expect(operation?.parameters, path).toContainEqual(
				expect.objectContaining({ name: "Idempotency-Key", in: "header" }),
			);
			expect(operation?.responses, path).toHaveProperty("409");
		}
		const { api } = await signedInClient();
		const register = (fileName: string) =>
			api("/api/v1/audio-files", {
				method: "POST",
				headers: { "Content-Type": "application/json", "Idempotency-Key": "register-once" },
				body: JSON.stringify({ file_name: fileName, mime_type: "audio/wav" }),
			});
		expect((await register("a.wav")).status).toBe(201);
		const reused = await register("b.wav");
		expect(reused.status).toBe(409);
		expect(await reused.json()).toMatchObject({ code: "idempotency_key_reused" });
	});
});

describe("OpenAPI token endpoint", () => {
	it("documents the form fields that get a token", async () => {
		const doc = (await (await call("/openapi.json")).json()) as {
			paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: FormSchema }> } }>>;
		};
		const form = doc.paths["/oauth2/token"]?.post?.requestBody?.content["application/x-www-form-urlencoded"]?.schema;
		expect(Object.keys(form?.properties ?? {}).sort()).toEqual(["client_id", "client_secret", "grant_type", "scope"]);
		expect(form?.required).toEqual(expect.arrayContaining(["grant_type", "scope"]));
		expect(form?.properties.grant_type?.enum).toEqual(["client_credentials"]);
		expect(form?.properties.scope?.enum).toContain("voice-conversion-api/base");
		const client = await provisionClient();
		const response = await requestToken({
			grant_type: "client_credentials",
			client_id: client.clientId,
			client_secret: client.clientSecret,
			scope: "voice-conversion-api/base",
		});
		expect(response.status).toBe(200);
	});
});

interface FormSchema {
	properties: Record<string, { enum?: string[] }>;
	required?: string[];
}

interface ErrorResponseDoc {
	content?: Record<string, { schema: { properties?: Record<string, { enum?: string[] }> } }>;
}

describe("API reference page", () => {
	it("is served at /docs as self-contained HTML", async () => {
		const response = await call("/docs");
		expect(response.status).toBe(200);
		expect(response.headers.get("Content-Type")).toMatch(/text\/html/);
		const html = await response.text();
		expect(html).toContain("/openapi.json");
		expect(html).not.toMatch(/(src|href)="https?:\/\//);
	});

	it("names the playground's icon, so a browser asks for no /favicon.ico (test/node/playground.test.ts fetches it)", async () => {
		const html = await (await call("/docs")).text();
		expect(html.match(/<link rel="icon" href="([^"]+)"/)?.[1]).toBe("/playground/icon.svg");
	});
});

describe("JSON request errors", () => {
	const post = async (body: BodyInit, headers: Record<string, string> = { "Content-Type": "application/json" }) => {
		const { api } = await signedInClient();
		return api("/api/v1/audio-files", { method: "POST", body, headers });
	};

	it("answers 400 for malformed JSON", async () => {
		const response = await post("{not json");
		expect(response.status).toBe(400);
		expect(await response.json()).toMatchObject({ success: false, message: expect.stringMatching(/not valid JSON/) });
	});

	it("answers 400 naming the invalid field", async () => {
		const response = await post(JSON.stringify({ file_name: "a.wav", mime_type: "text/plain" }));
		expect(response.status).toBe(400);
		const body = (await response.json()) as { message: string; errors: { field: string }[] };
		expect(body.message).toMatch(/mime_type/);
		expect(body.errors.map((e) => e.field)).toContain("mime_type");
	});

	it("answers 415 for a body that is not JSON", async () => {
		const response = await post("file_name=a.wav", { "Content-Type": "application/x-www-form-urlencoded" });
		expect(response.status).toBe(415);
		expect(await response.json()).toMatchObject({ success: false, code: "unsupported_media_type" });
	});

	it("answers 415 naming the coding for a compressed body, where it answered that the JSON was malformed", async () => {
		const json = JSON.stringify({ file_name: "a.wav", mime_type: "audio/wav" });
		const gzipped = await new Response(
			new Blob([json]).stream().pipeThrough(new CompressionStream("gzip")),
		).arrayBuffer();
		const response = await post(gzipped, { "Content-Type": "application/json", "Content-Encoding": "gzip" });
		expect(response.status).toBe(415);
		expect(response.headers.get("Accept-Encoding")).toBe("identity");
		expect(await response.json()).toMatchObject({
			code: "unsupported_media_type",
			message: expect.stringMatching(/Content-Encoding gzip/),
		});
		// A coding named for a body that is not compressed is not taken as plain JSON either.
		expect((await post(json, { "Content-Type": "application/json", "Content-Encoding": "br" })).status).toBe(415);
		expect((await post(json, { "Content-Type": "application/json", "Content-Encoding": "identity" })).status).toBe(201);
	});

	it("answers 400 for JSON nested too deeply, with or without an Idempotency-Key", async () => {
		const { api } = await signedInClient();
		// 20,000 levels fit in 64 KiB; walking them recursively (the idempotency hash) ran out of stack: a 500.
		const deep = `{"file_name":"a.wav","mime_type":"audio/wav","x":${"[".repeat(20_000)}${"]".repeat(20_000)}}`;
		for (const headers of [{ "Idempotency-Key": "deep-body" }, {}] as Record<string, string>[]) {
			const response = await api("/api/v1/audio-files", {
				method: "POST",
				body: deep,
				headers: { "Content-Type": "application/json", ...headers },
			});
			expect(response.status).toBe(400);
			expect(await response.json()).toMatchObject({
				success: false,
				code: "invalid_request",
				message: expect.stringMatching(/more than 64 levels deep/),
			});
		}
		// Brackets inside strings are not nesting.
		const named = await post(JSON.stringify({ file_name: `${"[{".repeat(100)}.wav`, mime_type: "audio/wav" }));
		expect(named.status).toBe(201);
	});

	it("answers 400 for an unpaired surrogate escape, and keeps a name with a paired one as sent", async () => {
		// JSON.stringify would escape the lone half too; the text is written out as a client would send it.
		for (const body of [
			'{"file_name":"take\\ud800.wav","mime_type":"audio/wav"}',
			'{"file_name":"take.wav","mime_type":"audio/wav","\\udfff":1}',
		]) {
			const response = await post(body);
			expect(response.status).toBe(400);
			expect(await response.json()).toMatchObject({
				code: "invalid_request",
				message: expect.stringMatching(/not valid Unicode/),
			});
		}
		const { api } = await signedInClient();
		const created = await api("/api/v1/audio-files", {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: '{"file_name":"take \\ud83c\\udfa4.wav","mime_type":"audio/wav"}',
		});
		expect(created.status).toBe(201);
		const { data } = (await created.json()) as { data: { id: string; file_name: string } };
		expect(data.file_name).toBe("take \u{1F3A4}.wav");
		const stored = (await (await api(`/api/v1/audio-files/${data.id}`)).json()) as { data: { file_name: string } };
		expect(stored.data.file_name).toBe("take \u{1F3A4}.wav");
	});

	it("answers 400 for a body that is not UTF-8, instead of storing replacement characters", async () => {
		// "café.wav" in Latin-1, as a client that ignores JSON's encoding sends it.
		const latin1 = new Uint8Array([
			...new TextEncoder().encode('{"file_name":"caf'),
			0xe9,
			...new TextEncoder().encode('.wav","mime_type":"audio/wav"}'),
		]);
		for (const contentType of ["application/json", "application/json; charset=iso-8859-1"]) {
			const response = await post(latin1, { "Content-Type": contentType });
			expect(response.status).toBe(400);
			expect(await response.json()).toMatchObject({ code: "invalid_request", message: expect.stringMatching(/UTF-8/) });
		}
		// The same name in UTF-8, with a byte order mark in front, is kept as sent.
		const utf8 = new TextEncoder().encode('\ufeff{"file_name":"café.wav","mime_type":"audio/wav"}');
		const created = await post(utf8);
		expect(created.status).toBe(201);
		expect(((await created.json()) as { data: { file_name: string } }).data.file_name).toBe("café.wav");
	});

	it("answers 413 for an oversized JSON body", async () => {
		const response = await post(JSON.stringify({ file_name: "a".repeat(70_000), mime_type: "audio/wav" }));
		expect(response.status).toBe(413);
		expect(await response.json()).toMatchObject({ success: false, code: "payload_too_large" });
	});
});
