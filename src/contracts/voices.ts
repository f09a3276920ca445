/**
 * Voice models: the spec's shape (section 4) and the additions for account-owned voices (issue 15). A service voice
 * keeps exactly the spec's fields and gains `owner` and `status`; an account's voice also carries its description,
 * default settings, files and, when validation failed, why.
 */
import { z } from "zod";
import { CONTROL_CHARACTERS } from "./audio-files.ts";
import { Id, Timestamp } from "./common.ts";
import { VoiceSettings } from "./voice-conversions.ts";

export const VOICE_OWNERS = ["service", "account"] as const;
export const VOICE_STATUS_VALUES = ["awaiting_upload", "validating", "ready", "failed"] as const;
export const VOICE_FILE_ROLE_VALUES = ["model", "index", "image", "sample"] as const;
export type VoiceFileRoleName = (typeof VOICE_FILE_ROLE_VALUES)[number];

const MB = 1_000_000;

/** Limits on account voices, enforced by the API (and documented in OpenAPI and the README). */
export const VOICE_LIMITS = {
	/** Voices an account may hold at once (deleted ones do not count). */
	voicesPerAccount: 50,
	/** Largest file of each role, in bytes. */
	maxBytes: { model: 200 * MB, index: 1000 * MB, image: 10 * MB, sample: 50 * MB },
	/** Files up to this size go up with one signed PUT; larger ones in parts. */
	singleUploadBytes: 100 * MB,
	maxNameLength: 100,
	maxDescriptionLength: 1000,
	maxTags: 20,
	maxTagLength: 50,
} as const satisfies { maxBytes: Record<VoiceFileRoleName, number> } & Record<string, unknown>;

/** What each role accepts, as recognised from the bytes (names never decide). */
export const VOICE_FILE_KINDS = {
	model: ["rvc_checkpoint", "onnx"],
	index: ["faiss_index"],
	image: ["png", "jpeg", "webp"],
	sample: ["wav", "mp3", "flac"],
} as const satisfies Record<VoiceFileRoleName, readonly string[]>;

export const VOICE_FILE_DESCRIPTIONS: Record<VoiceFileRoleName, string> = {
	model: "an RVC checkpoint (.pth) or an RVC synthesizer exported to ONNX",
	index: "a faiss feature index (.index) as RVC's training writes it",
	image: "a PNG, JPEG or WebP image",
	sample: "a WAV, MP3 or FLAC recording",
};

export const VoiceModel = z.object({
	id: Id,
	name: z.string(),
	tags: z.array(z.string()),
	/** Time-limited pre-signed address of the voice's image; null if the voice has none. */
	image_url: z.url().nullable(),
	/** Time-limited pre-signed address of an audio sample; null if the voice has none. */
	song_url: z.url().nullable(),
	/** `service`: offered to every account; `account`: uploaded by, and visible to, the caller's account only. */
	owner: z.enum(VOICE_OWNERS),
	/** Only `ready` voices convert. Service voices are always `ready`. */
	status: z.enum(VOICE_STATUS_VALUES),
});
export type VoiceModel = z.infer<typeof VoiceModel>;

export const VoiceFileStatus = z.object({
	file_name: z.string(),
	size_bytes: z.number().int(),
	upload_status: z.enum(["awaiting_upload", "uploaded"]),
	/** What the bytes were recognised as once uploaded (`rvc_checkpoint`, `onnx`, `faiss_index`, `png`, `wav`, ...). */
	kind: z.string().nullable(),
	/** Set by validation. */
	sha256: z.string().nullable(),
});

export const AccountVoice = VoiceModel.extend({
	description: z.string().nullable(),
	/** The defaults every conversion with this voice starts from (a conversion's `voice_settings` override them). */
	voice_settings: VoiceSettings,
	/** Why validation failed; null otherwise. */
	error_message: z.string().nullable(),
	/** The voice's typical pitch range, measured from its sample by validation (used by `pitch_shift: "auto"`). */
	pitch_range_hz: z.object({ low: z.number(), high: z.number() }).nullable(),
	files: z.partialRecord(z.enum(VOICE_FILE_ROLE_VALUES), VoiceFileStatus),
	created_at: Timestamp,
	updated_at: Timestamp,
});
export type AccountVoice = z.infer<typeof AccountVoice>;

