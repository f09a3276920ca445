/**
 * How an account's voice files reach R2. A file up to `VOICE_LIMITS.singleUploadBytes` goes up with one signed PUT;
 * a larger one (indexes often are) through an R2 multipart upload made when the voice is created: each part has its
 * own signed PUT address (`account-voice-parts/{voice}/{role}/{n}`, handled by the upload hook below, never stored as
 * an object of its own), and the account completes the file with one authenticated call. Either way no request
 * exceeds the single-upload limit; each body's length is checked against the declared size before a byte is kept,
 * and each file's first bytes against its role before it counts as uploaded. When the last declared file is in, validation starts (`voice-validation.ts`). Each file's addresses carry
 * its upload generation, raised when they are regenerated, so only the newest addresses upload.
 */
import { and, asc, eq, sql } from "drizzle-orm";
import { VOICE_FILE_HEAD_BYTES, voiceFileKindFor } from "../contracts/voice-file-kinds.ts";
import { VOICE_FILE_DESCRIPTIONS, VOICE_LIMITS, type VoiceUpload } from "../contracts/voices.ts";
import { isNoSuchUpload, outputPartBytes } from "../conversions/outputs.ts";
import { database, nowIso } from "../db/client.ts";
import { VOICE_FILE_ROLES, type VoiceFileRole, voiceFileParts, voiceFiles, voices } from "../db/schema.ts";
import { ApiError, conflict, forbidden } from "../http/errors.ts";
import { storeWithLength } from "../http/request-body.ts";
import { ok } from "../http/respond.ts";
import { type StorageGrant, signStorageUrl } from "../storage/signed-url.ts";
import { deleteObjectsUnder } from "../storage/staged-uploads.ts";
import type { VoiceFileRow } from "./voice-store.ts";
import { startValidation } from "./voice-validation.ts";

export const VOICE_FILE_KEY_PREFIX = "account-voices/";
export const VOICE_PART_KEY_PREFIX = "account-voice-parts/";
/** Upload addresses of voice files, like those of audio files, stay valid 30 minutes. */
export const VOICE_UPLOAD_URL_SECONDS = 30 * 60;

export const voiceFileObjectKey = (voiceId: string, role: VoiceFileRole) =>
	`${VOICE_FILE_KEY_PREFIX}${voiceId}/${role}`;
const partKey = (voiceId: string, role: VoiceFileRole, partNumber: number) =>
	`${VOICE_PART_KEY_PREFIX}${voiceId}/${role}/${partNumber}`;

/**
 * The part size for multipart voice files: the deployment's output part size (`OUTPUT_PART_BYTES`, within R2's
 * 5 MiB minimum and under the zone's 100 MB request limit), so both kinds of multipart upload behave alike.
 */
export const voicePartBytes = (env: Pick<Env, "OUTPUT_PART_BYTES">) => outputPartBytes(env);

/** The size at or under which a file goes up in one PUT: `VOICE_SINGLE_UPLOAD_BYTES` (tests lower it), else 100 MB. */
export function singleUploadBytes(env: Env): number {
	const configured = Number(env.VOICE_SINGLE_UPLOAD_BYTES);
	return Number.isInteger(configured) && configured > 0
		? Math.min(configured, VOICE_LIMITS.singleUploadBytes)
		: VOICE_LIMITS.singleUploadBytes;
}

/** Parses `{voice}/{role}` or `{voice}/{role}/{n}` after a prefix; null for anything else. */
function parseKey(key: string, prefix: string, withPart: boolean) {
	if (!key.startsWith(prefix)) return null;
	const parts = key.slice(prefix.length).split("/");
	if (parts.length !== (withPart ? 3 : 2)) return null;
	const [voiceId = "", role = "", part] = parts;
	if (!(VOICE_FILE_ROLES as readonly string[]).includes(role)) return null;
	const partNumber = withPart ? Number(part) : 0;
	if (withPart && !(Number.isInteger(partNumber) && partNumber >= 1 && partNumber <= 10_000)) return null;
	return { voiceId, role: role as VoiceFileRole, partNumber };
}

