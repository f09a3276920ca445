import type { ConversionJob } from "../contracts/broker.ts";
import type { EngineName } from "../contracts/runner.ts";

/** The broker's view of conversions that should have a job: `queued` ones, and `processing` ones being retried. */
export async function loadDispatchableJobs(env: Pick<Env, "DB">, ids: string[]): Promise<ConversionJob[]> {
	const { results } = await env.DB.prepare(
		`SELECT c.id, c.account_id, c.voice_model_id, c.use_preview, v.engine
		 FROM voice_conversions c JOIN voices v ON v.id = c.voice_model_id
		 WHERE c.id IN (SELECT value FROM json_each(?)) AND c.status IN ('queued', 'processing')`,
	)
		.bind(JSON.stringify(ids))
		.all<{ id: string; account_id: string; voice_model_id: string; use_preview: number; engine: EngineName }>();
	return results.map((row) => ({
		conversionId: row.id,
		accountId: row.account_id,
		voiceId: row.voice_model_id,
		engine: row.engine,
		usePreview: row.use_preview === 1,
	}));
}
