/**
 * OAuth 2.0 client credentials (spec section 5): one token, fetched on first use and reused until shortly before it
 * expires. Concurrent callers share a single in-flight request, so a burst of calls costs one token request.
 */
import { errorFromResponse, SDK_ERROR_CODES, VoiceConversionError } from "./errors.ts";

export const DEFAULT_SCOPE = "voice-conversion-api/base";

export interface TokenSourceOptions {
	tokenUrl: string;
	clientId: string;
	clientSecret: string;
	scope?: string;
	fetch: typeof fetch;
	/** Renew this many seconds before expiry (default 60; never more than half the token's lifetime). */
	refreshMarginSeconds?: number;
	/** Milliseconds since the epoch; injectable so expiry can be tested without waiting an hour. */
	now?: () => number;
	/** Per-request timeout in milliseconds. */
	timeoutMs?: number;
	/**
	 * Keeps the token beyond this object's life (a CLI run, a short-lived process): read once before the first token
	 * request, told of each new token and of one the service refused (`undefined`). Its failures are ignored: a token
	 * not kept is only fetched again.
	 */
	store?: TokenStore;
}

export interface CachedToken {
	value: string;
	/** When to stop using it (expiry minus the margin), in epoch milliseconds. */
	renewAt: number;
}

/** Where a `TokenSource` keeps its token between processes; it holds a bearer token, so keep it private. */
export interface TokenStore {
	load(): CachedToken | undefined | Promise<CachedToken | undefined>;
	save(token: CachedToken | undefined): void | Promise<void>;
}

export class TokenSource {
	readonly #options: TokenSourceOptions;
	readonly #now: () => number;
	#cached: CachedToken | null = null;
	#pending: Promise<string> | null = null;
	#loading: Promise<void> | null = null;
	/** How many tokens were requested: lets callers and tests see that tokens are reused. */
	requests = 0;

	constructor(options: TokenSourceOptions) {
		this.#options = options;
		this.#now = options.now ?? Date.now;
	}

	/**
	 * A valid token: the cached one while it has more than the margin left, otherwise a new one. The request is
	 * shared by every concurrent caller, so no caller's signal is given to it: `signal` ends only this caller's wait.
	 */
	async get(signal?: AbortSignal): Promise<string> {
		if (this.#options.store) {
			this.#loading ??= this.#load();
			await this.#loading;
		}
		if (this.#cached && this.#now() < this.#cached.renewAt) return this.#cached.value;
		this.#pending ??= this.#fetch().finally(() => {
			this.#pending = null;
		});
		return signal ? untilAborted(this.#pending, signal) : this.#pending;
	}

	/** Forget `token` (the service refused it, e.g. after a key rotation) so the next `get` fetches a new one. */
	invalidate(token: string): void {
		if (this.#cached?.value !== token) return;
		this.#cached = null;
		this.#keep(undefined);
	}

	/** The store's token, read once (concurrent first callers wait for the same read), where this object has none. */
	async #load(): Promise<void> {
		const stored = await Promise.resolve()
			.then(() => this.#options.store?.load())
			.catch(() => undefined);
		if (this.#cached === null && typeof stored?.value === "string" && typeof stored.renewAt === "number") {
			this.#cached = { value: stored.value, renewAt: stored.renewAt };
		}
	}

	/** Tells the store of a new token (or none), after the caller's turn; a store that fails only costs a refetch. */
	#keep(token: CachedToken | undefined): void {
		Promise.resolve()
			.then(() => this.#options.store?.save(token))
			.catch(() => {});
	}

	async #fetch(): Promise<string> {
		const { tokenUrl, clientId, clientSecret, scope = DEFAULT_SCOPE } = this.#options;
		this.requests++;
		const requestedAt = this.#now();
		let response: Response;
		try {
			response = await this.#options.fetch(tokenUrl, {
				method: "POST",
				headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
				body: new URLSearchParams({
					grant_type: "client_credentials",
					client_id: clientId,
					client_secret: clientSecret,
					scope,
				}).toString(),
				signal: withTimeout(undefined, this.#options.timeoutMs),
			});
		} catch (cause) {
			throw networkError(cause, `token request to ${tokenUrl}`);
		}
		if (!response.ok) throw await errorFromResponse(response, "Token request");
		const body = (await response.json().catch(() => null)) as {
			access_token?: unknown;
			expires_in?: unknown;
		} | null;
		if (!body || typeof body.access_token !== "string") {
			throw new VoiceConversionError({
				status: response.status,
				code: SDK_ERROR_CODES.unexpectedResponse,
				message: "The token endpoint answered without an access_token",
			});
		}
		const lifetimeSeconds = typeof body.expires_in === "number" && body.expires_in > 0 ? body.expires_in : 3600;
		const margin = Math.min(this.#options.refreshMarginSeconds ?? 60, lifetimeSeconds / 2);
		this.#cached = { value: body.access_token, renewAt: requestedAt + (lifetimeSeconds - margin) * 1000 };
		this.#keep(this.#cached);
		return body.access_token;
	}
}

/** `promise`, or an `aborted` (or `timeout`) error as soon as `signal` aborts, whichever comes first. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
	if (signal.aborted) return Promise.reject(abortedError(signal, "token request"));
	return new Promise<T>((resolve, reject) => {
		const onAbort = () => reject(abortedError(signal, "token request"));
		signal.addEventListener("abort", onAbort, { once: true });
		promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
	});
}

/** The error for `what` cut off by `signal`: `timeout` for a timeout, otherwise `aborted` (whatever the reason). */
export function abortedError(signal: AbortSignal, what: string): VoiceConversionError {
	return (signal.reason as { name?: string } | null)?.name === "TimeoutError"
		? networkError(signal.reason, what)
		: new VoiceConversionError({
				status: null,
				code: SDK_ERROR_CODES.aborted,
				message: `${what} was aborted`,
				cause: signal.reason,
			});
}

/** `signal` combined with a timeout, when one is set. */
export function withTimeout(signal: AbortSignal | undefined, timeoutMs: number | undefined): AbortSignal | undefined {
	if (!timeoutMs) return signal;
	const timeout = AbortSignal.timeout(timeoutMs);
	return signal ? AbortSignal.any([signal, timeout]) : timeout;
}

/** Maps what `fetch` throws (network failure, timeout, caller's abort) to a VoiceConversionError. */
export function networkError(cause: unknown, what: string): VoiceConversionError {
	const name = (cause as { name?: string } | null)?.name;
	if (name === "TimeoutError")
		return new VoiceConversionError({
			status: null,
			code: SDK_ERROR_CODES.timeout,
			message: `${what} timed out`,
			cause,
		});
	if (name === "AbortError")
		return new VoiceConversionError({
			status: null,
			code: SDK_ERROR_CODES.aborted,
			message: `${what} was aborted`,
			cause,
		});
	const detail = (cause as Error | undefined)?.message ?? String(cause);
	return new VoiceConversionError({
		status: null,
		code: SDK_ERROR_CODES.network,
		message: `${what} failed: ${detail}`,
		cause,
	});
}