/** How many parts a file of `declaredBytes` goes up in: parts of `partBytes`, the last one the rest. */
const partCount = (declaredBytes: number, partBytes: number) => Math.max(1, Math.ceil(declaredBytes / partBytes));

/** The length part `n` (of `partCount`) must have for the file to be its declared size. */
const expectedPartBytes = (declaredBytes: number, partBytes: number, n: number) =>
	n < partCount(declaredBytes, partBytes) ? partBytes : declaredBytes - (n - 1) * partBytes;

/**
 * A body of another length than the declared file's (or than its part's share of it): refused before any byte is
 * kept, since a file of another size is not the file declared. The declared size decided the upload plan (one PUT or
 * parts), so a file that really has another size needs a voice created again with it.
 */
function sizeMismatch(file: VoiceFileRow, length: number, partNumber?: number): ApiError {
	const fix =
		"upload the declared file to the same address, or, if this is the right file, delete the voice and create it again declaring the file's real size";
	if (partNumber === undefined) {
		return new ApiError(
			400,
			"voice_file_size_mismatch",
			`The ${file.role} file has ${length} bytes, but the voice declared size_bytes ${file.declaredSizeBytes} for it; nothing was kept. To go on, ${fix}.`,
		);
	}
	const expected = expectedPartBytes(file.declaredSizeBytes, file.partSizeBytes ?? 1, partNumber);
	return new ApiError(
		400,
		"voice_file_size_mismatch",
		`Part ${partNumber} of the ${file.role} file must have ${expected} bytes (size_bytes ${file.declaredSizeBytes} in parts of ${file.partSizeBytes}); this one has ${length}, and nothing of it was kept. To go on, ${fix}.`,
	);
}

/** The declared files' storage plan: which go up in parts (a multipart upload is made for each now). */
export async function prepareVoiceFiles(
	env: Env,
	voiceId: string,
	declared: Partial<Record<VoiceFileRole, { file_name: string; size_bytes: number }>>,
) {
	const single = singleUploadBytes(env);
	const partSize = voicePartBytes(env);
	const files = [];
	for (const role of VOICE_FILE_ROLES) {
		const file = declared[role];
		if (!file) continue;
		const objectKey = voiceFileObjectKey(voiceId, role);
		const inParts = file.size_bytes > single;
		const upload = inParts ? await env.BUCKET.createMultipartUpload(objectKey) : null;
		files.push({
			role,
			fileName: file.file_name,
			declaredSizeBytes: file.size_bytes,
			objectKey,
			uploadStatus: "awaiting_upload" as const,
			multipartUploadId: upload?.uploadId ?? null,
			partSizeBytes: upload ? partSize : null,
		});
	}
	return files;
}

/**
 * Raises the upload generation of the voice's files still awaiting upload, retiring every address handed out for
 * them before (even one signed in the same second). Parts already received stay.
 */
export async function retireUploadAddresses(env: Pick<Env, "DB">, voiceId: string): Promise<void> {
	await database(env)
		.update(voiceFiles)
		.set({ uploadGeneration: sql`${voiceFiles.uploadGeneration} + 1` })
		.where(and(eq(voiceFiles.voiceId, voiceId), eq(voiceFiles.uploadStatus, "awaiting_upload")));
}

