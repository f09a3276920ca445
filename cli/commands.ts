/** The CLI's commands, each a thin layer over the SDK: parse, call, print. */
import { createWriteStream, openAsBlob } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
	CONVERSION_STATUS_VALUES,
	type ConversionStatus,
	mimeTypeForFileName,
	REQUESTED_PITCH_SHIFTS,
	type RequestedPitchShift,
	SUBSCRIBABLE_EVENTS,
	type SubscribableEvent,
	type VoiceConversionClient,
	type VoiceModel,
	type VoiceSettings,
} from "../sdk/index.ts";
import { UsageError } from "./config.ts";
import { formatBytes, type Output, progressBar, statusLine, table } from "./terminal.ts";

export interface Context {
	client: VoiceConversionClient;
	/** Results go to stdout; progress and notes to stderr. */
	print: (text: string) => void;
	err: Output;
	json: boolean;
	signal: AbortSignal;
}

const show = (ctx: Context, value: unknown, human: () => string) =>
	ctx.print(ctx.json ? JSON.stringify(value, null, 2) : human());

/**
 * How a name is compared: case-insensitive, and in one Unicode normalisation form, since the same "é" may be typed as
 * one code point and stored as two (a name taken from a macOS file name is decomposed).
 */
const nameKey = (name: string) => name.trim().normalize("NFC").toLowerCase();

/** A voice by id (any case, as the API takes it), or by name (case-insensitive; a unique prefix is enough). */
export async function findVoice(ctx: Context, wanted: string): Promise<VoiceModel> {
	const voices = await ctx.client.voices.list({ signal: ctx.signal });
	const key = nameKey(wanted);
	const exact = voices.filter((v) => v.id.toLowerCase() === key || nameKey(v.name) === key);
	const matches = exact.length > 0 ? exact : voices.filter((v) => nameKey(v.name).startsWith(key));
	if (matches.length === 1 && matches[0]) return matches[0];
	const names = voices.map((v) => `"${v.name}"`).join(", ") || "(none)";
	if (matches.length > 1) {
		// Names are unique per owner only: an account's voice may have a service voice's name, and then only the id
		// tells them apart.
		const rows = table(
			["NAME", "ID", "OWNER"],
			matches.map((v) => [v.name, v.id, v.owner]),
		);
		throw new UsageError(
			`"${wanted}" matches several voices:\n${rows.replace(/^/gm, "  ")}\nPass the voice's id instead, e.g. --voice ${matches[0]?.id}`,
		);
	}
	throw new UsageError(`No voice named "${wanted}". Available: ${names}`);
}

export async function voicesCommand(ctx: Context): Promise<void> {
	const voices = await ctx.client.voices.list({ signal: ctx.signal });
	show(ctx, voices, () =>
		voices.length === 0
			? "No voices."
			: table(
					["NAME", "ID", "TAGS", "OWNER", "STATUS"],
					voices.map((v) => [v.name, v.id, v.tags.join(", "), v.owner, v.status]),
				),
	);
}

export interface ConvertOptions {
	input: string;
	voice: string;
	pitch: string;
	/** Overrides of the voice's settings; the service checks ranges and what the voice can honour. */
	voiceSettings?: VoiceSettings;
	preview: boolean;
	out?: string;
	wait: boolean;
	timeoutSeconds: number;
}

function parsePitch(value: string): RequestedPitchShift {
	if ((REQUESTED_PITCH_SHIFTS as readonly string[]).includes(value)) return value as RequestedPitchShift;
	throw new UsageError(`--pitch must be one of: ${REQUESTED_PITCH_SHIFTS.join(", ")}`);
}

/** `--index-rate 0.5` and the like, as the API's `voice_settings` (undefined when none is given). */
export function parseVoiceSettings(flags: Record<string, unknown>): VoiceSettings | undefined {
	const settings: Record<string, unknown> = {};
	for (const [flag, key] of [
		["index-rate", "index_rate"],
		["protect", "protect"],
		["rms-mix-rate", "rms_mix_rate"],
		["formant-shift", "formant_shift"],
	] as const) {
		const raw = flags[flag] as string | undefined;
		if (raw === undefined) continue;
		const value = Number(raw);
		if (raw.trim() === "" || !Number.isFinite(value)) throw new UsageError(`--${flag} must be a number, got "${raw}"`);
		settings[key] = value;
	}
	if (flags["f0-method"] !== undefined) settings.f0_method = flags["f0-method"];
	return Object.keys(settings).length > 0 ? (settings as VoiceSettings) : undefined;
}

const slug = (name: string) =>
	name
		.toLowerCase()
		.replace(/[^a-z0-9]+/g, "-")
		.replace(/^-|-$/g, "") || "voice";

