import { z } from "zod";
import { listAudioFiles, type PageCursor } from "../../audio-files/audio-file-store.ts";
import { presentAudioFile } from "../../audio-files/present-audio-file.ts";
import { AudioFileList } from "../../contracts/audio-files.ts";
import { ListQuery } from "../../contracts/common.ts";
import { badRequest } from "../../http/errors.ts";
import { defineRoute } from "../../http/route.ts";
import { fromBase64Url, toBase64Url, utf8 } from "../../lib/encoding.ts";
import { publicOrigin } from "../../storage/signed-url.ts";

/** Cursors are opaque to clients: base64url of the last row's sort key. */
const CursorFields = z.object({ c: z.iso.datetime(), i: z.uuid() });

const encodeCursor = (cursor: PageCursor) => toBase64Url(utf8(JSON.stringify({ c: cursor.createdAt, i: cursor.id })));

function decodeCursor(text: string): PageCursor {
	try {
		const fields = CursorFields.parse(JSON.parse(new TextDecoder().decode(fromBase64Url(text))));
		return { createdAt: fields.c, id: fields.i };
	} catch {
		throw badRequest("Invalid query.cursor: pass the next_cursor of a previous page", [
			{ field: "query.cursor", message: "is not a cursor returned by this endpoint" },
		]);
	}
}

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
		const after = query.cursor ? decodeCursor(query.cursor) : null;
		const page = await listAudioFiles(env, auth.accountId, query.limit, after);
		const origin = publicOrigin(env, request.url);
		return Response.json({
			success: true,
			data: await Promise.all(page.rows.map((row) => presentAudioFile(env, origin, row))),
			next_cursor: page.next ? encodeCursor(page.next) : null,
		});
	},
});