/** Upload addresses of the files still awaiting upload, signed with each file's current generation. */
export async function uploadAddresses(
	env: Env,
	origin: string,
	files: readonly VoiceFileRow[],
	now = new Date(),
): Promise<Partial<Record<VoiceFileRole, VoiceUpload>>> {
	const expiresAt = new Date(now.getTime() + VOICE_UPLOAD_URL_SECONDS * 1000);
	const single = singleUploadBytes(env);
	const uploads: Partial<Record<VoiceFileRole, VoiceUpload>> = {};
	for (const file of files) {
		if (file.uploadStatus !== "awaiting_upload") continue;
		if (!file.multipartUploadId || !file.partSizeBytes) {
			uploads[file.role] = {
				method: "PUT",
				upload_url: await signStorageUrl(env, origin, {
					method: "PUT",
					key: file.objectKey,
					expiresAt,
					maxBytes: Math.min(single, VOICE_LIMITS.maxBytes[file.role]) + 1,
					generation: file.uploadGeneration,
				}),
				upload_url_expires_at: expiresAt.toISOString(),
			};
			continue;
		}
		const count = partCount(file.declaredSizeBytes, file.partSizeBytes);
		const parts = [];
		for (let n = 1; n <= count; n++) {
			parts.push({
				part_number: n,
				upload_url: await signStorageUrl(env, origin, {
					method: "PUT",
					key: partKey(file.voiceId, file.role, n),
					expiresAt,
					maxBytes: file.partSizeBytes + 1,
					generation: file.uploadGeneration,
				}),
			});
		}
		uploads[file.role] = {
			method: "parts",
			part_size_bytes: file.partSizeBytes,
			parts,
			upload_url_expires_at: expiresAt.toISOString(),
			complete_url: `${origin}/api/v1/voices/${file.voiceId}/files/${file.role}/complete`,
		};
	}
	return uploads;
}

async function fileFor(env: Env, voiceId: string, role: VoiceFileRole) {
	const [row] = await database(env)
		.select({ file: voiceFiles, deletedAt: voices.deletedAt })
		.from(voiceFiles)
		.innerJoin(voices, eq(voices.id, voiceFiles.voiceId))
		.where(and(eq(voiceFiles.voiceId, voiceId), eq(voiceFiles.role, role)));
	if (!row) throw new ApiError(404, "not_found", "No voice file is registered for this upload address");
	if (row.deletedAt) throw new ApiError(410, "voice_deleted", "This voice was deleted; its files cannot be uploaded");
	if (row.file.uploadStatus !== "awaiting_upload") {
		throw conflict(
			"already_uploaded",
			`The ${role} file of this voice is already uploaded; its bytes cannot be replaced`,
		);
	}
	return row.file;
}

const supersededAddress = () =>
	forbidden(
		"upload_url_superseded",
		"This upload address was replaced by a newer one (POST /api/v1/voices/{id}/upload-urls); upload to the file's current address",
	);

/** Refuses an address whose generation is no longer the file's (regenerated since it was signed). */
function requireCurrentAddress(file: VoiceFileRow, grant: StorageGrant): void {
	if ((grant.generation ?? 0) !== file.uploadGeneration) throw supersededAddress();
}

const unrecognised = (role: VoiceFileRole) =>
	new ApiError(
		415,
		"voice_file_unrecognised",
		`The ${role} file is not ${VOICE_FILE_DESCRIPTIONS[role]} (recognised by its bytes, not its name); nothing was kept. Upload the right file to the same address.`,
	);

/**
 * Checks the stored object's first bytes against the role and marks the file uploaded, with `object` as its bytes;
 * the object goes if wrong. With `generation` (a single PUT, whose object is its own: `stagedUploadKey`), only while
 * that is still the file's generation, and the object goes if another upload was taken first.
 */
