/** The local stack itself: a real Worker on a loopback port, reachable by any HTTP client. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../support/local-stack.ts";

let stack: LocalStack;
beforeAll(async () => {
	stack = await startLocalStack();
});
afterAll(() => stack?.close());

describe("local stack", () => {
	it("serves the API over real HTTP with migrations applied and provisioning working", async () => {
		const credentials = await stack.provision();
		const token = await stack.token(credentials);
		await stack.addVoice({ name: "Stack Voice", tags: ["e2e"] });
		const response = await fetch(`${stack.url}/api/v1/voices`, { headers: { Authorization: `Bearer ${token}` } });
		expect(response.status).toBe(200);
		const body = (await response.json()) as { data: { name: string }[] };
		expect(body.data.map((v) => v.name)).toContain("Stack Voice");
	});
});
