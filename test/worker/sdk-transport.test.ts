/**
 * The SDK's transport against a scripted `fetch` (no service needed): the shared token request, `Retry-After`,
 * deletes whose answer was lost, the test delivery's timeout, and aborted waits.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { VoiceConversionClient, VoiceConversionError } from "../../sdk/index.ts";

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

	it("tells onRetry about each retry, with the failure and the wait", async () => {
		vi.spyOn(Math, "random").mockReturnValue(0);
		const { fetchFake } = scripted(
			Response.json(
				{ success: false, message: "Too many API requests", code: "rate_limited" },
				{ status: 429, headers: { "Retry-After": "1" } },
			),
		);
		const notices: { code: string; attempt: number; delayMs: number }[] = [];
		const sdk = new VoiceConversionClient({
			baseUrl: BASE,
			clientId: "c",
			clientSecret: "s",
			fetch: fetchFake,
			onRetry: ({ error, attempt, delayMs }) => notices.push({ code: error.code, attempt, delayMs }),
		});
		await expect(sdk.voices.list()).resolves.toEqual([]);
		expect(notices).toEqual([{ code: "rate_limited", attempt: 1, delayMs: 1000 }]);
	});

	it("hands back a Retry-After longer than it will wait instead of retrying early", async () => {
		const { calls, fetchFake } = scripted(
			Response.json({ success: false, message: "slow down" }, { status: 503, headers: { "Retry-After": "120" } }),
		);
		const sdk = new VoiceConversionClient({ baseUrl: BASE, clientId: "c", clientSecret: "s", fetch: fetchFake });
		await expect(sdk.voices.list()).rejects.toMatchObject({ status: 503, retryAfterSeconds: 120 });
		expect(calls).toHaveLength(1);
	});

	it("waits out a Retry-After given as an HTTP-date, counted from the response's Date whatever the local clock", async () => {
		vi.spyOn(Math, "random").mockReturnValue(0);
		// The client's clock is 10 minutes ahead of the service's: measured against it, the date has long passed.
		const serviceNow = Date.now() - 600_000;
		const { calls, fetchFake } = scripted(
			Response.json(
				{ success: false, message: "slow down" },
				{
					status: 503,
					headers: {
						Date: new Date(serviceNow).toUTCString(),
						"Retry-After": new Date(serviceNow + 2_000).toUTCString(),
					},
				},
			),
		);
		const sdk = new VoiceConversionClient({ baseUrl: BASE, clientId: "c", clientSecret: "s", fetch: fetchFake });
		await expect(sdk.voices.list()).resolves.toEqual([]);
		expect(calls).toHaveLength(2);
		expect((calls[1] as number) - (calls[0] as number)).toBeGreaterThanOrEqual(1000);

		// Without a Date, the date is counted from the local clock; one too far off is handed back, in seconds.
		const far = scripted(
			Response.json(
				{ success: false, message: "down for maintenance" },
				{ status: 503, headers: { "Retry-After": new Date(Date.now() + 120_000).toUTCString() } },
			),
		);
		const patient = new VoiceConversionClient({
			baseUrl: BASE,
			clientId: "c",
			clientSecret: "s",
			fetch: far.fetchFake,
		});
		const error = await patient.voices.list().catch((e: unknown) => e);
		expect(error).toMatchObject({ status: 503 });
		expect((error as VoiceConversionError).retryAfterSeconds).toBeGreaterThanOrEqual(118);
		expect(far.calls).toHaveLength(1);
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

/** A scripted service: the token endpoint, then `answer` for every API call (in order, counted). */
function service(answer: (call: number, url: string, init?: RequestInit) => Response | Promise<Response>) {
	let calls = 0;
	const fetchFake: typeof fetch = async (input, init) => {
		const url = input instanceof Request ? input.url : String(input);
		if (url.endsWith("/oauth2/token")) return tokenResponse();
		return answer(++calls, url, init);
	};
	return { fetchFake, calls: () => calls };
}

describe("SDK deletes, test deliveries and aborted waits", () => {
	const notFound = () => Response.json({ success: false, code: "not_found", message: "Not found" }, { status: 404 });

	it("a delete retried after a lost answer, which then finds nothing, succeeded the first time", async () => {
		vi.spyOn(Math, "random").mockReturnValue(0);
		// The service deleted it, but its answer was lost (a 503 from a proxy); the retry finds nothing.
		const { fetchFake, calls } = service((call) =>
			call === 1 ? Response.json({ success: false, message: "unavailable" }, { status: 503 }) : notFound(),
		);
		const sdk = new VoiceConversionClient({ baseUrl: BASE, clientId: "c", clientSecret: "s", fetch: fetchFake });
		await expect(sdk.webhooks.delete("a b")).resolves.toEqual({ id: "a b", deleted: true });
		expect(calls()).toBe(2);
		// A first answer of 404 is the truth: there was nothing to delete.
		const direct = service(notFound);
		const other = new VoiceConversionClient({
			baseUrl: BASE,
			clientId: "c",
			clientSecret: "s",
			fetch: direct.fetchFake,
		});
		await expect(other.voices.delete("missing")).rejects.toMatchObject({ status: 404, code: "not_found" });
	});

	it("a test delivery may take the service's 30 s for the receiver, whatever the client's own timeout", async () => {
		const { fetchFake } = service(async (_, url, init) => {
			expect(url).toMatch(/\/test$/);
			// Slower than the client's timeout; a timeout this call was given would abort the wait.
			await new Promise((resolve, reject) => {
				const timer = setTimeout(resolve, 300);
				init?.signal?.addEventListener("abort", () => {
					clearTimeout(timer);
					reject(init.signal?.reason);
				});
			});
			return Response.json({ success: true, data: { delivered: false, message: "No answer within 30 seconds" } });
		});
		const sdk = new VoiceConversionClient({
			baseUrl: BASE,
			clientId: "c",
			clientSecret: "s",
			fetch: fetchFake,
			timeoutMs: 100,
			maxRetries: 0,
		});
		await expect(sdk.webhooks.test("s1")).resolves.toMatchObject({ delivered: false });
	});

	it("aborting waitForConversion between polls ends it with the SDK's aborted error", async () => {
		const { fetchFake } = service(() =>
			Response.json({ success: true, data: { id: "c1", status: "processing", use_preview: false } }),
		);
		const sdk = new VoiceConversionClient({ baseUrl: BASE, clientId: "c", clientSecret: "s", fetch: fetchFake });
		const controller = new AbortController();
		const waiting = sdk.waitForConversion("c1", { initialIntervalMs: 60_000, signal: controller.signal });
		setTimeout(() => controller.abort(), 50);
		await expect(waiting).rejects.toBeInstanceOf(VoiceConversionError);
		await expect(waiting).rejects.toMatchObject({ code: "aborted" });
	});
});
