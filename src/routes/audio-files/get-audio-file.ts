import { findAudioFile } from "../../audio-files/audio-file-store.ts";
import { presentAudioFile } from "../../audio-files/present-audio-file.ts";
import { AudioFile } from "../../contracts/audio-files.ts";
import { envelope, IdParams } from "../../contracts/common.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";

export const getAudioFileRoute = defineRoute({
	method: "GET",
	path: "/api/v1/audio-files/{id}",
	auth: "base",
	summary: "Get one audio file, with its upload and preprocessing status",
	tags: ["Audio files"],
	params: IdParams,
	responses: {
		200: { description: "The audio file", schema: envelope(AudioFile) },
		404: { description: "No such audio file for this account" },
	},
	async handler({ env, request, auth, params }) {
		const row = await findAudioFile(env, auth.accountId, params.id);
		if (!row) throw notFound("Audio file");
		return ok(await presentAudioFile(env, publicOrigin(env, request.url), row));
	},
});
