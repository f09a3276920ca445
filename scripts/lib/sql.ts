/**
 * SQL for the admin commands, built as plain statements so the same text runs through `wrangler d1 execute`
 * (local or remote) and through the D1 binding in tests. Values are quoted by `sqlValue`, never interpolated raw.
 */
export function sqlValue(value: string | number | boolean | null | undefined): string {
	if (value === null || value === undefined) return "NULL";
	if (typeof value === "boolean") return value ? "1" : "0";
	if (typeof value === "number") {
		if (!Number.isFinite(value)) throw new Error("non-finite number in SQL");
		return String(value);
	}
	if (value.includes("\u0000")) throw new Error("NUL character in SQL text");
	return `'${value.replaceAll("'", "''")}'`;
}

export function insertSql(table: string, row: Record<string, string | number | boolean | null | undefined>): string {
	const columns = Object.keys(row);
	return `INSERT INTO ${table} (${columns.join(", ")}) VALUES (${columns.map((c) => sqlValue(row[c])).join(", ")});`;
}

export function updateSql(
	table: string,
	set: Record<string, string | number | boolean | null | undefined>,
	where: { column: string; value: string },
): string {
	const assignments = Object.entries(set).map(([column, value]) => `${column} = ${sqlValue(value)}`);
	return `UPDATE ${table} SET ${assignments.join(", ")} WHERE ${where.column} = ${sqlValue(where.value)};`;
}
