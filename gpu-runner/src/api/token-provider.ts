/**
 * OAuth2 client-credentials token for the runner scope, fetched lazily and renewed before it expires
 * (at 80% of its life, at least 30 s early), so no API call ever goes out with an expired token.
 * Concurrent callers share one in-flight request.
 */
import { z } from "zod";
import { RUNNER_SCOPE } from "../../../src/contracts/runner.ts";
import { ApiError } from "./api-error.ts";

const TokenResponse = z.object({
	access_token: z.string().min(1),
	expires_in: z.number().positive(),
	token_type: z.string(),
});

export interface TokenSource {
	/** A valid bearer token. */
	get(): Promise<string>;
	/** Forget the cached token (after a 401). */
	invalidate(): void;
}

export interface TokenProviderOptions {
	apiBaseUrl: string;
	clientId: string;
	clientSecret: string;
	fetch?: typeof fetch;
	now?: () => number;
}

export class TokenProvider implements TokenSource {
	#options: TokenProviderOptions;
	#token: { value: string; renewAt: number } | undefined;
	#pending: Promise<string> | undefined;

	constructor(options: TokenProviderOptions) {
		this.#options = options;
	}

	get(): Promise<string> {
		const now = (this.#options.now ?? Date.now)();
		if (this.#token && now < this.#token.renewAt) return Promise.resolve(this.#token.value);
		this.#pending ??= this.#fetchToken().finally(() => {
			this.#pending = undefined;
		});
		return this.#pending;
	}

	invalidate(): void {
		this.#token = undefined;
	}

	async #fetchToken(): Promise<string> {
		const { apiBaseUrl, clientId, clientSecret } = this.#options;
		const fetchImpl = this.#options.fetch ?? fetch;
		const body = new URLSearchParams({
			grant_type: "client_credentials",
			client_id: clientId,
			client_secret: clientSecret,
			scope: RUNNER_SCOPE,
		});
		const requested = (this.#options.now ?? Date.now)();
		let response: Response;
		try {
			response = await fetchImpl(`${apiBaseUrl}/oauth2/token`, {
				method: "POST",
				headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
				body,
				signal: AbortSignal.timeout(30_000),
			});
		} catch (error) {
			throw new ApiError("token", 0, "network_error", "token request failed to connect", { cause: error });
		}
		const json: unknown = await response.json().catch(() => undefined);
		if (!response.ok) throw ApiError.fromResponse("token", response.status, json);
		const parsed = TokenResponse.safeParse(json);
		if (!parsed.success)
			throw new ApiError("token", response.status, "bad_response", "token response has an unexpected shape");
		const lifetimeMs = parsed.data.expires_in * 1000;
		const renewIn = Math.max(0, Math.min(lifetimeMs * 0.8, lifetimeMs - 30_000));
		this.#token = { value: parsed.data.access_token, renewAt: requested + renewIn };
		return parsed.data.access_token;
	}
}
