import { envelope } from "../../contracts/common.ts";
import { AccountVoice, VoiceFileParams } from "../../contracts/voices.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { presentAccountVoice } from "../../voices/present-voice.ts";
import { findOwnVoice, findVoiceFiles } from "../../voices/voice-store.ts";
import { completeVoiceFileParts } from "../../voices/voice-uploads.ts";

export const completeVoiceFileRoute = defineRoute({
	method: "POST",
	path: "/api/v1/voices/{id}/files/{role}/complete",
	auth: "base",
	summary: "Complete a voice file uploaded in parts",
	tags: ["Voices"],
	params: VoiceFileParams,
	responses: {
		200: {
			description:
				"The file is assembled and its bytes checked; the voice (`validating` once every declared file is in)",
			schema: envelope(AccountVoice),
		},
		400: { description: "`invalid_parts`: a part is missing or has the wrong size, or the file goes up in one PUT" },
		404: { description: "No such voice among yours, or no such file declared" },
		409: {
			description:
				"`already_uploaded`; `voice_file_upload_expired`: the upload was left unfinished 7 days and storage dropped it with its parts: send every part again, then complete",
		},
		415: { description: "`voice_file_unrecognised`: the bytes are not what the role accepts; upload the parts again" },
	},
	async handler({ env, request, auth, params }) {
		const voice = await findOwnVoice(env, auth.accountId, params.id);
		if (!voice) throw notFound("Voice model");
		const files = await findVoiceFiles(env, [voice.id]);
		if (!files.some((file) => file.role === params.role)) throw notFound(`The voice's ${params.role} file`);
		await completeVoiceFileParts(env, voice.id, params.role);
		const current = (await findOwnVoice(env, auth.accountId, voice.id)) ?? voice;
		return ok(
			await presentAccountVoice(env, publicOrigin(env, request.url), current, await findVoiceFiles(env, [voice.id])),
		);
	},
});
