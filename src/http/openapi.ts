/** The OpenAPI 3.1 document, generated from the same route definitions and zod schemas that validate requests. */
import { OpenAPIRegistry, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import type { z } from "zod";
import { ErrorBody } from "../contracts/common.ts";
import { IdempotencyHeaders } from "./idempotency.ts";
import { RATE_LIMITS } from "./rate-limits.ts";
import { MAX_JSON_BODY_BYTES, MAX_JSON_DEPTH } from "./request-body.ts";
import type { ResponseSpec, RouteDefinition } from "./route.ts";

/**
 * What the router answers before a route's handler runs (`router.ts`: authentication, then the params, query and
 * JSON body), for the routes that do not describe these statuses themselves.
 */
function routerResponses(route: RouteDefinition): Record<number, ResponseSpec> {
	const responses: Record<number, ResponseSpec> = {};
	if (route.auth !== "none") {
		responses[401] = {
			description:
				"Missing, malformed, expired or revoked bearer token, or one without this endpoint's scope (`unauthorized`, `invalid_token`, `invalid_request`)",
		};
	}
	if (route.auth === "base") {
		responses[429] = {
			description: `More than the deployment's API requests for one account in ${RATE_LIMITS.API_RATE_LIMIT.periodSeconds} s (\`rate_limited\`, with \`Retry-After\`)`,
		};
	}
	if (route.query || route.body) {
		responses[400] = { description: "Invalid request (`invalid_request`, naming the field in `errors`)" };
	}
	if (route.body) {
		responses[413] = { description: `JSON body over ${MAX_JSON_BODY_BYTES} bytes (\`payload_too_large\`)` };
		responses[415] = { description: "Body not sent as `application/json` (`unsupported_media_type`)" };
	}
	if (route.idempotent) {
		responses[409] = {
			description:
				"`Idempotency-Key` already used with another body (`idempotency_key_reused`), or its first request is still running (`idempotency_request_in_progress`, `idempotency_conflict`): retry shortly",
		};
	}
	return responses;
}

/** Every 429 (a request budget, `rate-limits.ts`) carries `Retry-After`, the seconds until its count starts again. */
const RETRY_AFTER = {
	"Retry-After": {
		description: "Seconds to wait before trying again (the budget's window)",
		schema: { type: "integer" as const, minimum: 1 },
	},
};

const REQUEST_BODY_LIMITS = `Request bodies are uncompressed JSON (\`application/json\`, no \`Content-Encoding\`: 415 otherwise) of at most ${MAX_JSON_BODY_BYTES / 1024} KiB (413 \`payload_too_large\` beyond), with arrays and objects nested at most ${MAX_JSON_DEPTH} levels deep and text that is valid Unicode (UTF-8 bytes, no unpaired surrogate escapes); otherwise 400 \`invalid_request\`. Audio and voice files go to the pre-signed upload addresses instead.`;

/** `notes`: paragraphs that depend on the deployment's configuration (its time limits), added to the description. */
export function buildOpenApiDocument(routes: RouteDefinition[], serverUrl: string, notes: string[] = []) {
	const registry = new OpenAPIRegistry();
	registry.registerComponent("securitySchemes", "bearerAuth", { type: "http", scheme: "bearer", bearerFormat: "JWT" });
	for (const route of routes) {
		if (route.internal || route.method === "HEAD") continue;
		const responses: Record<
			string,
			{ description: string; content?: Record<string, { schema: z.ZodType }>; headers?: typeof RETRY_AFTER }
		> = {};
		for (const [status, spec] of Object.entries({ ...routerResponses(route), ...route.responses })) {
			const schema = spec.schema ?? (Number(status) >= 400 ? ErrorBody : undefined);
			responses[status] = {
				description: spec.description,
				...(schema ? { content: { "application/json": { schema } } } : {}),
				...(status === "429" ? { headers: RETRY_AFTER } : {}),
			};
		}
		registry.registerPath({
			method: route.method.toLowerCase() as "get",
			path: route.path,
			summary: route.summary,
			tags: route.tags,
			...(route.auth === "none" ? {} : { security: [{ bearerAuth: [] }] }),
			request: {
				...(route.params ? { params: route.params as z.ZodObject } : {}),
				...(route.query ? { query: route.query as z.ZodObject } : {}),
				...(route.headers || route.idempotent ? { headers: route.headers ?? IdempotencyHeaders } : {}),
				...(route.body ? { body: { content: { "application/json": { schema: route.body } }, required: true } } : {}),
				...(route.form
					? { body: { content: { "application/x-www-form-urlencoded": { schema: route.form } }, required: true } }
					: {}),
			},
			responses,
		});
	}
	return new OpenApiGeneratorV31(registry.definitions).generateDocument({
		openapi: "3.1.0",
		info: {
			title: "Voice Conversion API",
			version: "1.0.0",
			description: [
				"Convert a recording into the same performance in a chosen voice. Obtain a token at /oauth2/token (client credentials), then call /api/v1/*.",
				REQUEST_BODY_LIMITS,
				...notes,
			].join("\n\n"),
		},
		servers: [{ url: serverUrl }],
	});
}
