/**
 * Receiver helper: verifies a webhook delivery from this service. WebCrypto only, no dependencies beyond
 * `src/contracts/webhook-signature.ts`, so it runs in Workers, Node 20+, Deno, Bun and browsers.
 *
 * Always verify the raw request body exactly as received (read it as text or bytes before any JSON parsing),
 * answer 401 when verification fails, and deduplicate by `id` (retries and redeliveries reuse it).
 *
 * @example A Cloudflare Worker (or any fetch-style handler) receiving deliveries:
 * ```ts
 * import { verifyWebhook } from "./verify-webhook.ts";
 *
 * export default {
 *   async fetch(request: Request, env: { WEBHOOK_SECRET: string }) {
 *     const body = await request.text(); // the raw body: never re-serialise parsed JSON
 *     const result = await verifyWebhook({ secret: env.WEBHOOK_SECRET, headers: request.headers, body });
 *     if (!result.ok) return new Response(result.reason, { status: 401 });
 *     const payload = JSON.parse(body); // { event, id, timestamp, data }
 *     // ... skip if payload.id was already processed, then handle payload.data.conversion
 *     return new Response(null, { status: 204 });
 *   },
 * };
 * ```
 */
import {
	computeWebhookSignature,
	EVENT_HEADER,
	ID_HEADER,
	SIGNATURE_HEADER,
	SIGNATURE_PREFIX,
	TIMESTAMP_HEADER,
} from "../src/contracts/webhook-signature.ts";

/** Deliveries whose timestamp is further than this from the receiver's clock are refused (replay window). */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

export interface VerifyWebhookInput {
	/** The subscription's signing secret (`whsec_...`), exactly as returned at creation or regeneration. */
	secret: string;
	/** Request headers: a `Headers` object or a plain object such as Node's `req.headers`. */
	headers: HeaderSource;
	/** The raw body, unparsed. */
	body: string | Uint8Array | ArrayBuffer;
	/** Allowed distance between the delivery timestamp and `now`, in seconds (default 300). */
	toleranceSeconds?: number;
	/** The receiver's clock; defaults to `Date.now()`. */
	now?: Date | number;
}

export type VerifyFailure =
	| "missing_signature"
	| "missing_timestamp"
	| "malformed_signature"
	| "malformed_timestamp"
	| "timestamp_out_of_tolerance"
	| "signature_mismatch";

export type VerifyWebhookResult =
	| { ok: true; timestamp: number; id: string | null; event: string | null }
	| { ok: false; reason: VerifyFailure };

function header(headers: HeaderSource, name: string): string | null {
	if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name);
	const wanted = name.toLowerCase();
	for (const [key, value] of Object.entries(headers)) {
		if (key.toLowerCase() !== wanted || value === undefined) continue;
		return Array.isArray(value) ? (value[0] ?? null) : value;
	}
	return null;
}

/** Compares two equal-format strings without an early exit, so timing does not reveal where they differ. */
function constantTimeEqual(a: string, b: string): boolean {
	let diff = a.length ^ b.length;
	for (let i = 0; i < Math.max(a.length, b.length); i++) {
		diff |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
	}
	return diff === 0;
}

export async function verifyWebhook(input: VerifyWebhookInput): Promise<VerifyWebhookResult> {
	const signature = header(input.headers, SIGNATURE_HEADER)?.trim();
	if (!signature) return { ok: false, reason: "missing_signature" };
	const timestampText = header(input.headers, TIMESTAMP_HEADER)?.trim();
	if (!timestampText) return { ok: false, reason: "missing_timestamp" };

	const hex = signature.startsWith(SIGNATURE_PREFIX) ? signature.slice(SIGNATURE_PREFIX.length) : signature;
	if (!/^[0-9a-fA-F]{64}$/.test(hex)) return { ok: false, reason: "malformed_signature" };
	if (!/^\d{1,12}$/.test(timestampText)) return { ok: false, reason: "malformed_timestamp" };

	const timestamp = Number(timestampText);
	const nowSeconds = Math.floor(Number(input.now ?? Date.now()) / 1000);
	const tolerance = input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
	if (Math.abs(nowSeconds - timestamp) > tolerance) return { ok: false, reason: "timestamp_out_of_tolerance" };

	const body = input.body instanceof ArrayBuffer ? new Uint8Array(input.body) : input.body;
	const expected = await computeWebhookSignature(input.secret, timestampText, body);
	if (!constantTimeEqual(expected, hex.toLowerCase())) return { ok: false, reason: "signature_mismatch" };
	return {
		ok: true,
		timestamp,
		id: header(input.headers, ID_HEADER),
		event: header(input.headers, EVENT_HEADER),
	};
}
