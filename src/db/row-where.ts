import { getTableColumns, type SQL, sql } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";

/**
 * `SELECT <the row's values, in the table's column order> WHERE <condition>`, for an `INSERT … SELECT` that inserts
 * the row only while `condition` holds. The condition is read in the same statement as the insert, so a change that
 * lands between a handler's checks and its insert (a deletion, a limit reached by a concurrent request) is seen.
 */
export function rowWhere<T extends SQLiteTable>(table: T, row: T["$inferInsert"], condition: SQL): SQL {
	const values = Object.entries(getTableColumns(table)).map(([name, column]) =>
		sql.param((row as Record<string, unknown>)[name] ?? column.default ?? null, column),
	);
	return sql`select ${sql.join(values, sql`, `)} where ${condition}`;
}
