import { drizzle } from "drizzle-orm/d1";
import * as schema from "./schema.ts";

export type Database = ReturnType<typeof database>;

export const database = (env: Pick<Env, "DB">) => drizzle(env.DB, { schema });

export const nowIso = (now = new Date()) => now.toISOString();

/**
 * Whether `error` is D1 refusing a write for a UNIQUE index. Drizzle wraps the driver's error ("Failed query: ...",
 * the reason in `cause`), so the whole cause chain is read, not only the outer message.
 */
export function isUniqueViolation(error: unknown): boolean {
	for (let e: unknown = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
		if (/UNIQUE constraint failed/i.test(e.message)) return true;
	}
	return false;
}
