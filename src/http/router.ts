/**
 * Builds the itty-router from route definitions: authentication, validation of params, query and body, and
 * the error envelope for everything that goes wrong, including unknown routes (404) and methods (405).
 */
import { type IRequest, Router } from "itty-router";
import type { TokenClaims } from "../auth/access-tokens.ts";
import { authenticate } from "../auth/authenticate.ts";
import { ApiError, renderError, validationError } from "./errors.ts";
import { idempotencyKeyOf, withIdempotency } from "./idempotency.ts";
import { enforceRateLimit } from "./rate-limits.ts";
import { readJsonBody } from "./request-body.ts";
import type { RouteDefinition } from "./route.ts";

type Args = [Env, ExecutionContext];

const toIttyPath = (path: string) => path.replace(/\{(\w+)(\+?)\}/g, ":$1$2");

function queryObject(url: URL): Record<string, string> {
	// Repeated keys keep their last value; no endpoint takes list-valued query parameters.
	return Object.fromEntries(url.searchParams.entries());
}

/**
 * Path parameters as their segments mean them: percent-decoded, segment by segment (RFC 3986 §2.1, §6.2.2.2: `%61`
 * and `a` name the same id; an encoded `/` is data within its segment). itty-router hands them over as sent. A
 * malformed escape is left as it is, for the route's schema to refuse.
 */
function decodedParams(params: Record<string, string>): Record<string, string> {
	const decode = (segment: string) => {
		try {
			return decodeURIComponent(segment);
		} catch {
			return segment;
		}
	};
	return Object.fromEntries(
		Object.entries(params).map(([name, value]) => [name, value.split("/").map(decode).join("/")]),
	);
}

function runRoute(route: RouteDefinition) {
	return async (request: IRequest, env: Env, ctx: ExecutionContext): Promise<Response> => {
		const auth: TokenClaims | null =
			route.auth === "none" ? null : await authenticate(request as unknown as Request, env, route.auth);
		// Runners are the operator's own machines and lease on their own schedule: only client calls are counted.
		if (auth && route.auth === "base") await enforceRateLimit(env, "API_RATE_LIMIT", auth.accountId);
		const url = new URL(request.url);
		const params = route.params ? route.params.safeParse(decodedParams(request.params)) : null;
		if (params && !params.success) {
			// A malformed id can never name an existing resource.
			throw new ApiError(404, "not_found", "Resource not found");
		}
		const query = route.query ? route.query.safeParse(queryObject(url)) : null;
		if (query && !query.success) throw validationError(query.error, "query");
		let body: unknown;
		let json: unknown;
		if (route.body) {
			json = await readJsonBody(request as unknown as Request);
			const parsed = route.body.safeParse(json);
			if (!parsed.success) throw validationError(parsed.error);
			body = parsed.data;
		}
		const handle = () =>
			Promise.resolve(
				route.handler({
					request: request as unknown as Request,
					env,
					ctx,
					url,
					params: params?.data,
					query: query?.data,
					body,
					auth: auth as TokenClaims,
				}),
			);
		const idempotencyKey = route.idempotent && auth ? idempotencyKeyOf(request as unknown as Request) : null;
		if (!idempotencyKey || !auth) return handle();
		// Checked after validation: a rejected body leaves the key free for the corrected request.
		return withIdempotency(
			env,
			{ accountId: auth.accountId, operation: `${route.method} ${url.pathname}`, key: idempotencyKey, body: json },
			handle,
		);
	};
}

/** The GET request a HEAD request stands for: the same address and headers. */
const getOf = (request: Request) =>
	new Request(request.url, { method: "GET", headers: request.headers }) as unknown as IRequest;

/** A GET's answer as the answer to HEAD: its status and headers, with the length of the body it leaves out. */
async function headOf(response: Response | undefined): Promise<Response> {
	if (!response) return renderError(new ApiError(404, "not_found", "Resource not found"));
	const body = await response.arrayBuffer();
	const headers = new Headers(response.headers);
	headers.set("Content-Length", String(body.byteLength));
	return new Response(null, { status: response.status, headers });
}

export function buildRouter(routes: RouteDefinition[]) {
	const router = Router<IRequest, Args>({
		catch: (error, request) => renderError(error, request as unknown as Request),
	});
	const patterns: { method: string; regex: RegExp }[] = [];
	for (const route of routes) {
		const path = toIttyPath(route.path);
		router[route.method.toLowerCase() as "get"](path, runRoute(route));
		const entry = router.routes.at(-1);
		if (entry) patterns.push({ method: route.method, regex: entry[1] });
	}
	return {
		async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
			const response = await router.fetch(request as unknown as IRequest, env, ctx);
			if (response) return response;
			const { pathname } = new URL(request.url);
			const allowed = [...new Set(patterns.filter((p) => p.regex.test(pathname)).map((p) => p.method))];
			if (allowed.includes("GET") && !allowed.includes("HEAD")) {
				// HTTP requires HEAD wherever GET is served (RFC 9110 §9.1): the GET's status and headers, no body.
				if (request.method === "HEAD") return headOf(await router.fetch(getOf(request), env, ctx));
				allowed.splice(allowed.indexOf("GET") + 1, 0, "HEAD");
			}
			if (allowed.length > 0) {
				return renderError(
					new ApiError(405, "method_not_allowed", `Method ${request.method} is not allowed on ${pathname}`, {
						headers: { Allow: allowed.join(", ") },
					}),
				);
			}
			return renderError(new ApiError(404, "not_found", `No route for ${request.method} ${pathname}`));
		},
	};
}
