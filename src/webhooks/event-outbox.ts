/**
 * D1 access for the `events` outbox. Rows are written by the conversion state machine, in the same batch as the
 * transition that caused them; here they are read for delivery and marked sent once every subscriber accepted them.
 */
import { and, asc, eq, isNull, lte } from "drizzle-orm";
import type { OutboxEvent } from "../contracts/webhook-delivery.ts";
import { database, nowIso } from "../db/client.ts";
import { events } from "../db/schema.ts";

export async function findOutboxEvent(
	env: Pick<Env, "DB">,
	id: string,
): Promise<(OutboxEvent & { accountId: string }) | null> {
	const row = await database(env).query.events.findFirst({ where: eq(events.id, id) });
	if (!row) return null;
	return { id: row.id, accountId: row.accountId, type: row.type, createdAt: row.createdAt, payload: row.payload };
}

export async function markEventSent(env: Pick<Env, "DB">, id: string): Promise<void> {
	await database(env)
		.update(events)
		.set({ sentAt: nowIso() })
		.where(and(eq(events.id, id), isNull(events.sentAt)))
		.run();
}

/** Ids of events created at or before `cutoff` and never marked sent, oldest first. */
export async function unsentEventsBefore(env: Pick<Env, "DB">, cutoff: string, limit: number): Promise<string[]> {
	const rows = await database(env)
		.select({ id: events.id })
		.from(events)
		.where(and(isNull(events.sentAt), lte(events.createdAt, cutoff)))
		.orderBy(asc(events.createdAt))
		.limit(limit);
	return rows.map((row) => row.id);
}