/** Upload, convert, follow the status live, and download the WAV: the whole workflow of the spec in one command. */
export async function convertCommand(ctx: Context, options: ConvertOptions): Promise<number> {
	const pitch = parsePitch(options.pitch);
	const info = await stat(options.input).catch(() => null);
	if (!info?.isFile()) throw new UsageError(`No such file: ${options.input}`);
	const fileName = path.basename(options.input);
	if (!mimeTypeForFileName(fileName))
		throw new UsageError(`${fileName}: the source must be a .wav, .mp3 or .flac file`);
	const voice = await findVoice(ctx, options.voice);
	// Only ready voices convert (409 voice_not_ready): said before the source is uploaded for nothing.
	if (voice.status !== "ready") {
		const why =
			voice.status === "failed"
				? "its validation failed, and GET /api/v1/voices/{id} says why"
				: "it converts once its files are uploaded and validated";
		throw new UsageError(`Voice "${voice.name}" (${voice.id}) is ${voice.status}, not ready: ${why}`);
	}
	const out =
		options.out ??
		`${path.basename(fileName, path.extname(fileName))}.${slug(voice.name)}${options.preview ? ".preview" : ""}.wav`;

	const bar = progressBar("Uploading", ctx.err);
	let file: Awaited<ReturnType<VoiceConversionClient["uploadAudio"]>>;
	try {
		file = await ctx.client.uploadAudio(await openAsBlob(options.input), {
			fileName,
			onProgress: ({ loaded, total }) => bar.update(loaded, total),
			signal: ctx.signal,
		});
		bar.done(info.size);
	} catch (error) {
		bar.abort();
		throw error;
	}

	const created = await ctx.client.conversions.create(
		{
			audio_file_id: file.id,
			voice_model_id: voice.id,
			pitch_shift: pitch,
			use_preview: options.preview,
			...(options.voiceSettings ? { voice_settings: options.voiceSettings } : {}),
		},
		{ signal: ctx.signal },
	);
	const settings = options.voiceSettings
		? `, ${Object.entries(options.voiceSettings)
				.map(([key, value]) => `${key} ${value}`)
				.join(", ")}`
		: "";
	ctx.err.write(
		`Conversion ${created.id}: ${voice.name}, pitch ${pitch}${settings}${options.preview ? ", preview (first 10 s)" : ""}\n`,
	);
	if (!options.wait) {
		show(ctx, created, () => created.id);
		return 0;
	}

	const status = statusLine(ctx.err);
	let done: Awaited<ReturnType<VoiceConversionClient["waitForConversion"]>>;
	try {
		done = await ctx.client.waitForConversion(created.id, {
			signal: ctx.signal,
			timeoutMs: options.timeoutSeconds * 1000,
			onUpdate: (c) => status.set(c.status),
		});
	} catch (error) {
		status.stop("Stopped waiting");
		if (ctx.signal.aborted) {
			ctx.err.write(`The conversion goes on without us: \`npm run cli -- conversions show ${created.id}\`\n`);
		}
		throw error;
	}
	const chosen = pitch === "auto" && done.pitch_shift_applied ? ` (pitch auto: ${done.pitch_shift_applied})` : "";
	status.stop(done.status === "completed" ? `Completed${chosen}` : "Failed");
	if (done.status === "failed") {
		ctx.err.write(`Conversion failed: ${done.error_message ?? "no reason given"}\n`);
		show(ctx, done, () => "");
		return 1;
	}
	const bytes = await download(ctx, done, out);
	show(ctx, { ...done, output_file: path.resolve(out) }, () => `Saved ${out} (${formatBytes(bytes)})`);
	return 0;
}

/** Streams the output to `out` through a temporary file, so an interrupted download never leaves a partial WAV. */
async function download(
	ctx: Context,
	conversion: Parameters<VoiceConversionClient["downloadConversion"]>[0],
	out: string,
): Promise<number> {
	const response = await ctx.client.downloadConversion(conversion, { signal: ctx.signal });
	if (!response.body) throw new Error("The download came back without a body");
	const partial = `${out}.part`;
	try {
		await pipeline(
			Readable.fromWeb(response.body as import("node:stream/web").ReadableStream),
			createWriteStream(partial),
		);
		await rename(partial, out);
	} catch (error) {
		await rm(partial, { force: true });
		throw error;
	}
	return (await stat(out)).size;
}

function parseStatus(value: string | undefined): ConversionStatus | undefined {
	if (value === undefined) return undefined;
	if ((CONVERSION_STATUS_VALUES as readonly string[]).includes(value)) return value as ConversionStatus;
	throw new UsageError(`--status must be one of: ${CONVERSION_STATUS_VALUES.join(", ")}`);
}

export function parseLimit(value: string | undefined, max: number): number | undefined {
	if (value === undefined) return undefined;
	const limit = Number(value);
	if (!Number.isInteger(limit) || limit < 1 || limit > max)
		throw new UsageError(`--limit must be an integer from 1 to ${max}`);
	return limit;
}

