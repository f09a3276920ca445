/**
 * `Idempotency-Key` for POSTs that create something (routes declared `idempotent: true`). The first response to
 * a key is kept for 24 hours and replayed for a retry with the same body; the same key with another body is a
 * 409. Keys are scoped to the account and the operation (`METHOD /path`), so two clients, or two
 * addresses, never collide. A concurrent duplicate that arrives while the first is still running gets a 409 to
 * retry shortly. 5xx responses are not kept: the client may retry those with the same key.
 */
import { and, eq, isNull, lte, or, type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { database } from "../db/client.ts";
import { idempotencyKeys } from "../db/schema.ts";
import { sha256Hex } from "../lib/encoding.ts";
import { ApiError, badRequest, errorResponse } from "./errors.ts";

export const IDEMPOTENCY_HEADER = "Idempotency-Key";
export const IDEMPOTENCY_WINDOW_SECONDS = 24 * 3600;
/** A claim with no stored response after this long belongs to a request that died; the key may be used again. */
export const ABANDONED_CLAIM_SECONDS = 60;

export const IdempotencyHeaders = z.object({
	[IDEMPOTENCY_HEADER]: z.string().min(1).max(255).optional().meta({
		description: "Retry-safe key: the same key with the same body within 24 hours replays the first response",
	}),
});

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/** JSON with object keys sorted, so that `{"a":1,"b":2}` and `{"b":2,"a":1}` are the same body. */
export function canonicalJson(value: unknown): string {
	if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
	if (value && typeof value === "object") {
		const entries = Object.entries(value as Record<string, unknown>)
			.filter(([, v]) => v !== undefined)
			.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
		return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
	}
	return JSON.stringify(value ?? null);
}

export interface IdempotentCall {
	accountId: string;
	operation: string;
	key: string;
	/** The request body as parsed JSON (before defaults are applied). */
	body: unknown;
}

/** Reads and checks the header; null when the request carries none. */
export function idempotencyKeyOf(request: Request): string | null {
	const key = request.headers.get(IDEMPOTENCY_HEADER);
	if (key === null) return null;
	if (!KEY_PATTERN.test(key)) {
		throw badRequest(`${IDEMPOTENCY_HEADER} must be 1 to 255 visible ASCII characters`, [
			{ field: IDEMPOTENCY_HEADER, message: "must be 1 to 255 visible ASCII characters" },
		]);
	}
	return key;
}

export async function withIdempotency(
	env: Pick<Env, "DB">,
	call: IdempotentCall,
	run: () => Promise<Response>,
	now = new Date(),
): Promise<Response> {
	const requestHash = await sha256Hex(canonicalJson(call.body));
	const at = now.toISOString();
	const abandonedBefore = new Date(now.getTime() - ABANDONED_CLAIM_SECONDS * 1000).toISOString();
	const expiresAt = new Date(now.getTime() + IDEMPOTENCY_WINDOW_SECONDS * 1000).toISOString();
	// One statement claims the key: a new key, an expired one, or one whose first request died.
	const db = database(env);
	const [claimed] = await db
		.insert(idempotencyKeys)
		.values({
			accountId: call.accountId,
			key: call.key,
			operation: call.operation,
			requestHash,
			createdAt: at,
			expiresAt,
		})
		.onConflictDoUpdate({
			target: [idempotencyKeys.accountId, idempotencyKeys.operation, idempotencyKeys.key],
			set: {
				requestHash: sql`excluded.request_hash`,
				responseStatus: null,
				responseBody: null,
				createdAt: sql`excluded.created_at`,
				expiresAt: sql`excluded.expires_at`,
			},
			setWhere: or(
				lte(idempotencyKeys.expiresAt, at),
				and(isNull(idempotencyKeys.responseStatus), lte(idempotencyKeys.createdAt, abandonedBefore)),
			),
		})
		.returning({ key: idempotencyKeys.key });
	const scope = and(
		eq(idempotencyKeys.accountId, call.accountId),
		eq(idempotencyKeys.operation, call.operation),
		eq(idempotencyKeys.key, call.key),
	);

	if (!claimed) {
		const stored = await db.query.idempotencyKeys.findFirst({ where: scope });
		if (!stored) throw new ApiError(409, "idempotency_conflict", "Please retry the request");
		if (stored.requestHash !== requestHash) {
			throw new ApiError(
				409,
				"idempotency_key_reused",
				`This ${IDEMPOTENCY_HEADER} was already used with a different request body; use a new key for a new request`,
			);
		}
		if (stored.responseStatus === null) {
			throw new ApiError(
				409,
				"idempotency_request_in_progress",
				`A request with this ${IDEMPOTENCY_HEADER} is still being processed; retry shortly`,
				{ headers: { "Retry-After": "1" } },
			);
		}
		return new Response(stored.responseBody, {
			status: stored.responseStatus,
			headers: { "Content-Type": "application/json", "Idempotent-Replayed": "true" },
		});
	}

	let response: Response;
	try {
		response = await run();
	} catch (error) {
		if (!(error instanceof ApiError) || error.status >= 500) {
			await release(env, scope);
			throw error;
		}
		response = errorResponse(error);
	}
	if (response.status >= 500) {
		await release(env, scope);
		return response;
	}
	await db
		.update(idempotencyKeys)
		.set({ responseStatus: response.status, responseBody: await response.clone().text() })
		.where(scope);
	return response;
}

async function release(env: Pick<Env, "DB">, scope: SQL | undefined): Promise<void> {
	await database(env).delete(idempotencyKeys).where(scope);
}

/** Forgets keys past their 24 hours (cron). */
export async function purgeExpiredIdempotencyKeys(env: Pick<Env, "DB">, now = new Date()): Promise<number> {
	const result = await database(env).delete(idempotencyKeys).where(lte(idempotencyKeys.expiresAt, now.toISOString()));
	return result.meta.changes ?? 0;
}
