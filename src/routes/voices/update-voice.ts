import { envelope, IdParams } from "../../contracts/common.ts";
import { AccountVoice, UpdateVoiceBody } from "../../contracts/voices.ts";
import { isUniqueViolation, nowIso } from "../../db/client.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { presentAccountVoice } from "../../voices/present-voice.ts";
import { checkVoiceCanHonour } from "../../voices/voice-capabilities.ts";
import { accountVoiceNameTaken, findOwnVoice, findVoiceFiles, updateVoiceFields } from "../../voices/voice-store.ts";
import { voiceNameTaken } from "./create-voice.ts";

export const updateVoiceRoute = defineRoute({
	method: "PATCH",
	path: "/api/v1/voices/{id}",
	auth: "base",
	summary: "Change one of your voices: name, tags, description, default settings",
	tags: ["Voices"],
	params: IdParams,
	body: UpdateVoiceBody,
	responses: {
		200: { description: "The voice as changed", schema: envelope(AccountVoice) },
		400: {
			description:
				"Invalid request, naming the field; `unsupported_voice_setting`: a default the voice cannot honour (as for conversions)",
		},
		404: { description: "No such voice among yours (service voices are changed by operators only)" },
		409: { description: "`voice_name_taken`: another of your voices has this name" },
	},
	async handler({ env, request, auth, params, body }) {
		const voice = await findOwnVoice(env, auth.accountId, params.id);
		if (!voice) throw notFound("Voice model");
		if (body.name !== undefined && (await accountVoiceNameTaken(env, auth.accountId, body.name, voice.id))) {
			throw voiceNameTaken(body.name);
		}
		// A validated voice's new defaults must be ones it can honour (before validation, validation checks them).
		if (voice.status === "ready" && body.voice_settings) {
			await checkVoiceCanHonour(env, voice, { pitch_shift: "same_octave", voice_settings: body.voice_settings });
		}
		const engineParams =
			body.voice_settings === undefined ? undefined : { ...voice.engineParams, ...body.voice_settings };
		try {
			await updateVoiceFields(
				env,
				voice.id,
				{
					...(body.name !== undefined ? { name: body.name } : {}),
					...(body.tags !== undefined ? { tags: [...new Set(body.tags)] } : {}),
					...(body.description !== undefined ? { description: body.description } : {}),
					...(engineParams ? { engineParams } : {}),
				},
				nowIso(),
			);
		} catch (error) {
			if (isUniqueViolation(error)) {
				throw voiceNameTaken(body.name ?? "");
			}
			throw error;
		}
		const updated = await findOwnVoice(env, auth.accountId, voice.id);
		if (!updated) throw notFound("Voice model");
		const files = await findVoiceFiles(env, [voice.id]);
		return ok(await presentAccountVoice(env, publicOrigin(env, request.url), updated, files));
	},
});
