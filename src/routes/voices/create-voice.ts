import { envelope } from "../../contracts/common.ts";
import { CreatedVoice, CreateVoiceBody, VOICE_LIMITS } from "../../contracts/voices.ts";
import { isUniqueViolation, nowIso } from "../../db/client.ts";
import { conflict } from "../../http/errors.ts";
import { IdempotencyHeaders } from "../../http/idempotency.ts";
import { created } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";
import { presentAccountVoice } from "../../voices/present-voice.ts";
import { accountVoiceNameTaken, findVoiceFiles, insertAccountVoice } from "../../voices/voice-store.ts";
import { prepareVoiceFiles, uploadAddresses } from "../../voices/voice-uploads.ts";

const MB = 1_000_000;

/** 409: another of the account's voices has this name (names are unique per account, in NFC). */
export const voiceNameTaken = (name: string) =>
	conflict("voice_name_taken", `You already have a voice named "${name}"; choose another name`);

export const createVoiceRoute = defineRoute({
	method: "POST",
	path: "/api/v1/voices",
	auth: "base",
	idempotent: true,
	summary: "Create your own voice from an RVC model, and get addresses to upload its files",
	tags: ["Voices"],
	body: CreateVoiceBody,
	headers: IdempotencyHeaders,
	responses: {
		201: {
			description:
				"The voice, `awaiting_upload`, with `uploads` by role. A file up to 100 MB gets one signed PUT address " +
				"(`method: PUT`, any Content-Type, valid 30 minutes); a larger one goes up in parts (`method: parts`): " +
				"PUT each part to its address, every part but the last exactly `part_size_bytes`, then POST " +
				"`complete_url`. Each file must have its declared `size_bytes` (a PUT or part of another length: 400 " +
				"`voice_file_size_mismatch`, nothing kept) and is checked by its bytes when it arrives (415 " +
				"`voice_file_unrecognised` otherwise). When every declared file is in, validation starts by itself (`status: validating`) and " +
				"ends `ready` or `failed` with `error_message`, announced by the `voice.ready` / `voice.failed` events.",
			schema: envelope(CreatedVoice),
		},
		400: {
			description:
				`Invalid request, naming the field. Limits: model ≤ ${VOICE_LIMITS.maxBytes.model / MB} MB (RVC .pth or ` +
				`synthesizer .onnx), index ≤ ${VOICE_LIMITS.maxBytes.index / MB} MB (faiss .index), image ≤ ` +
				`${VOICE_LIMITS.maxBytes.image / MB} MB (PNG, JPEG, WebP), sample ≤ ${VOICE_LIMITS.maxBytes.sample / MB} MB ` +
				"(WAV, MP3, FLAC)",
		},
		409: {
			description: `\`voice_limit_reached\` (at most ${VOICE_LIMITS.voicesPerAccount} voices per account), \`voice_name_taken\` (one of your voices has this name); Idempotency-Key reused with another body, or still in progress`,
		},
	},
	async handler({ env, request, auth, body }) {
		if (await accountVoiceNameTaken(env, auth.accountId, body.name)) throw voiceNameTaken(body.name);
		const id = crypto.randomUUID();
		const files = await prepareVoiceFiles(env, id, body.files);
		const abandonParts = () =>
			Promise.all(
				files.map((file) =>
					file.multipartUploadId
						? env.BUCKET.resumeMultipartUpload(file.objectKey, file.multipartUploadId).abort()
						: undefined,
				),
			);
		let voice: Awaited<ReturnType<typeof insertAccountVoice>>;
		try {
			voice = await insertAccountVoice(
				env,
				{
					id,
					accountId: auth.accountId,
					name: body.name,
					tags: [...new Set(body.tags)],
					description: body.description ?? null,
					voiceSettings: body.voice_settings ?? {},
					files,
				},
				nowIso(),
				VOICE_LIMITS.voicesPerAccount,
			);
		} catch (error) {
			await abandonParts();
			if (isUniqueViolation(error)) {
				throw voiceNameTaken(body.name);
			}
			throw error;
		}
		if (!voice) {
			await abandonParts();
			throw conflict(
				"voice_limit_reached",
				`An account may hold at most ${VOICE_LIMITS.voicesPerAccount} voices; delete one to create another`,
			);
		}
		const origin = publicOrigin(env, request.url);
		const rows = await findVoiceFiles(env, [id]);
		return created({
			...(await presentAccountVoice(env, origin, voice, rows)),
			uploads: await uploadAddresses(env, origin, rows),
		});
	},
});
