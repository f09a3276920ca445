/** Shapes shared by every resource: ids, timestamps, the envelope and the error body. */
import { z } from "zod";
import { API_ERROR_CODES } from "./errors.ts";

/** A UUID, in lower case: one given in upper or mixed case (UUIDs are case-insensitive) names the same resource. */
export const Id = z.uuid().toLowerCase();
export const Timestamp = z.iso.datetime();

export const IdParams = z.object({ id: Id });

export const ErrorBody = z.object({
	success: z.literal(false),
	message: z.string(),
	/** Stable: one of the listed codes (`src/contracts/errors.ts`). */
	code: z.enum(API_ERROR_CODES),
	errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
});

export const envelope = <T extends z.ZodType>(data: T) => z.object({ success: z.literal(true), data });

/**
 * A query parameter's text as the integer it spells in plain decimal digits; any other text ("0x10", "1e2", " 5",
 * "", 16 digits or more) is left as it is, for the number schema after it to refuse once. `z.coerce` would read the
 * first two as 16 and 100.
 */
export const integerText = (value: unknown): unknown =>
	typeof value === "string" && /^[0-9]{1,15}$/.test(value) ? Number(value) : value;

/** Cursor pagination for list endpoints: newest first, `next_cursor` null on the last page. */
export const PageLimit = z.preprocess(
	integerText,
	z
		.number({ error: () => "must be an integer from 1 to 100" })
		.int("must be an integer from 1 to 100")
		.min(1, "must be an integer from 1 to 100")
		.max(100, "must be an integer from 1 to 100")
		.default(20),
);

export const ListQuery = z.object({
	limit: PageLimit,
	cursor: z.string().max(200).optional(),
});
