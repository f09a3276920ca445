import { listAudioFiles } from "../../audio-files/audio-file-store.ts";
import { presentAudioFile } from "../../audio-files/present-audio-file.ts";
import { AudioFileList } from "../../contracts/audio-files.ts";
import { ListQuery } from "../../contracts/common.ts";
import { decodePageCursor, encodePageCursor } from "../../http/page-cursor.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";

export const listAudioFilesRoute = defineRoute({
	method: "GET",
	path: "/api/v1/audio-files",
	auth: "base",
	summary: "List your audio files, newest first",
	tags: ["Audio files"],
	query: ListQuery,
	responses: {
		200: { description: "One page of audio files and the cursor of the next page", schema: AudioFileList },
		400: { description: "Invalid limit or cursor" },
	},
	async handler({ env, request, auth, query }) {
		const after = query.cursor ? decodePageCursor(query.cursor) : null;
		const page = await listAudioFiles(env, auth.accountId, query.limit, after);
		const origin = publicOrigin(env, request.url);
		return Response.json({
			success: true,
			data: await Promise.all(page.rows.map((row) => presentAudioFile(env, origin, row))),
			next_cursor: page.next ? encodePageCursor(page.next) : null,
		});
	},
});
