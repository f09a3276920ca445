import type { z } from "zod";
import { envelope, IdParams } from "../../contracts/common.ts";
import { AccountVoice, UpdateVoiceBody } from "../../contracts/voices.ts";
import { isUniqueViolation, nowIso } from "../../db/client.ts";
import { conflict, notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { presentAccountVoice } from "../../voices/present-voice.ts";
import { checkVoiceCanHonour } from "../../voices/voice-capabilities.ts";
import {
	accountVoiceNameTaken,
	findOwnVoice,
	findVoiceFiles,
	updateVoiceFields,
	VOICE_WRITE_ROUNDS,
} from "../../voices/voice-store.ts";
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
		409: {
			description:
				"`voice_name_taken`: another of your voices has this name; `voice_changing`: the voice kept changing under this change (send it again)",
		},
	},
	async handler({ env, request, auth, params, body }) {
		let voice = await changeVoice(env, auth.accountId, params.id, body);
		for (let round = 1; !voice.changed && round < VOICE_WRITE_ROUNDS; round++) {
			voice = await changeVoice(env, auth.accountId, params.id, body);
		}
		if (!voice.changed)
			throw conflict("voice_changing", "The voice kept changing while this change was made; send it again");
		const updated = await findOwnVoice(env, auth.accountId, voice.id);
		if (!updated) throw notFound("Voice model");
		const files = await findVoiceFiles(env, [voice.id]);
		return ok(await presentAccountVoice(env, publicOrigin(env, request.url), updated, files));
	},
});

/**
 * Decides the change from the voice as read and writes it only onto that version: a validation that ended between
 * the read and the write (the voice now `ready`, its engine parameters holding the model's facts) makes the write
 * miss, and the change is decided again (checked as a ready voice's, merged into the new parameters).
 */
async function changeVoice(
	env: Env,
	accountId: string,
	id: string,
	body: z.infer<typeof UpdateVoiceBody>,
): Promise<{ id: string; changed: boolean }> {
	const voice = await findOwnVoice(env, accountId, id);
	if (!voice) throw notFound("Voice model");
	if (body.name !== undefined && (await accountVoiceNameTaken(env, accountId, body.name, voice.id))) {
		throw voiceNameTaken(body.name);
	}
	// A validated voice's new defaults must be ones it can honour (before validation, validation checks them).
	if (voice.status === "ready" && body.voice_settings) {
		await checkVoiceCanHonour(env, voice, { pitch_shift: "same_octave", voice_settings: body.voice_settings });
	}
	const engineParams =
		body.voice_settings === undefined ? undefined : { ...voice.engineParams, ...body.voice_settings };
	try {
		const changed = await updateVoiceFields(
			env,
			voice,
			{
				...(body.name !== undefined ? { name: body.name } : {}),
				...(body.tags !== undefined ? { tags: [...new Set(body.tags)] } : {}),
				...(body.description !== undefined ? { description: body.description } : {}),
				...(engineParams ? { engineParams } : {}),
			},
			nowIso(),
		);
		return { id: voice.id, changed };
	} catch (error) {
		if (isUniqueViolation(error)) throw voiceNameTaken(body.name ?? "");
		throw error;
	}
}