async function acceptStoredFile(env: Env, file: VoiceFileRow, object: R2Object, generation?: number): Promise<void> {
	const head = await env.BUCKET.get(object.key, { range: { offset: 0, length: VOICE_FILE_HEAD_BYTES } });
	const bytes = head ? new Uint8Array(await head.arrayBuffer()) : new Uint8Array(0);
	const kind = voiceFileKindFor(file.role, bytes);
	if (!kind) {
		await env.BUCKET.delete(object.key);
		throw unrecognised(file.role);
	}
	if (object.size > VOICE_LIMITS.maxBytes[file.role]) {
		await env.BUCKET.delete(object.key);
		throw new ApiError(
			413,
			"payload_too_large",
			`The ${file.role} file must be at most ${VOICE_LIMITS.maxBytes[file.role]} bytes`,
		);
	}
	const now = nowIso();
	const marked = await database(env)
		.update(voiceFiles)
		.set({ objectKey: object.key, uploadStatus: "uploaded", kind, sizeBytes: object.size, uploadedAt: now })
		.where(
			and(
				eq(voiceFiles.voiceId, file.voiceId),
				eq(voiceFiles.role, file.role),
				eq(voiceFiles.uploadStatus, "awaiting_upload"),
				generation === undefined ? undefined : eq(voiceFiles.uploadGeneration, generation),
			),
		)
		.returning({ role: voiceFiles.role });
	if (marked.length === 0) {
		// A single PUT's own object, not taken: regenerated while these bytes streamed in, or another upload won.
		if (object.key !== file.objectKey) await env.BUCKET.delete(object.key);
		const current = await fileFor(env, file.voiceId, file.role);
		if (generation !== undefined && current.uploadGeneration !== generation) throw supersededAddress();
		throw conflict("already_uploaded", `The ${file.role} file of this voice is already uploaded`);
	}
	await startValidationWhenComplete(env, file.voiceId);
}

/** Starts validation once every declared file of the voice is uploaded (and the voice still waits for them). */
async function startValidationWhenComplete(env: Env, voiceId: string): Promise<void> {
	const rows = await database(env)
		.select({ status: voiceFiles.uploadStatus })
		.from(voiceFiles)
		.where(eq(voiceFiles.voiceId, voiceId));
	if (rows.every((row) => row.status === "uploaded")) await startValidation(env, voiceId);
}

export async function beforeVoiceFileUpload(env: Env, grant: StorageGrant, length: number): Promise<void> {
	const key = parseKey(grant.key, VOICE_FILE_KEY_PREFIX, false);
	if (!key) throw new ApiError(404, "not_found", "No voice file is registered for this upload address");
	const file = await fileFor(env, key.voiceId, key.role);
	if (file.multipartUploadId) {
		throw new ApiError(404, "not_found", "This voice file goes up in parts; use its part addresses");
	}
	requireCurrentAddress(file, grant);
	if (length !== file.declaredSizeBytes) throw sizeMismatch(file, length);
}

/**
 * Why a single PUT of a voice file is too large, and what to do: over the role's limit the file cannot be used at
 * all; under it, the file was declared smaller than it is (its size decided one PUT rather than parts), so the
 * voice must be created again with the file's real size, which gets it part addresses.
 */
export function voiceFileTooLarge(grant: StorageGrant, declaredBytes: number): string {
	const role = parseKey(grant.key, VOICE_FILE_KEY_PREFIX, false)?.role;
	if (!role) return `Uploads must be smaller than ${grant.maxBytes} bytes`;
	const limit = VOICE_LIMITS.maxBytes[role];
	if (declaredBytes > limit) return `The ${role} file must be at most ${limit} bytes; this one has ${declaredBytes}`;
	return `This ${role} file (${declaredBytes} bytes) is larger than its declared size_bytes, and this address takes one PUT of less than ${grant.maxBytes} bytes. Delete the voice and create it again declaring the file's real size: a file of ${(grant.maxBytes ?? 1) - 1} bytes or more goes up in parts.`;
}

export async function afterVoiceFileUpload(env: Env, grant: StorageGrant, object: R2Object): Promise<void> {
	const key = parseKey(grant.key, VOICE_FILE_KEY_PREFIX, false);
	let file: VoiceFileRow;
	try {
		if (!key) throw new ApiError(404, "not_found", "No voice file is registered for this upload address");
		file = await fileFor(env, key.voiceId, key.role);
		requireCurrentAddress(file, grant);
	} catch (error) {
		// Deleted, uploaded by another request, or regenerated while these bytes streamed in: they are not the file's.
		await env.BUCKET.delete(object.key);
		throw error;
	}
	await acceptStoredFile(env, file, object, file.uploadGeneration);
}

