/**
 * The admin commands: parse arguments, check them, and act through an `AdminBackend`. Every command prints
 * one JSON document; a client secret is printed once, at creation, and only its hash is stored.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import type { AdminBackend } from "./admin-backend.ts";
import {
	createAccount,
	createClient,
	createVoice,
	revokeClient,
	updateVoice,
	VOICE_ENGINES,
	type VoiceFields,
	voiceObjectKeys,
} from "./provisioning.ts";
import { sqlValue } from "./sql.ts";

export class UsageError extends Error {}

export const USAGE = `Usage: npm run admin -- <command> [options] [--remote [--env NAME]] [--persist-to DIR]

  account create --name NAME
  account list
  client create --account ACCOUNT_ID [--name NAME]          API client (scope voice-conversion-api/base)
  runner-client create --account ACCOUNT_ID [--name NAME]   GPU runner client (scope voice-conversion-api/runner)
  client revoke --id CLIENT_ID
  voice create --name NAME [--engine dsp|rvc] [--tags a,b] [--params JSON]
               [--image FILE] [--sample FILE] [--artifact NAME=FILE ...]
  voice update (--id VOICE_ID | --name NAME) [--rename NEW] [--engine ...] [--tags ...] [--params JSON]
               [--image FILE] [--sample FILE] [--artifact NAME=FILE ...] [--active true|false]
  voice list

Local D1/R2 (the ones \`npm run dev\` uses) by default; --remote acts on the deployed ones through wrangler.`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function required(value: string | undefined, flag: string): string {
	if (!value?.trim()) throw new UsageError(`--${flag} is required`);
	return value.trim();
}

function uuid(value: string | undefined, flag: string): string {
	const v = required(value, flag);
	if (!UUID.test(v)) throw new UsageError(`--${flag} must be a UUID, got "${v}"`);
	return v.toLowerCase();
}

/** Recognises a file by its first bytes, never by its name. */
function sniff(bytes: Uint8Array, kind: "image" | "audio"): { contentType: string; extension: string } | null {
	const ascii = (from: number, to: number) => String.fromCharCode(...bytes.subarray(from, to));
	if (kind === "image") {
		if (bytes[0] === 0x89 && ascii(1, 4) === "PNG") return { contentType: "image/png", extension: "png" };
		if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff)
			return { contentType: "image/jpeg", extension: "jpg" };
		if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WEBP") return { contentType: "image/webp", extension: "webp" };
		return null;
	}
	if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WAVE") return { contentType: "audio/wav", extension: "wav" };
	if (ascii(0, 4) === "fLaC") return { contentType: "audio/flac", extension: "flac" };
	if (ascii(0, 3) === "ID3" || (bytes[0] === 0xff && ((bytes[1] ?? 0) & 0xe0) === 0xe0)) {
		return { contentType: "audio/mpeg", extension: "mp3" };
	}
	return null;
}

async function readInput(file: string, kind: "image" | "audio" | "artifact") {
	let bytes: Buffer;
	try {
		bytes = await readFile(path.resolve(file));
	} catch (error) {
		throw new UsageError(`Cannot read ${kind} file ${file}: ${(error as Error).message}`);
	}
	if (bytes.length === 0) throw new UsageError(`${kind} file ${file} is empty`);
	return bytes;
}

interface VoiceOptions {
	engine?: string;
	tags?: string;
	params?: string;
	image?: string;
	sample?: string;
	artifact?: string[];
	active?: string;
}

/** Validates voice options and uploads any files; returns the columns to write. */
async function voiceFields(backend: AdminBackend, voiceId: string, options: VoiceOptions): Promise<VoiceFields> {
	const fields: VoiceFields = {};
	if (options.engine !== undefined) {
		if (!VOICE_ENGINES.includes(options.engine as "dsp")) {
			throw new UsageError(`--engine must be one of: ${VOICE_ENGINES.join(", ")}`);
		}
		fields.engine = options.engine as "dsp";
	}
	if (options.tags !== undefined) {
		fields.tags = options.tags
			.split(",")
			.map((t) => t.trim())
			.filter(Boolean);
	}
	if (options.params !== undefined) {
		let params: unknown;
		try {
			params = JSON.parse(options.params);
		} catch {
			throw new UsageError("--params must be a JSON object, e.g. '{\"formant_shift\": 2}'");
		}
		if (typeof params !== "object" || params === null || Array.isArray(params)) {
			throw new UsageError("--params must be a JSON object");
		}
		fields.params = params as Record<string, unknown>;
	}
	if (options.active !== undefined) {
		if (options.active !== "true" && options.active !== "false") throw new UsageError("--active must be true or false");
		fields.isActive = options.active === "true";
	}
	const keys = voiceObjectKeys(voiceId);
	// Check every file before uploading any, so a bad argument leaves nothing half-written.
	const image = options.image ? await readInput(options.image, "image") : null;
	const imageType = image ? sniff(image, "image") : null;
	if (image && !imageType) throw new UsageError(`--image ${options.image} is not a PNG, JPEG or WebP image`);
	const sample = options.sample ? await readInput(options.sample, "audio") : null;
	const sampleType = sample ? sniff(sample, "audio") : null;
	if (sample && !sampleType) throw new UsageError(`--sample ${options.sample} is not a WAV, FLAC or MP3 file`);
	const artifacts = [];
	for (const spec of options.artifact ?? []) {
		const [name, file] = spec.split(/=(.*)/s);
		if (!name || !file || !/^[a-z0-9_-]{1,64}$/.test(name)) {
			throw new UsageError(`--artifact must be NAME=FILE with NAME in [a-z0-9_-], got "${spec}"`);
		}
		const bytes = await readInput(file, "artifact");
		artifacts.push({ name, bytes, sha256: createHash("sha256").update(bytes).digest("hex") });
	}
	if (image && imageType) {
		fields.imageKey = keys.image(imageType.extension);
		await backend.putObject(fields.imageKey, image, imageType.contentType);
	}
	if (sample && sampleType) {
		fields.sampleKey = keys.sample(sampleType.extension);
		await backend.putObject(fields.sampleKey, sample, sampleType.contentType);
	}
	if (artifacts.length) {
		fields.artifacts = [];
		for (const artifact of artifacts) {
			const key = keys.artifact(artifact.name);
			await backend.putObject(key, artifact.bytes, "application/octet-stream");
			fields.artifacts.push({ name: artifact.name, key, sha256: artifact.sha256, size_bytes: artifact.bytes.length });
		}
	}
	return fields;
}

