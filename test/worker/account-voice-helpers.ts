/** Driving an account voice through the real Worker: create, upload its files, lease and report its validation. */
import { expect } from "vitest";
import { LeaseResponse, type VoiceValidationLease } from "../../src/contracts/runner.ts";
import type { VoiceUpload } from "../../src/contracts/voices.ts";
import { json, runner, type user } from "./conversion-fixtures.ts";
import { call } from "./helpers.ts";

export type Owner = Awaited<ReturnType<typeof user>>;
export type Problem = { success: false; code: string; message: string; errors?: { field: string; message: string }[] };
export type Voice = Record<string, unknown> & {
	id: string;
	status: string;
	error_message: string | null;
	voice_settings: Record<string, unknown>;
	uploads: Record<string, VoiceUpload>;
};

export const bytesOf = (head: string | number[], size: number) => {
	const bytes = new Uint8Array(size);
	bytes.set(typeof head === "string" ? Uint8Array.from(head, (c) => c.charCodeAt(0)) : head);
	for (let i = 64; i < size; i++) bytes[i] = (i * 31) & 0xff;
	return bytes;
};
/** First bytes as the real files have them: a torch zip, a faiss IVF index. */
export const MODEL = bytesOf("PK\x03\x04", 150_000);
export const INDEX = bytesOf("IwFl", 40_000);

export const declare = (files: Record<string, Uint8Array>) =>
	Object.fromEntries(
		Object.entries(files).map(([role, bytes]) => [role, { file_name: `${role}.bin`, size_bytes: bytes.byteLength }]),
	);

export function createVoice(owner: Owner, body: Record<string, unknown> & { files: Record<string, unknown> }) {
	return owner.api("/api/v1/voices", {
		method: "POST",
		headers: { "Content-Type": "application/json" },
		body: JSON.stringify({ name: `Mine ${crypto.randomUUID().slice(0, 6)}`, ...body }),
	});
}

/** Sends a file the way its upload says: one PUT, or every part then the completing call. */
export async function upload(owner: Owner, plan: VoiceUpload, bytes: Uint8Array) {
	if (plan.method === "PUT") {
		return call(plan.upload_url, {
			method: "PUT",
			headers: { "Content-Length": String(bytes.byteLength) },
			body: bytes,
		});
	}
	for (const part of plan.parts) {
		const chunk = bytes.subarray(
			(part.part_number - 1) * plan.part_size_bytes,
			part.part_number * plan.part_size_bytes,
		);
		const put = await call(part.upload_url, {
			method: "PUT",
			headers: { "Content-Length": String(chunk.byteLength) },
			body: chunk,
		});
		expect(put.status).toBe(200);
	}
	return owner.api(new URL(plan.complete_url).pathname, { method: "POST" });
}

/** A voice created with these files and settings, every file uploaded: now `validating`. */
export async function uploadedVoice(
	owner: Owner,
	files: Record<string, Uint8Array> = { model: MODEL, index: INDEX },
	voiceSettings: Record<string, unknown> = {},
): Promise<Voice> {
	const response = await createVoice(owner, { voice_settings: voiceSettings, files: declare(files) });
	expect(response.status).toBe(201);
	const voice = (await json<{ data: Voice }>(response)).data;
	for (const [role, bytes] of Object.entries(files)) {
		expect((await upload(owner, voice.uploads[role] as VoiceUpload, bytes)).status).toBe(200);
	}
	return voice;
}

export type Runner = Awaited<ReturnType<typeof runner>>;

/** One lease request of a runner that converts and validates with both engines: what it was granted. */
export async function askForWork(worker: Runner, { capacity = 4, waitSeconds = 5 } = {}) {
	const response = await worker.post("/internal/v1/leases", {
		runner_id: worker.runnerId,
		capacity,
		wait_seconds: waitSeconds,
		engines: ["dsp", "rvc"],
		job_kinds: ["convert", "validate_voice"],
	});
	return LeaseResponse.parse((await json<{ data: unknown }>(response)).data);
}

export async function validationLease(voiceId: string): Promise<{ lease: VoiceValidationLease; worker: Runner }> {
	const worker = await runner();
	for (let round = 0; round < 5; round++) {
		const { validations } = await askForWork(worker);
		const lease = validations.find((granted) => granted.voice_id === voiceId);
		if (lease) return { lease, worker };
	}
	throw new Error("the validation was not leased");
}

/** What a runner reports for a v2 model with pitch, with an index when `withIndex`. */
export const readyReport = (withIndex: boolean) => ({
	outcome: "ready",
	files: [
		{ role: "model", sha256: "a".repeat(64), size_bytes: MODEL.byteLength },
		...(withIndex ? [{ role: "index", sha256: "b".repeat(64), size_bytes: INDEX.byteLength }] : []),
	],
	model: { sample_rate: 40_000, f0: true, feature_dim: 768, version: "v2" },
	pitch_range_hz: { low: 150, high: 300 },
});

export async function getVoice(owner: Owner, id: string): Promise<Voice> {
	const response = await owner.api(`/api/v1/voices/${id}`);
	expect(response.status).toBe(200);
	return (await json<{ data: Voice }>(response)).data;
}

export function patchVoice(owner: Owner, id: string, body: Record<string, unknown>) {
	return owner.api(`/api/v1/voices/${id}`, {
		method: "PATCH",
		headers: { "Content-Type": "application/json" },
		body: JSON.stringify(body),
	});
}
