/**
 * The conversion state machine: the only code that changes `voice_conversions.status`.
 *
 *   pending_preprocessing ─promote─▶ queued ─lease─▶ processing ─complete─▶ completed
 *            │                          │              │  ▲ lease (a retried job stays `processing`)
 *            └──────────────────────────┴──────fail────┴──┴──────────────▶ failed
 *
 * Every transition is one guarded `UPDATE … WHERE id = ? AND status IN (from)`, so a duplicate, late or
 * reordered message finds the guard false and changes nothing: status never moves backwards or twice.
 * Its timestamp is written with `COALESCE(stamp, now)`, so it is set exactly once even on a self-loop.
 * A terminal transition inserts its outbox `events` row in the same D1 batch (atomic), and the event id
 * is then sent on `webhook-events`; if that send is lost the cron safety net re-sends unsent rows.
 */
import type { PitchShift } from "../contracts/voice-conversions.ts";
import { type ConversionStatus, voiceConversions } from "../db/schema.ts";
import { type Conversion, type ConversionRow, findConversion } from "./conversion-store.ts";
import type { Failure } from "./failure-messages.ts";
import { conversionEventData } from "./present-conversion.ts";

type Stamp = "queuedAt" | "processingStartedAt" | "completedAt" | "failedAt";
/** Fields a transition may set along with the status. */
type Settable =
	| "dispatchedAt"
	| "attempts"
	| "outputKey"
	| "outputSizeBytes"
	| "outputDurationSeconds"
	| "pitchShiftApplied"
	| "errorCode"
	| "errorMessage";
type Columns = Partial<Pick<ConversionRow, Settable>>;
export type ConversionEventType = "conversion.completed" | "conversion.failed";

interface TransitionSpec {
	from: readonly ConversionStatus[];
	to: ConversionStatus;
	stamp: Stamp;
	/** Fields the caller may set along with the status. */
	columns: readonly Settable[];
	/** Fields that only ever grow (`MAX(column, ?)`), e.g. the attempt count. */
	monotonic?: readonly Settable[];
	/** Fields written only while still null (`COALESCE(column, ?)`): a value set earlier stands. */
	fillOnce?: readonly Settable[];
	event?: ConversionEventType;
}

export const TRANSITIONS = {
	promote: { from: ["pending_preprocessing"], to: "queued", stamp: "queuedAt", columns: ["dispatchedAt"] },
	lease: {
		from: ["queued", "processing"],
		to: "processing",
		stamp: "processingStartedAt",
		columns: ["attempts"],
		monotonic: ["attempts"],
	},
	complete: {
		from: ["processing"],
		to: "completed",
		stamp: "completedAt",
		columns: ["outputKey", "outputSizeBytes", "outputDurationSeconds", "pitchShiftApplied"],
		// Set at creation for a pitch table value; for `auto`, the runner's choice arrives with the completion.
		fillOnce: ["pitchShiftApplied"],
		event: "conversion.completed",
	},
	fail: {
		from: ["pending_preprocessing", "queued", "processing"],
		to: "failed",
		stamp: "failedAt",
		columns: ["errorCode", "errorMessage"],
		event: "conversion.failed",
	},
} as const satisfies Record<string, TransitionSpec>;
export type TransitionName = keyof typeof TRANSITIONS;

export const NON_TERMINAL_STATUSES = ["pending_preprocessing", "queued", "processing"] as const;

type Value = string | number | null;

/** `UPDATE … SET status, stamp, updated_at, columns WHERE <where> AND status IN (guard) RETURNING id`. */
function guardedUpdate(
	env: Pick<Env, "DB">,
	name: TransitionName,
	where: { sql: string; bindings: Value[] },
	guard: readonly ConversionStatus[],
	columns: Columns,
	now: string,
): D1PreparedStatement {
	const spec: TransitionSpec = TRANSITIONS[name];
	const stamp = voiceConversions[spec.stamp].name;
	const sets = ["status = ?", `${stamp} = COALESCE(${stamp}, ?)`, "updated_at = ?"];
	const bindings: Value[] = [spec.to, now, now];
	for (const [field, value] of Object.entries(columns) as [Settable, Value][]) {
		if (!spec.columns.includes(field)) throw new Error(`transition ${name} may not set ${field}`);
		const column = voiceConversions[field].name;
		if (spec.monotonic?.includes(field)) sets.push(`${column} = MAX(${column}, ?)`);
		else if (spec.fillOnce?.includes(field)) sets.push(`${column} = COALESCE(${column}, ?)`);
		else sets.push(`${column} = ?`);
		bindings.push(value);
	}
	const statuses = guard.map(() => "?").join(", ");
	return env.DB.prepare(
		`UPDATE voice_conversions SET ${sets.join(", ")} WHERE ${where.sql} AND status IN (${statuses}) RETURNING id`,
	).bind(...bindings, ...where.bindings, ...guard);
}

export type TransitionResult =
	| { outcome: "applied"; conversion: Conversion; eventId: string | null }
	/** The guard was false: the conversion is already past (or not at) the transition's starting point. */
	| { outcome: "unchanged"; conversion: Conversion }
	| { outcome: "not_found" };

/**
 * Applies a single-row transition. Terminal ones read the row first to build the event payload, then update
 * only if the status is still the one read (optimistic guard), so the payload describes exactly the row written;
 * losing that race re-reads and re-decides.
 */
