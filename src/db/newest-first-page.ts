/** Newest-first pages keyed by (`created_at`, `id`), as every list endpoint pages: one helper for every store. */
import { and, eq, lt, or } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { PageCursor } from "../http/page-cursor.ts";

/** Rows strictly after `cursor` in newest-first order; no condition on the first page. */
export const olderThan = (columns: { createdAt: SQLiteColumn; id: SQLiteColumn }, cursor: PageCursor | null) =>
	cursor
		? or(
				lt(columns.createdAt, cursor.createdAt),
				and(eq(columns.createdAt, cursor.createdAt), lt(columns.id, cursor.id)),
			)
		: undefined;

/** Splits the `limit + 1` rows read into the page and where the next page starts (null on the last page). */
export function newestFirstPage<T extends { createdAt: string; id: string }>(
	rows: T[],
	limit: number,
): { rows: T[]; next: PageCursor | null } {
	const page = rows.slice(0, limit);
	const last = page.at(-1);
	return { rows: page, next: rows.length > limit && last ? { createdAt: last.createdAt, id: last.id } : null };
}
