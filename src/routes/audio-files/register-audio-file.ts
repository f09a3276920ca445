import { insertAudioFile } from "../../audio-files/audio-file-store.ts";
import { presentAudioFile } from "../../audio-files/present-audio-file.ts";
import { AudioFile, RegisterAudioFileBody } from "../../contracts/audio-files.ts";
import { envelope } from "../../contracts/common.ts";
import { created } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";

export const registerAudioFileRoute = defineRoute({
	method: "POST",
	path: "/api/v1/audio-files",
	auth: "base",
	idempotent: true,
	summary: "Register an audio file and get a signed upload address",
	tags: ["Audio files"],
	body: RegisterAudioFileBody,
	responses: {
		201: {
			description:
				"The audio file, `awaiting_upload`, with `upload_url`: PUT the bytes there with the registered Content-Type before `upload_url_expires_at` (30 minutes); the body must be under 100 MB (at most 99,999,999 bytes)",
			schema: envelope(AudioFile),
		},
		400: { description: "Invalid file_name or mime_type" },
	},
	async handler({ env, request, auth, body }) {
		const row = await insertAudioFile(env, auth.accountId, { fileName: body.file_name, mimeType: body.mime_type });
		return created(await presentAudioFile(env, publicOrigin(env, request.url), row));
	},
});
