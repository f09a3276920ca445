import { removeAudioFileObjects } from "../../audio-files/audio-file-removal.ts";
import { deleteAudioFile } from "../../audio-files/audio-file-store.ts";
import { DeletedAudioFile } from "../../contracts/audio-files.ts";
import { envelope, IdParams } from "../../contracts/common.ts";
import { cleanUpAfterDelete } from "../../http/cleanup-after-delete.ts";
import { conflict, notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";

export const deleteAudioFileRoute = defineRoute({
	method: "DELETE",
	path: "/api/v1/audio-files/{id}",
	auth: "base",
	summary: "Delete an audio file and its stored bytes",
	tags: ["Audio files"],
	params: IdParams,
	responses: {
		200: { description: "Deleted", schema: envelope(DeletedAudioFile) },
		404: { description: "No such audio file for this account" },
		409: { description: "A conversion that is not finished uses this file" },
	},
	async handler({ env, auth, params }) {
		const result = await deleteAudioFile(env, auth.accountId, params.id);
		if ("refused" in result) {
			if (result.refused === "not_found") throw notFound("Audio file");
			throw conflict(
				"audio_file_in_use",
				"This audio file is used by a voice conversion that has not finished; delete it once the conversion is completed or failed",
			);
		}
		// The deletion is recorded: removing the bytes is clean-up, and a failure of it is logged and finished by the
		// cron safety net, never answered as a failure (a retry would find nothing, and the bytes would stay).
		const subject = { kind: "audio file", idField: "audio_file_id", id: result.deleted.id };
		await cleanUpAfterDelete(subject, "its stored bytes were not removed; the safety net removes them", () =>
			removeAudioFileObjects(env, result.deleted),
		);
		return ok({ id: result.deleted.id, deleted: true });
	},
});
