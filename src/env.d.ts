/** Optional secrets that `wrangler types` cannot see (only required ones are declared in wrangler.toml). */
interface Env {
	/** The previous token signing key, kept while tokens it signed are still alive. */
	TOKEN_SIGNING_KEY_PREVIOUS?: string;
	/** The previous storage signing key, kept while addresses it signed are still alive. */
	STORAGE_SIGNING_KEY_PREVIOUS?: string;
	/** Older webhook secret encryption keys, "version:key" separated by commas. */
	WEBHOOK_SECRET_KEY_PREVIOUS?: string;
	/** Local development only (`npm run dev` passes them): credentials the playground is prefilled with. */
	PLAYGROUND_CLIENT_ID?: string;
	PLAYGROUND_CLIENT_SECRET?: string;
}
