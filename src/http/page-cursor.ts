/**
 * Cursors of the newest-first list endpoints: the (created_at, id) of the last row of a page, opaque to clients
 * (base64url of JSON). A cursor that does not decode is the client's mistake: 400 naming `query.cursor`.
 */
import { z } from "zod";
import { fromBase64Url, toBase64Url, utf8 } from "../lib/encoding.ts";
import { badRequest } from "./errors.ts";

export interface PageCursor {
	createdAt: string;
	id: string;
}

const CursorFields = z.object({ c: z.iso.datetime(), i: z.uuid() });

export const encodePageCursor = (cursor: PageCursor): string =>
	toBase64Url(utf8(JSON.stringify({ c: cursor.createdAt, i: cursor.id })));

export function decodePageCursor(text: string): PageCursor {
	try {
		const fields = CursorFields.parse(JSON.parse(new TextDecoder().decode(fromBase64Url(text))));
		return { createdAt: fields.c, id: fields.i };
	} catch {
		throw badRequest("Invalid query.cursor: pass the next_cursor of a previous page", [
			{ field: "query.cursor", message: "is not a cursor returned by this endpoint" },
		]);
	}
}
