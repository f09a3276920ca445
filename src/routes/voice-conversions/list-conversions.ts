import { ConversionPage, ListConversionsQuery } from "../../contracts/voice-conversions.ts";
import { CONVERSION_SELECT, type ConversionRow } from "../../conversions/conversion-store.ts";
import { presentConversion } from "../../conversions/present-conversion.ts";
import { decodePageCursor, encodePageCursor } from "../../http/page-cursor.ts";
import { defineRoute } from "../../http/route.ts";
import { publicOrigin } from "../../storage/signed-url.ts";

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
			const { createdAt, id } = decodePageCursor(query.cursor);
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
				next_cursor:
					results.length > query.limit && last ? encodePageCursor({ createdAt: last.created_at, id: last.id }) : null,
			},
			{ headers: { "Cache-Control": "no-store" } },
		);
	},
});
