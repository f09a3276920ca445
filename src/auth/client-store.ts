/** D1 access for API clients (their credentials are created by the admin CLI, `scripts/lib/provisioning.ts`). */
import { eq } from "drizzle-orm";
import { database } from "../db/client.ts";
import { apiClients } from "../db/schema.ts";

export type ApiClientRow = typeof apiClients.$inferSelect;

export async function findApiClient(env: Pick<Env, "DB">, id: string): Promise<ApiClientRow | null> {
	const row = await database(env).query.apiClients.findFirst({ where: eq(apiClients.id, id) });
	return row ?? null;
}
