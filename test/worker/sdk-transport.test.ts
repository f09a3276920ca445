/**
 * The SDK's transport against a scripted `fetch` (no service needed): the shared token request and `Retry-After`.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { VoiceConversionClient } from "../../sdk/index.ts";

const BASE = "https://api.example.test";

function tokenResponse() {
	return Response.json({ access_token: "token-1", expires_in: 3600, token_type: "Bearer" });
}

/** Resolves when `signal` aborts, rejecting with its reason, as a real fetch does. */
function abortedBy(signal: AbortSignal | null | undefined): Promise<never> {
	return new Promise((_, reject) => {
		if (!signal) return;
		if (signal.aborted) reject(signal.reason);
		signal.addEventListener("abort", () => reject(signal.reason), { once: true });
	});
}

afterEach(() => {
	vi.restoreAllMocks();
});

describe("SDK token sharing", () => {
	it("one caller's abort does not fail the other callers waiting on the same token request", async () => {
		let release: () => void = () => {};
		const tokenGate = new Promise<void>((resolve) => {
			release = resolve;
		});
		const fetchFake: typeof fetch = async (input, init) => {
			const url = input instanceof Request ? input.url : String(input);
			if (url.endsWith("/oauth2/token")) {
				await Promise.race([tokenGate, abortedBy(init?.signal)]);
				return tokenResponse();
			}
			return Response.json({ success: true, data: [] });
		};
		const sdk = new VoiceConversionClient({ baseUrl: BASE, clientId: "c", clientSecret: "s", fetch: fetchFake });
		const controller = new AbortController();
		const aborted = sdk.voices.list({ signal: controller.signal });
		const other = sdk.voices.list();
		controller.abort();
		release();
		await expect(aborted).rejects.toMatchObject({ code: "aborted" });
		await expect(other).resolves.toEqual([]);
		expect(sdk.tokens.requests).toBe(1);
	});
});

describe("SDK Retry-After", () => {
	function scripted(first: Response) {
		const calls: number[] = [];
		const fetchFake: typeof fetch = async (input) => {
			const url = input instanceof Request ? input.url : String(input);
			if (url.endsWith("/oauth2/token")) return tokenResponse();
			calls.push(Date.now());
			return calls.length === 1 ? first : Response.json({ success: true, data: [] });
		};
		return { calls, fetchFake };
	}

	it("never retries before the Retry-After the service asked for", async () => {
		vi.spyOn(Math, "random").mockReturnValue(0);
		const { calls, fetchFake } = scripted(
			Response.json({ success: false, message: "slow down" }, { status: 429, headers: { "Retry-After": "1" } }),
		);
		const sdk = new VoiceConversionClient({ baseUrl: BASE, clientId: "c", clientSecret: "s", fetch: fetchFake });
		await expect(sdk.voices.list()).resolves.toEqual([]);
		expect(calls).toHaveLength(2);
		expect((calls[1] as number) - (calls[0] as number)).toBeGreaterThanOrEqual(1000);
	});

	it("hands back a Retry-After longer than it will wait instead of retrying early", async () => {
		const { calls, fetchFake } = scripted(
			Response.json({ success: false, message: "slow down" }, { status: 503, headers: { "Retry-After": "120" } }),
		);
		const sdk = new VoiceConversionClient({ baseUrl: BASE, clientId: "c", clientSecret: "s", fetch: fetchFake });
		await expect(sdk.voices.list()).rejects.toMatchObject({ status: 503, retryAfterSeconds: 120 });
		expect(calls).toHaveLength(1);
	});

	it("waitForConversion does not poll again before Retry-After", async () => {
		vi.spyOn(Math, "random").mockReturnValue(0);
		const { calls, fetchFake } = scripted(
			Response.json({ success: false, message: "slow down" }, { status: 429, headers: { "Retry-After": "1" } }),
		);
		const completed = Response.json({ success: true, data: { id: "c1", status: "completed", use_preview: false } });
		const fetchTwice: typeof fetch = async (input, init) => {
			const url = input instanceof Request ? input.url : String(input);
			if (!url.endsWith("/oauth2/token") && calls.length === 1) {
				calls.push(Date.now());
				return completed;
			}
			return fetchFake(input, init);
		};
		const sdk = new VoiceConversionClient({
			baseUrl: BASE,
			clientId: "c",
			clientSecret: "s",
			fetch: fetchTwice,
			maxRetries: 0,
		});
		await expect(sdk.waitForConversion("c1", { initialIntervalMs: 10 })).resolves.toMatchObject({
			status: "completed",
		});
		expect(calls).toHaveLength(2);
		expect((calls[1] as number) - (calls[0] as number)).toBeGreaterThanOrEqual(1000);
	});
});