/** Names, tags and file names are shown in lists (names also matched by the CLI): no control characters (NUL, newlines, escapes). */
const printable = <T extends z.ZodString>(text: T) =>
	text.refine((value) => !CONTROL_CHARACTERS.test(value), "must not contain control characters");

const FileDeclaration = (role: VoiceFileRoleName) =>
	z.strictObject({
		file_name: printable(z.string().trim().min(1).max(255)),
		size_bytes: z
			.number()
			.int()
			.positive({ error: `must be at least 1 byte: the ${role} file is empty` })
			.max(VOICE_LIMITS.maxBytes[role], {
				error: `must be at most ${VOICE_LIMITS.maxBytes[role]} bytes (${VOICE_LIMITS.maxBytes[role] / MB} MB) for the ${role} file`,
			}),
	});

/**
 * Stored in Unicode's composed form (NFC), so that a name is unique among the account's voices however its accents
 * were typed ("Zoë" as one code point, or as "e" and a combining diaeresis, as macOS file names have it).
 */
const Name = printable(z.string().trim().normalize("NFC").min(1).max(VOICE_LIMITS.maxNameLength)).meta({
	description:
		'Unique among your voices (409 `voice_name_taken`). Stored in Unicode\'s composed form (NFC): a name typed with decomposed accents ("Zoe" and a combining diaeresis) is the same name as "Zoë", and is answered composed.',
});
const Tags = z.array(printable(z.string().trim().min(1).max(VOICE_LIMITS.maxTagLength))).max(VOICE_LIMITS.maxTags);
const Description = z.string().max(VOICE_LIMITS.maxDescriptionLength);

export const CreateVoiceBody = z.strictObject({
	name: Name,
	tags: Tags.default([]),
	description: Description.optional(),
	/** null is accepted as none, as a conversion takes it. */
	voice_settings: VoiceSettings.nullable().optional(),
	files: z.strictObject({
		model: FileDeclaration("model"),
		index: FileDeclaration("index").optional(),
		image: FileDeclaration("image").optional(),
		sample: FileDeclaration("sample").optional(),
	}),
});
export type CreateVoiceBody = z.infer<typeof CreateVoiceBody>;

export const UpdateVoiceBody = z
	.strictObject({
		name: Name.optional(),
		tags: Tags.optional(),
		description: Description.nullable().optional(),
		voice_settings: VoiceSettings.optional(),
	})
	.refine((body) => Object.values(body).some((value) => value !== undefined), {
		error: "name at least one of name, tags, description, voice_settings",
	});

/** A file up to `singleUploadBytes`: one signed PUT (any Content-Type), valid 30 minutes. */
export const SingleUpload = z.object({
	method: z.literal("PUT"),
	upload_url: z.url(),
	upload_url_expires_at: Timestamp,
});

/**
 * A larger file: PUT each part (every one `part_size_bytes` but the last) to its signed address, then POST
 * `complete_url` (bearer token). No request exceeds the single-upload limit.
 */
export const PartsUpload = z.object({
	method: z.literal("parts"),
	part_size_bytes: z.number().int().positive(),
	parts: z.array(z.object({ part_number: z.number().int().min(1), upload_url: z.url() })),
	upload_url_expires_at: Timestamp,
	complete_url: z.url(),
});

export const VoiceUpload = z.discriminatedUnion("method", [SingleUpload, PartsUpload]);
export type VoiceUpload = z.infer<typeof VoiceUpload>;

export const CreatedVoice = AccountVoice.extend({
	uploads: z.partialRecord(z.enum(VOICE_FILE_ROLE_VALUES), VoiceUpload),
});

export const VoiceListQuery = z.object({
	owner: z.enum(VOICE_OWNERS).optional(),
	status: z.enum(VOICE_STATUS_VALUES).optional(),
});

export const VoiceFileParams = z.object({ id: Id, role: z.enum(VOICE_FILE_ROLE_VALUES) });

/** Event payload data for `voice.ready` and `voice.failed`. */
export const VOICE_EVENT_FIELDS = ["id", "name", "status", "error_message", "created_at", "updated_at"] as const;
