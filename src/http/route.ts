/**
 * An endpoint is one `defineRoute` value: its method, path, auth, zod schemas and handler. The same schemas
 * validate requests and feed the OpenAPI document, so the two cannot drift apart.
 */
import type { z } from "zod";
import type { TokenClaims } from "../auth/access-tokens.ts";

export type HttpMethod = "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE";
/** `none`: public (token endpoint, docs). `base`: client API token. `runner`: runner token (`/internal`). */
export type AuthMode = "none" | "base" | "runner";

type Infer<S> = S extends z.ZodType ? z.infer<S> : undefined;

export interface RouteContext<P, Q, B> {
	request: Request;
	env: Env;
	ctx: ExecutionContext;
	url: URL;
	params: P;
	query: Q;
	body: B;
	/** Present for `base` and `runner` routes. */
	auth: TokenClaims;
}

export interface ResponseSpec {
	description: string;
	schema?: z.ZodType;
}

export interface RouteDefinition<
	P extends z.ZodType | undefined = z.ZodType | undefined,
	Q extends z.ZodType | undefined = z.ZodType | undefined,
	B extends z.ZodType | undefined = z.ZodType | undefined,
> {
	method: HttpMethod;
	/** OpenAPI-style path, e.g. `/api/v1/voices/{id}`. */
	path: string;
	auth: AuthMode;
	summary: string;
	tags: string[];
	params?: P;
	query?: Q;
	body?: B;
	/**
	 * A form body (`application/x-www-form-urlencoded`), for the document only: the handler reads it itself (the
	 * token endpoint, whose errors follow OAuth 2.0).
	 */
	form?: z.ZodObject;
	/** Request headers worth documenting (e.g. `Idempotency-Key`). */
	headers?: z.ZodObject;
	responses: Record<number, ResponseSpec>;
	/** Hidden from the public OpenAPI document (runner API, storage addresses). */
	internal?: boolean;
	/**
	 * Honour an `Idempotency-Key` header (authenticated POSTs that create something): the first response is
	 * replayed for 24 hours to a retry with the same body (`src/http/idempotency.ts`).
	 */
	idempotent?: boolean;
	handler: (ctx: RouteContext<Infer<P>, Infer<Q>, Infer<B>>) => Promise<Response> | Response;
}

export function defineRoute<
	P extends z.ZodType | undefined = undefined,
	Q extends z.ZodType | undefined = undefined,
	B extends z.ZodType | undefined = undefined,
>(route: RouteDefinition<P, Q, B>): RouteDefinition {
	return route as unknown as RouteDefinition;
}
