import { ConversionPage, ListConversionsQuery } from "../../contracts/voice-conversions.ts";
import { listConversions } from "../../conversions/conversion-store.ts";
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
		const { rows, next } = await listConversions(env, auth.accountId, {
			status: query.status,
			limit: query.limit,
			after: query.cursor ? decodePageCursor(query.cursor) : null,
		});
		const origin = publicOrigin(env, request.url);
		return Response.json(
			{
				success: true,
				data: await Promise.all(rows.map((row) => presentConversion(env, origin, row))),
				next_cursor: next ? encodePageCursor(next) : null,
			},
			{ headers: { "Cache-Control": "no-store" } },
		);
	},
});
