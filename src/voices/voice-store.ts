/** D1 access for voices. Clients only ever see active voices; an inactive one does not exist for them. */
import { and, asc, eq } from "drizzle-orm";
import { database } from "../db/client.ts";
import { voices } from "../db/schema.ts";

export type VoiceRow = typeof voices.$inferSelect;

export function listActiveVoices(env: Pick<Env, "DB">): Promise<VoiceRow[]> {
	return database(env).select().from(voices).where(eq(voices.isActive, true)).orderBy(asc(voices.name));
}

export async function findActiveVoice(env: Pick<Env, "DB">, id: string): Promise<VoiceRow | null> {
	const row = await database(env).query.voices.findFirst({ where: and(eq(voices.id, id), eq(voices.isActive, true)) });
	return row ?? null;
}
