import { z } from "zod";
import { envelope, IdParams } from "../../contracts/common.ts";
import { jobBroker } from "../../conversions/job-broker-client.ts";
import { nowIso } from "../../db/client.ts";
import { cleanUpAfterDelete } from "../../http/cleanup-after-delete.ts";
import { notFound } from "../../http/errors.ts";
import { ok } from "../../http/respond.ts";
import { defineRoute } from "../../http/route.ts";
import { removeDeletedVoiceFiles } from "../../voices/voice-removal.ts";
import { findOwnVoice, markVoiceDeleted } from "../../voices/voice-store.ts";

export const deleteVoiceRoute = defineRoute({
	method: "DELETE",
	path: "/api/v1/voices/{id}",
	auth: "base",
	summary: "Delete one of your voices",
	tags: ["Voices"],
	params: IdParams,
	responses: {
		200: {
			description:
				"Deleted: new conversions with it are refused (404) at once; conversions already accepted finish with it, " +
				"and its files are removed from storage once none is left",
			schema: envelope(z.object({ id: z.uuid(), deleted: z.literal(true) })),
		},
		404: { description: "No such voice among yours" },
	},
	async handler({ env, auth, params }) {
		const voice = await findOwnVoice(env, auth.accountId, params.id);
		if (!voice || !(await markVoiceDeleted(env, voice.id, nowIso()))) throw notFound("Voice model");
		// The deletion is recorded: what follows is clean-up, and a failure of it is logged and finished later, never
		// answered as a failure (a retry would find nothing). A validation still waiting or running has nothing left to
		// decide: a job the broker kept is dropped when a runner is handed it. Files left are the cron safety net's.
		const subject = { kind: "voice", idField: "voice_id", id: voice.id };
		if (voice.status === "validating") {
			await cleanUpAfterDelete(subject, "its validation job was not dropped", () => jobBroker(env).discard([voice.id]));
		}
		await cleanUpAfterDelete(subject, "its files were not removed; the safety net removes them", () =>
			removeDeletedVoiceFiles(env, voice.id),
		);
		return ok({ id: voice.id, deleted: true });
	},
});
