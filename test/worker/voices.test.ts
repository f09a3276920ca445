import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { createVoice, voiceObjectKeys } from "../../scripts/lib/provisioning.ts";
import { call, runSql, signedInClient } from "./helpers.ts";

const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4]);
const WAV = new TextEncoder().encode("RIFF\u0000\u0000\u0000\u0000WAVEfmt sample bytes");

async function addVoice(name: string, options: { active?: boolean; withAssets?: boolean } = {}) {
	const id = crypto.randomUUID();
	const keys = voiceObjectKeys(id);
	const withAssets = options.withAssets ?? true;
	if (withAssets) {
		await env.BUCKET.put(keys.image("png"), PNG, { httpMetadata: { contentType: "image/png" } });
		await env.BUCKET.put(keys.sample("wav"), WAV, { httpMetadata: { contentType: "audio/wav" } });
	}
	const plan = createVoice(id, {
		name,
		engine: "dsp",
		tags: ["test", name.toLowerCase()],
		params: { formant_shift: 1 },
		...(withAssets ? { imageKey: keys.image("png"), sampleKey: keys.sample("wav") } : {}),
		isActive: options.active ?? true,
	});
	await runSql(plan.statements);
	return id;
}

describe("voices", () => {
	let api: Awaited<ReturnType<typeof signedInClient>>["api"];
	let voiceId: string;
	beforeAll(async () => {
		({ api } = await signedInClient());
		voiceId = await addVoice("Alto");
		await addVoice("Bass", { withAssets: false });
		await addVoice("Retired", { active: false });
	});

	it("lists active voices with exactly the spec's fields", async () => {
		const response = await api("/api/v1/voices");
		expect(response.status).toBe(200);
		const body = (await response.json()) as { success: boolean; data: Record<string, unknown>[] };
		expect(body.success).toBe(true);
		const names = body.data.map((v) => v.name);
		expect(names).toContain("Alto");
		expect(names).not.toContain("Retired");
		const alto = body.data.find((v) => v.name === "Alto");
		// The spec's fields, plus `owner` and `status` (issue 15), which every voice shows.
		expect(Object.keys(alto ?? {}).sort()).toEqual(["id", "image_url", "name", "owner", "song_url", "status", "tags"]);
		expect(alto).toMatchObject({ owner: "service", status: "ready" });
		expect(alto).toMatchObject({ id: voiceId, tags: ["test", "alto"] });
		expect(body.data.find((v) => v.name === "Bass")).toMatchObject({ image_url: null, song_url: null });
	});

	it("signs image and sample addresses that work without a token and carry the content type", async () => {
		const body = (await (await api(`/api/v1/voices/${voiceId}`)).json()) as {
			data: { image_url: string; song_url: string };
		};
		const image = await call(body.data.image_url);
		expect(image.status).toBe(200);
		expect(image.headers.get("Content-Type")).toBe("image/png");
		expect(new Uint8Array(await image.arrayBuffer())).toEqual(PNG);
		const song = await call(body.data.song_url);
		expect(song.headers.get("Content-Type")).toBe("audio/wav");
		expect(new Uint8Array(await song.arrayBuffer())).toEqual(WAV);
	});

	it("answers 404 in the envelope for unknown, malformed and inactive ids", async () => {
		for (const id of [crypto.randomUUID(), "not-a-uuid"]) {
			const response = await api(`/api/v1/voices/${id}`);
			expect(response.status).toBe(404);
			expect(await response.json()).toMatchObject({ success: false, code: "not_found" });
		}
		const list = (await (await api("/api/v1/voices")).json()) as { data: { id: string }[] };
		expect(list.data.length).toBeGreaterThanOrEqual(2);
	});

	it("finds a voice by an id written with percent-encoded characters, as the same address (RFC 3986 §6.2.2.2)", async () => {
		const encoded = (c: string) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`;
		for (const id of [
			voiceId.replace(/[a-f]/, encoded),
			voiceId.replaceAll("-", "%2D"),
			[...voiceId].map(encoded).join("").toLowerCase(),
		]) {
			const response = await api(`/api/v1/voices/${id}`);
			expect(response.status).toBe(200);
			expect(await response.json()).toMatchObject({ data: { id: voiceId, name: "Alto" } });
		}
		// Still 404: another id, one whose escapes decode to something else, and escapes that are not UTF-8.
		for (const id of [crypto.randomUUID().replace("-", "%2D"), `${voiceId}%2F`, `${voiceId.slice(0, -1)}%E0%A4%A`]) {
			const response = await api(`/api/v1/voices/${id}`);
			expect(response.status).toBe(404);
			expect(await response.json()).toMatchObject({ success: false, code: "not_found" });
		}
	});
});
