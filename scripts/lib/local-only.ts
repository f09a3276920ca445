/**
 * Local runs stay local: what `npm run dev` and the tests start reaches nothing on the internet.
 * - Miniflare would download a sample `request.cf` object.
 * - Wrangler posts usage metrics to Cloudflare after its commands, for a developer who never answered its question
 *   too. `send_metrics = false` in wrangler.toml stops the commands that read it, but `wrangler dev` sends some
 *   events without reading it; the environment variable stops them all.
 * Set as defaults in `env` (this process's, which the processes it starts inherit); a developer's own choice wins.
 */
export function keepLocalRunsLocal(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
	env.CLOUDFLARE_CF_FETCH_ENABLED ??= "false";
	env.WRANGLER_SEND_METRICS ??= "false";
	return env;
}
