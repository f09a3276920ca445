/**
 * Whether an API client may still use its access tokens. Tokens are stateless JWTs that live an hour, so revoking a
 * client (`npm run admin -- client revoke`, which sets `api_clients.revoked_at`) is enforced here, on every
 * authenticated request, for every token the client ever received.
 *
 * The answer is kept in the isolate's memory for `CLIENT_STATUS_CACHE_MS`: a busy client then costs one D1 read per
 * isolate every few seconds instead of one per request, and a revocation takes effect everywhere within that time
 * (each isolate asks D1 again once its copy is older). Five seconds is well inside "within seconds" for a revoked
 * credential, and long enough that a client sending many requests a second does not put its reads on D1.
 */
import { eq } from "drizzle-orm";
import { database } from "../db/client.ts";
import { apiClients } from "../db/schema.ts";

export const CLIENT_STATUS_CACHE_MS = 5_000;

/** Entries beyond this many make the cache drop the expired ones (only clients with valid tokens get here). */
const CACHE_PRUNE_SIZE = 1_000;

const statusByClient = new Map<string, { active: boolean; checkedAt: number }>();

/** False when the client was revoked or no longer exists. */
export async function clientIsActive(env: Env, clientId: string, now = Date.now()): Promise<boolean> {
	const cached = statusByClient.get(clientId);
	if (cached && now - cached.checkedAt < CLIENT_STATUS_CACHE_MS) return cached.active;
	const [row] = await database(env)
		.select({ revokedAt: apiClients.revokedAt })
		.from(apiClients)
		.where(eq(apiClients.id, clientId))
		.limit(1);
	const active = row !== undefined && row.revokedAt === null;
	if (statusByClient.size >= CACHE_PRUNE_SIZE) {
		for (const [id, entry] of statusByClient) {
			if (now - entry.checkedAt >= CLIENT_STATUS_CACHE_MS) statusByClient.delete(id);
		}
	}
	statusByClient.set(clientId, { active, checkedAt: now });
	return active;
}
