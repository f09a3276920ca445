/**
 * Every failure cause a client can see has its own sentence: each code preprocessing records on a file reaches the
 * conversion as the message of its cause, never as a generic fallback or the operator's detail.
 */
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { PROBE_FAILURE_CODES } from "../../src/audio-files/probe/probe-failure.ts";
import { FAILURE_REASONS } from "../../src/contracts/runner.ts";
import { FAILURE_MESSAGES, type FailureCode } from "../../src/conversions/failure-messages.ts";
import { eventsFor, insertAudioFile, insertVoice, resetBroker, user } from "./conversion-fixtures.ts";

beforeEach(resetBroker);

/** What a client must read for each code preprocessing can record (spec section 7's causes). */
const EXPECTED: Record<string, FailureCode> = {
	empty_file: "empty_file",
	truncated: "corrupted_source",
	corrupted: "corrupted_source",
	zero_duration: "corrupted_source",
	unsupported_format: "unsupported_format",
	too_large: "too_large",
	missing_object: "source_missing",
	internal_error: "internal",
};

describe("failure messages", () => {
	it("covers every code preprocessing records", () => {
		expect(Object.keys(EXPECTED).sort()).toEqual([...PROBE_FAILURE_CODES, "internal_error"].sort());
	});

	it.each(Object.entries(EXPECTED))("a file failed with %s fails its conversion as %s", async (code, cause) => {
		const alice = await user();
		const file = await insertAudioFile(alice.accountId, "failed");
		const detail = `operator detail for ${code}`;
		await env.DB.prepare("UPDATE audio_files SET preprocessing_error_code = ?, preprocessing_error = ? WHERE id = ?")
			.bind(code, detail, file.id)
			.run();
		const created = await alice.convert({ audio_file_id: file.id, voice_model_id: await insertVoice() });
		const failed = await alice.get(created.id);
		expect(failed).toMatchObject({ status: "failed", error_message: FAILURE_MESSAGES[cause] });
		expect(failed.error_message).not.toContain(detail);
		const [event] = await eventsFor(created.id);
		expect(event?.payload.conversion.error_message).toBe(FAILURE_MESSAGES[cause]);
	});

	it("gives each cause its own clear sentence", () => {
		const messages = Object.values(FAILURE_MESSAGES);
		expect(new Set(messages).size).toBe(messages.length);
		for (const message of messages) {
			expect(message).toMatch(/^[A-Z].+\.$/);
			// Each tells the client what to do next.
			expect(message).toMatch(/create|Accepted formats/i);
		}
		// What runners can report is a cause with its own message too (runner-api.test.ts fails a lease with each).
		for (const reason of FAILURE_REASONS) expect(Object.keys(FAILURE_MESSAGES)).toContain(reason);
		expect(FAILURE_MESSAGES.too_large).toContain("over 100 MB");
	});
});