/** A part's PUT: streamed into the file's multipart upload; its etag is kept for the completing call. */
export async function storeVoiceFilePart(
	env: Env,
	grant: StorageGrant,
	request: Request,
	length: number,
): Promise<Response> {
	const key = parseKey(grant.key, VOICE_PART_KEY_PREFIX, true);
	if (!key) throw new ApiError(404, "not_found", "No voice file is registered for this upload address");
	const file = await fileFor(env, key.voiceId, key.role);
	if (!file.multipartUploadId || !file.partSizeBytes) {
		throw new ApiError(404, "not_found", "This voice file goes up in one PUT; use its upload_url");
	}
	requireCurrentAddress(file, grant);
	if (length === 0) throw new ApiError(400, "empty_part", "A part must not be empty");
	const count = partCount(file.declaredSizeBytes, file.partSizeBytes);
	if (key.partNumber > count) {
		throw new ApiError(
			404,
			"not_found",
			`The ${file.role} file goes up in ${count} parts; there is no part ${key.partNumber}`,
		);
	}
	if (length !== expectedPartBytes(file.declaredSizeBytes, file.partSizeBytes, key.partNumber)) {
		throw sizeMismatch(file, length, key.partNumber);
	}
	const upload = env.BUCKET.resumeMultipartUpload(file.objectKey, file.multipartUploadId);
	const stored = await storeWithLength(request, length, (body) => upload.uploadPart(key.partNumber, body));
	if (!stored.ok) {
		// The voice deleted (its upload aborted) or the file completed meanwhile: that (410, 409), not a resend.
		await fileFor(env, key.voiceId, key.role);
		// Restarted only from the upload that was found gone (another request may have restarted it already).
		if (isNoSuchUpload(stored.error)) throw await uploadExpired(env, file);
		throw new ApiError(400, "upload_incomplete", "The part's body did not match its Content-Length; send it again");
	}
	const part = { partNumber: key.partNumber, etag: stored.value.etag, sizeBytes: length };
	await database(env)
		.insert(voiceFileParts)
		.values({ voiceId: file.voiceId, role: file.role, ...part })
		.onConflictDoUpdate({
			target: [voiceFileParts.voiceId, voiceFileParts.role, voiceFileParts.partNumber],
			set: { etag: part.etag, sizeBytes: part.sizeBytes },
		});
	return ok({ part_number: part.partNumber, etag: part.etag });
}

/**
 * Assembles a multipart file from the parts received: every part from 1 to the last must be there, each but the
 * last exactly the part size. Then the bytes are checked like a single upload's.
 */
export async function completeVoiceFileParts(env: Env, voiceId: string, role: VoiceFileRole): Promise<void> {
	const file = await fileFor(env, voiceId, role);
	if (!file.multipartUploadId || !file.partSizeBytes) {
		throw new ApiError(400, "invalid_parts", `The ${role} file goes up in one PUT; there are no parts to complete`);
	}
	const parts = await database(env)
		.select()
		.from(voiceFileParts)
		.where(and(eq(voiceFileParts.voiceId, voiceId), eq(voiceFileParts.role, role)))
		.orderBy(asc(voiceFileParts.partNumber));
	const problem = partsProblem(parts, file.declaredSizeBytes, file.partSizeBytes);
	if (problem) throw new ApiError(400, "invalid_parts", `The ${role} file's parts are not complete: ${problem}`);
	const upload = env.BUCKET.resumeMultipartUpload(file.objectKey, file.multipartUploadId);
	let object: R2Object;
	try {
		object = await upload.complete(parts.map((p) => ({ partNumber: p.partNumber, etag: p.etag })));
	} catch (error) {
		if (isNoSuchUpload(error)) throw await uploadExpired(env, file);
		throw new ApiError(400, "invalid_parts", `The parts do not make a complete file: ${(error as Error).message}`);
	}
	try {
		await acceptStoredFile(env, file, object);
	} catch (error) {
		// Refused for its bytes (415) or its size (413): completing used the multipart upload up, so a new one takes
		// the file's parts, sent again to the same addresses.
		if (error instanceof ApiError && (error.status === 415 || error.status === 413)) {
			await restartParts(env, file);
		}
		throw error;
	}
}

