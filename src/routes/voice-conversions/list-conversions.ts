import { ConversionPage, ListConversionsQuery } from "../../contracts/voice-conversions.ts";
import { CONVERSION_SELECT, type ConversionRow } from "../../conversions/conversion-row.ts";
import { presentConversion } from "../../conversions/present-conversion.ts";
import { badRequest } from "../../http/errors.ts";
import { defineRoute } from "../../http/route.ts";
import { fromBase64Url, toBase64Url, utf8 } from "../../lib/encoding.ts";
import { publicOrigin } from "../../storage/signed-url.ts";

/** Opaque cursor: the (created_at, id) of the last row of the previous page; pages go newest first. */
function encodeCursor(row: ConversionRow): string {
	return toBase64Url(utf8(JSON.stringify([row.created_at, row.id])));
}

function decodeCursor(cursor: string): [string, string] {
	try {
		const value = JSON.parse(new TextDecoder().decode(fromBase64Url(cursor)));
		if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === "string")) {
			return value as [string, string];
		}
	} catch {}
	throw badRequest("Invalid cursor: pass the next_cursor of a previous page", [
		{ field: "query.cursor", message: "not a cursor returned by this endpoint" },
	]);
}

export const listConversionsRoute = defineRoute({
	method: "GET",
	path: "/api/v1/voice-conversions",
	auth: "base",
	summary: "List your voice conversions, newest first",
	tags: ["Voice conversions"],
	query: ListConversionsQuery,
	responses: {
		200: { description: "A page of conversions and the cursor of the next page", schema: ConversionPage },
		400: { description: "Invalid status, limit or cursor" },
	},
	async handler({ env, request, auth, query }) {
		const where = ["c.account_id = ?"];
		const bindings: (string | number)[] = [auth.accountId];
		if (query.status) {
			where.push("c.status = ?");
			bindings.push(query.status);
		}
		if (query.cursor) {
			const [createdAt, id] = decodeCursor(query.cursor);
			where.push("(c.created_at < ? OR (c.created_at = ? AND c.id < ?))");
			bindings.push(createdAt, createdAt, id);
		}
		const { results } = await env.DB.prepare(
			`${CONVERSION_SELECT} WHERE ${where.join(" AND ")} ORDER BY c.created_at DESC, c.id DESC LIMIT ?`,
		)
			.bind(...bindings, query.limit + 1)
			.all<ConversionRow>();
		const page = results.slice(0, query.limit);
		const last = page.at(-1);
		const origin = publicOrigin(env, request.url);
		return Response.json(
			{
				success: true,
				data: await Promise.all(page.map((row) => presentConversion(env, origin, row))),
				next_cursor: results.length > query.limit && last ? encodeCursor(last) : null,
			},
			{ headers: { "Cache-Control": "no-store" } },
		);
	},
});
