/**
 * The SDK's transport against a scripted `fetch` (no service needed): the shared token request.
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