export async function conversionsCommand(
	ctx: Context,
	args: string[],
	flags: Record<string, unknown>,
): Promise<number> {
	const [action, id] = args;
	if (action === "list" || action === undefined) {
		const page = await ctx.client.conversions.list({
			status: parseStatus(flags.status as string | undefined),
			limit: parseLimit(flags.limit as string | undefined, 100),
			cursor: flags.cursor as string | undefined,
			signal: ctx.signal,
		});
		show(ctx, { data: page.data, next_cursor: page.nextCursor }, () => {
			if (page.data.length === 0) return "No conversions.";
			const rows = page.data.map((c) => [
				c.id,
				c.status,
				c.voice_model_name,
				c.pitch_shift,
				c.use_preview ? "yes" : "no",
				c.created_at,
			]);
			const more = page.nextCursor ? `\nMore: --cursor ${page.nextCursor}` : "";
			return `${table(["ID", "STATUS", "VOICE", "PITCH", "PREVIEW", "CREATED"], rows)}${more}`;
		});
		return 0;
	}
	if (!id) throw new UsageError(`conversions ${action} needs a conversion id`);
	if (action === "show") {
		const conversion = await ctx.client.conversions.get(id, { signal: ctx.signal });
		show(ctx, conversion, () =>
			Object.entries(conversion)
				.map(([key, value]) => {
					const shown = value !== null && typeof value === "object" ? JSON.stringify(value) : value;
					return `${key.padEnd(22)}${shown ?? "-"}`;
				})
				.join("\n"),
		);
		return 0;
	}
	if (action === "download") {
		const out = (flags.out as string | undefined) ?? `${id}.wav`;
		const bytes = await download(ctx, id, out);
		show(ctx, { id, output_file: path.resolve(out), size_bytes: bytes }, () => `Saved ${out} (${formatBytes(bytes)})`);
		return 0;
	}
	throw new UsageError(`Unknown action "conversions ${action}": use list, show or download`);
}

function parseEvents(value: string | undefined): SubscribableEvent[] {
	const names = (value ?? SUBSCRIBABLE_EVENTS.join(","))
		.split(",")
		.map((e) => e.trim())
		.filter(Boolean);
	for (const name of names) {
		if (!(SUBSCRIBABLE_EVENTS as readonly string[]).includes(name))
			throw new UsageError(`Unknown event "${name}": use ${SUBSCRIBABLE_EVENTS.join(", ")}`);
	}
	return names as SubscribableEvent[];
}

export async function webhooksCommand(ctx: Context, args: string[], flags: Record<string, unknown>): Promise<number> {
	const [action, id] = args;
	const signal = ctx.signal;
	if (action === "create") {
		const url = flags.url as string | undefined;
		if (!url) throw new UsageError("webhooks create needs --url");
		const created = await ctx.client.webhooks.create(
			{
				url,
				events: parseEvents(flags.events as string | undefined),
				description: flags.description as string | undefined,
			},
			{ signal },
		);
		show(ctx, created, () =>
			[
				`Subscription ${created.id} → ${created.url} (${created.events.join(", ")})`,
				`Signing secret: ${created.secret}`,
				"Store the secret now: it is not shown again (regenerate it if lost).",
			].join("\n"),
		);
		return 0;
	}
	if (action === "list" || action === undefined) {
		const subscriptions = await ctx.client.webhooks.list({ signal });
		show(ctx, subscriptions, () =>
			subscriptions.length === 0
				? "No webhook subscriptions."
				: table(
						["ID", "ACTIVE", "FAILURES", "EVENTS", "URL"],
						subscriptions.map((s) => [
							s.id,
							s.is_active ? "yes" : "no",
							String(s.consecutive_failures),
							s.events.join(","),
							s.url,
						]),
					),
		);
		return 0;
	}
	if (!id) throw new UsageError(`webhooks ${action} needs a subscription id`);
	if (action === "test") {
		const result = await ctx.client.webhooks.test(id, { signal });
		show(ctx, result, () => `${result.message} (delivery id ${result.test_payload.id})`);
		return 0;
	}
	if (action === "deliveries") {
		const entries = await ctx.client.webhooks.deliveries(id, {
			limit: parseLimit(flags.limit as string | undefined, 100),
			signal,
		});
		show(ctx, entries, () =>
			entries.length === 0
				? "No deliveries yet."
				: table(
						["WHEN", "EVENT", "ATTEMPT", "STATUS", "CODE", "MS", "ERROR"],
						entries.map((e) => [
							e.created_at,
							e.event,
							String(e.attempt),
							e.status,
							e.response_code === null ? "-" : String(e.response_code),
							e.duration_ms === null ? "-" : String(e.duration_ms),
							e.error ?? "",
						]),
					),
		);
		return 0;
	}
	if (action === "delete") {
		const deleted = await ctx.client.webhooks.delete(id, { signal });
		show(ctx, deleted, () => `Deleted subscription ${id}`);
		return 0;
	}
	throw new UsageError(`Unknown action "webhooks ${action}": use create, list, test, deliveries or delete`);
}