/**
 * A fresh multipart upload for a file whose completed parts were refused: the part rows go (every part is sent
 * again), and the part addresses stay valid (they name the voice, role and part, not the upload).
 */
async function restartParts(env: Env, file: VoiceFileRow): Promise<void> {
	const upload = await env.BUCKET.createMultipartUpload(file.objectKey);
	const restarted = await database(env)
		.update(voiceFiles)
		.set({ multipartUploadId: upload.uploadId })
		.where(
			and(
				eq(voiceFiles.voiceId, file.voiceId),
				eq(voiceFiles.role, file.role),
				eq(voiceFiles.uploadStatus, "awaiting_upload"),
				eq(voiceFiles.multipartUploadId, file.multipartUploadId ?? ""),
			),
		)
		.returning({ role: voiceFiles.role });
	if (restarted.length === 0) {
		await upload.abort();
		return;
	}
	await database(env)
		.delete(voiceFileParts)
		.where(and(eq(voiceFileParts.voiceId, file.voiceId), eq(voiceFileParts.role, file.role)));
}

/**
 * R2 drops a multipart upload left unfinished for 7 days, with every part sent to it: the file's parts then have
 * nowhere to go and completing finds nothing. A new multipart upload takes the file's parts from the start (its
 * part addresses stay valid), and the client is told to send them all again.
 */
async function uploadExpired(env: Env, file: VoiceFileRow): Promise<ApiError> {
	await restartParts(env, file);
	// Gone because another request completed it (409) or the voice was deleted (410): that, not a restart.
	await fileFor(env, file.voiceId, file.role);
	return conflict(
		"voice_file_upload_expired",
		`The ${file.role} file's upload was left unfinished too long and storage dropped it, with the parts sent before; it starts again: send every part again (the same addresses, or new ones from POST /api/v1/voices/{id}/upload-urls once they expire), then complete.`,
	);
}

/** What keeps the parts received from making the declared file: a part missing, or one of another length. */
function partsProblem(
	parts: { partNumber: number; sizeBytes: number }[],
	declaredBytes: number,
	partSize: number,
): string | null {
	if (parts.length === 0) return "no part was uploaded";
	const count = partCount(declaredBytes, partSize);
	for (let n = 1; n <= count; n++) {
		const part = parts[n - 1];
		if (part?.partNumber !== n) return `part ${n} is missing`;
		const expected = expectedPartBytes(declaredBytes, partSize, n);
		if (part.sizeBytes !== expected) {
			return `part ${n} has ${part.sizeBytes} bytes; it must have ${expected} (size_bytes ${declaredBytes} in parts of ${partSize})`;
		}
	}
	return null;
}

/**
 * Removes every stored file of a voice (and abandons unfinished multipart uploads): every object under the voice's
 * key, so also any upload the database never took (`deleteObjectsUnder`).
 */
export async function removeVoiceObjects(env: Env, files: readonly VoiceFileRow[]): Promise<void> {
	for (const file of files) {
		if (file.multipartUploadId && file.uploadStatus === "awaiting_upload") {
			await env.BUCKET.resumeMultipartUpload(file.objectKey, file.multipartUploadId)
				.abort()
				.catch(() => undefined);
		}
	}
	for (const voiceId of new Set(files.map((file) => file.voiceId))) {
		await deleteObjectsUnder(env, `${VOICE_FILE_KEY_PREFIX}${voiceId}/`);
	}
}
