import { renewUploadWindow } from "../../audio-files/audio-file-store.ts";
import { presentAudioFile } from "../../audio-files/present-audio-file.ts";
import { AudioFile } from "../../contracts/audio-files.ts";
import { envelope, IdParams } from "../../contracts/common.ts";
import { conflict, notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";

export const regenerateUploadUrlRoute = defineRoute({
	method: "POST",
	path: "/api/v1/audio-files/{id}/regenerate-upload-url",
	auth: "base",
	summary: "Get a fresh 30-minute upload address for a file not yet uploaded",
	tags: ["Audio files"],
	params: IdParams,
	responses: {
		200: {
			description:
				"The audio file with a new `upload_url` and `upload_url_expires_at`; every earlier upload address of the file is refused from now on (403)",
			schema: envelope(AudioFile),
		},
		404: { description: "No such audio file for this account" },
		409: { description: "The file was already uploaded, or its upload was refused (over 100 MB)" },
	},
	async handler({ env, request, auth, params }) {
		const result = await renewUploadWindow(env, auth.accountId, params.id);
		if ("refused" in result) {
			if (result.refused === "not_found") throw notFound("Audio file");
			if (result.refused === "upload_refused") {
				throw conflict(
					"upload_refused",
					"This audio file's upload was refused (see preprocessing_error); register a new audio file to upload other audio",
				);
			}
			throw conflict("already_uploaded", "This audio file has already been uploaded; it needs no upload address");
		}
		return ok(await presentAudioFile(env, publicOrigin(env, request.url), result.renewed));
	},
});
