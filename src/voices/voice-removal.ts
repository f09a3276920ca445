/**
 * Files of deleted account voices leave storage once no conversion still needs them: at deletion when none is
 * running, else from the cron safety net after the last one ended.
 */
import { nowIso } from "../db/client.ts";
import {
	deletedVoicesWithFiles,
	findVoiceById,
	findVoiceFiles,
	markVoiceFilesRemoved,
	voiceHasRunningConversions,
} from "./voice-store.ts";
import { removeVoiceObjects } from "./voice-uploads.ts";

/** True when the files are gone (now or before); false while a conversion still runs with them. */
export async function removeDeletedVoiceFiles(env: Env, voiceId: string): Promise<boolean> {
	const voice = await findVoiceById(env, voiceId);
	if (!voice?.deletedAt || !voice.accountId) return false;
	if (voice.filesRemovedAt) return true;
	if (await voiceHasRunningConversions(env, voiceId)) return false;
	await removeVoiceObjects(env, await findVoiceFiles(env, [voiceId]));
	await markVoiceFilesRemoved(env, voiceId, nowIso());
	return true;
}

/** The safety net's pass: removes what deletions had to leave behind. Returns how many voices it cleared. */
export async function removeFilesOfDeletedVoices(env: Env, limit: number): Promise<number> {
	let removed = 0;
	for (const id of await deletedVoicesWithFiles(env, limit)) {
		if (await removeDeletedVoiceFiles(env, id)) removed++;
	}
	return removed;
}
