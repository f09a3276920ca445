/**
 * `Idempotency-Key` for POSTs that create something (routes declared `idempotent: true`). The first response to
 * a key is kept for 24 hours and replayed for a retry with the same body; the same key with another body is a
 * 409. Keys are scoped to the account and the operation (`METHOD /path`), so two clients, or two
 * addresses, never collide. A concurrent duplicate that arrives while the first is still running gets a 409 to
 * retry shortly. 5xx responses are not kept: the client may retry those with the same key.
 */
import { z } from "zod";
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

interface StoredKey {
	request_hash: string;
	response_status: number | null;
	response_body: string | null;
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
	const claimed = await env.DB.prepare(
		`INSERT INTO idempotency_keys (account_id, key, operation, request_hash, created_at, expires_at)
		 VALUES (?, ?, ?, ?, ?, ?)
		 ON CONFLICT (account_id, operation, key) DO UPDATE SET
		   request_hash = excluded.request_hash, response_status = NULL, response_body = NULL,
		   created_at = excluded.created_at, expires_at = excluded.expires_at
		 WHERE idempotency_keys.expires_at <= ?
		    OR (idempotency_keys.response_status IS NULL AND idempotency_keys.created_at <= ?)
		 RETURNING key`,
	)
		.bind(call.accountId, call.key, call.operation, requestHash, at, expiresAt, at, abandonedBefore)
		.first();
	const scope = [call.accountId, call.operation, call.key] as const;

	if (!claimed) {
		const stored = await env.DB.prepare(
			"SELECT request_hash, response_status, response_body FROM idempotency_keys WHERE account_id = ? AND operation = ? AND key = ?",
		)
			.bind(...scope)
			.first<StoredKey>();
		if (!stored) throw new ApiError(409, "idempotency_conflict", "Please retry the request");
		if (stored.request_hash !== requestHash) {
			throw new ApiError(
				409,
				"idempotency_key_reused",
				`This ${IDEMPOTENCY_HEADER} was already used with a different request body; use a new key for a new request`,
			);
		}
		if (stored.response_status === null) {
			throw new ApiError(
				409,
				"idempotency_request_in_progress",
				`A request with this ${IDEMPOTENCY_HEADER} is still being processed; retry shortly`,
				{ headers: { "Retry-After": "1" } },
			);
		}
		return new Response(stored.response_body, {
			status: stored.response_status,
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
	await env.DB.prepare(
		"UPDATE idempotency_keys SET response_status = ?, response_body = ? WHERE account_id = ? AND operation = ? AND key = ?",
	)
		.bind(response.status, await response.clone().text(), ...scope)
		.run();
	return response;
}

async function release(env: Pick<Env, "DB">, scope: readonly [string, string, string]): Promise<void> {
	await env.DB.prepare("DELETE FROM idempotency_keys WHERE account_id = ? AND operation = ? AND key = ?")
		.bind(...scope)
		.run();
}

/** Forgets keys past their 24 hours (cron). */
export async function purgeExpiredIdempotencyKeys(env: Pick<Env, "DB">, now = new Date()): Promise<number> {
	const result = await env.DB.prepare("DELETE FROM idempotency_keys WHERE expires_at <= ?")
		.bind(now.toISOString())
		.run();
	return result.meta.changes ?? 0;
}
