/** D1 access for the deployment's base models (ContentVec, RMVPE), which the admin tool sets. */
import { database } from "../db/client.ts";
import { baseModels } from "../db/schema.ts";

export type BaseModelRow = typeof baseModels.$inferSelect;

export function listBaseModels(env: Pick<Env, "DB">): Promise<BaseModelRow[]> {
	return database(env).select().from(baseModels);
}