async function transition(
	env: Pick<Env, "DB" | "WEBHOOK_EVENTS_QUEUE">,
	name: TransitionName,
	id: string,
	columns: Columns,
	now: Date,
): Promise<TransitionResult> {
	const spec: TransitionSpec = TRANSITIONS[name];
	for (let round = 0; round < 5; round++) {
		const current = await findConversion(env, id);
		if (!current) return { outcome: "not_found" };
		if (!spec.from.includes(current.status)) return { outcome: "unchanged", conversion: current };
		const at = now.toISOString();
		const filled = Object.fromEntries((spec.fillOnce ?? []).map((field) => [field, current[field] ?? columns[field]]));
		const next: Conversion = {
			...current,
			...columns,
			...filled,
			status: spec.to,
			[spec.stamp]: current[spec.stamp] ?? at,
			updatedAt: at,
		};
		const statements = [guardedUpdate(env, name, { sql: "id = ?", bindings: [id] }, [current.status], columns, at)];
		const eventId = crypto.randomUUID();
		if (spec.event) {
			// Inserted only if this batch's update took effect; the unique (type, subject_id) index makes a
			// second terminal event for the same conversion impossible.
			statements.push(
				env.DB.prepare(
					`INSERT INTO events (id, account_id, type, subject_id, payload, created_at)
					 SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (
					   SELECT 1 FROM voice_conversions WHERE id = ? AND status = ? AND updated_at = ?)
					 ON CONFLICT (type, subject_id) DO NOTHING RETURNING id`,
				).bind(
					eventId,
					current.accountId,
					spec.event,
					id,
					JSON.stringify({ conversion: conversionEventData(next) }),
					at,
					id,
					spec.to,
					at,
				),
			);
		}
		const [updated, inserted] = await env.DB.batch<{ id: string }>(statements);
		if (!updated?.results.length) continue;
		const published = inserted?.results.length ? eventId : null;
		if (published) await publishEvent(env, published);
		return { outcome: "applied", conversion: next, eventId: published };
	}
	throw new Error(`conversion ${id}: transition ${name} kept losing races`);
}

/** Sends an outbox event to the webhook fan-out. A failed send is only logged: the cron re-sends unsent rows. */
export async function publishEvent(env: Pick<Env, "WEBHOOK_EVENTS_QUEUE">, eventId: string): Promise<void> {
	try {
		await env.WEBHOOK_EVENTS_QUEUE.send({ event_id: eventId }, { contentType: "json" });
	} catch (error) {
		console.warn(
			JSON.stringify({
				level: "warn",
				msg: "event send failed; the safety net will re-send it",
				event_id: eventId,
				error: error instanceof Error ? error.message : String(error),
			}),
		);
	}
}

/** `pitchShiftApplied` is what the runner reports; it is recorded only where none was set at creation (`auto`). */
export function completeConversion(
	env: Pick<Env, "DB" | "WEBHOOK_EVENTS_QUEUE">,
	id: string,
	output: { key: string; sizeBytes: number; durationSeconds: number | null; pitchShiftApplied: PitchShift },
	now = new Date(),
): Promise<TransitionResult> {
	return transition(
		env,
		"complete",
		id,
		{
			outputKey: output.key,
			outputSizeBytes: output.sizeBytes,
			outputDurationSeconds: output.durationSeconds,
			pitchShiftApplied: output.pitchShiftApplied,
		},
		now,
	);
}

export function failConversion(
	env: Pick<Env, "DB" | "WEBHOOK_EVENTS_QUEUE">,
	id: string,
	reason: Failure,
	now = new Date(),
): Promise<TransitionResult> {
	return transition(env, "fail", id, { errorCode: reason.code, errorMessage: reason.message }, now);
}

/**
 * Moves conversions waiting on a preprocessed audio file to `queued` (one guarded statement) and returns the ids
 * that this call moved: only those are sent on `conversion-jobs`, so a duplicate notification sends nothing.
 */
export async function promoteWaitingOnFile(
	env: Pick<Env, "DB">,
	audioFileId: string,
	now = new Date(),
): Promise<string[]> {
	const at = now.toISOString();
	const result = await guardedUpdate(
		env,
		"promote",
		{ sql: "audio_file_id = ?", bindings: [audioFileId] },
		TRANSITIONS.promote.from,
		{ dispatchedAt: at },
		at,
	).all<{ id: string }>();
	return result.results.map((row) => row.id);
}

/** Moves one conversion to `queued` (creation with a file that is already ready). */
export async function promoteConversion(env: Pick<Env, "DB">, id: string, now = new Date()): Promise<boolean> {
	const at = now.toISOString();
	const result = await guardedUpdate(
		env,
		"promote",
		{ sql: "id = ?", bindings: [id] },
		TRANSITIONS.promote.from,
		{ dispatchedAt: at },
		at,
	).all<{ id: string }>();
	return result.results.length === 1;
}

/**
 * Records leases granted by the broker: `queued → processing` (or `processing` again for a retry, which keeps
 * the first `processing_started_at`) and the attempt count, in one batch. Returns the ids that may run: a
 * conversion missing from it is terminal, and its job must be dropped, not handed to a runner.
 */
export async function markLeased(
	env: Pick<Env, "DB">,
	grants: { conversionId: string; attempt: number }[],
	now = new Date(),
): Promise<Set<string>> {
	if (grants.length === 0) return new Set();
	const at = now.toISOString();
	const updates = grants.map((grant) =>
		guardedUpdate(
			env,
			"lease",
			{ sql: "id = ?", bindings: [grant.conversionId] },
			TRANSITIONS.lease.from,
			{ attempts: grant.attempt },
			at,
		),
	);
	const results = await env.DB.batch<{ id: string }>(updates);
	return new Set(results.flatMap((result) => result.results.map((row) => row.id)));
}
