import { drizzle } from "drizzle-orm/d1";
import * as schema from "./schema.ts";

export type Database = ReturnType<typeof database>;

export const database = (env: Pick<Env, "DB">) => drizzle(env.DB, { schema });

export const nowIso = (now = new Date()) => now.toISOString();