async function findVoiceId(backend: AdminBackend, id: string | undefined, name: string | undefined): Promise<string> {
	if (id) return uuid(id, "id");
	const rows = await backend.query<{ id: string }>(
		`SELECT id FROM voices WHERE name = ${sqlValue(required(name, "name"))}`,
	);
	if (!rows[0]) throw new UsageError(`No voice named "${name}"`);
	return rows[0].id;
}

async function accountExists(backend: AdminBackend, id: string): Promise<void> {
	const rows = await backend.query<{ id: string }>(`SELECT id FROM accounts WHERE id = ${sqlValue(id)}`);
	if (!rows[0]) throw new UsageError(`No account with id ${id}`);
}

export async function runAdmin(argv: string[], backend: AdminBackend): Promise<unknown> {
	const { positionals, values } = parseArgs({
		args: argv,
		allowPositionals: true,
		strict: true,
		options: {
			name: { type: "string" },
			account: { type: "string" },
			id: { type: "string" },
			rename: { type: "string" },
			engine: { type: "string" },
			tags: { type: "string" },
			params: { type: "string" },
			image: { type: "string" },
			sample: { type: "string" },
			artifact: { type: "string", multiple: true },
			active: { type: "string" },
		},
	});
	const command = positionals.join(" ");
	switch (command) {
		case "account create": {
			const plan = createAccount(required(values.name, "name"));
			await backend.execute(plan.statements);
			return plan.output;
		}
		case "account list":
			return backend.query("SELECT id AS account_id, name, created_at FROM accounts ORDER BY created_at");
		case "client create":
		case "runner-client create": {
			const accountId = uuid(values.account, "account");
			await accountExists(backend, accountId);
			const kind = command === "client create" ? "api" : "runner";
			const plan = await createClient(accountId, { name: values.name ?? `${kind} client`, kind });
			await backend.execute(plan.statements);
			return plan.output;
		}
		case "client revoke": {
			const plan = revokeClient(uuid(values.id, "id"));
			await backend.execute(plan.statements);
			return plan.output;
		}
		case "voice create": {
			const name = required(values.name, "name");
			const existing = await backend.query(`SELECT id FROM voices WHERE name = ${sqlValue(name)}`);
			if (existing.length) throw new UsageError(`A voice named "${name}" already exists; use voice update`);
			const id = crypto.randomUUID();
			const fields = await voiceFields(backend, id, { engine: "dsp", ...values });
			const plan = createVoice(id, { ...fields, name, engine: fields.engine ?? "dsp" });
			await backend.execute(plan.statements);
			return plan.output;
		}
		case "voice update": {
			const id = await findVoiceId(backend, values.id, values.name);
			const fields = await voiceFields(backend, id, values);
			if (values.rename !== undefined) fields.name = values.rename;
			if (Object.keys(fields).length === 0) throw new UsageError("voice update needs at least one field to change");
			const plan = updateVoice(id, fields);
			await backend.execute(plan.statements);
			return plan.output;
		}
		case "voice list":
			return (
				await backend.query<Record<string, string>>(
					"SELECT id AS voice_id, name, engine, tags, engine_params, is_active FROM voices ORDER BY name",
				)
			).map((row) => ({
				...row,
				tags: JSON.parse(row.tags ?? "[]"),
				engine_params: JSON.parse(row.engine_params ?? "{}"),
			}));
		default:
			throw new UsageError(command ? `Unknown command "${command}"` : "No command given");
	}
}
