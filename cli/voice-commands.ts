/** `voices create` and `voices delete`: an account's own RVC voices, uploaded with a progress bar per file. */
import { createWriteStream, openAsBlob } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { type AccountVoice, readVoiceArchive, type VoiceFileRole, type VoiceSettings } from "../sdk/index.ts";
import type { Context } from "./commands.ts";
import { UsageError } from "./config.ts";
import { formatBytes, progressBar, statusLine } from "./terminal.ts";

export interface CreateVoiceOptions {
	name: string | undefined;
	files: Partial<Record<VoiceFileRole, string | undefined>>;
	/** A voice published as a zip: its model and index take the place of `files.model` and `files.index`. */
	archive: string | undefined;
	tags: string | undefined;
	description: string | undefined;
	voiceSettings: VoiceSettings | undefined;
	wait: boolean;
	timeoutSeconds: number;
}

type VoiceFiles = Partial<Record<VoiceFileRole, { source: Blob; fileName: string }>>;

/** Creates the voice, uploads each file with its own bar, then follows validation live. Exit 1 when it fails. */
export async function createVoiceCommand(ctx: Context, options: CreateVoiceOptions): Promise<number> {
	if (!options.name) throw new UsageError("voices create needs --name NAME");
	if (!options.files.model && !options.archive) {
		throw new UsageError(
			"voices create needs --model FILE (an RVC .pth or synthesizer .onnx) or --archive FILE (a .zip)",
		);
	}
	// With --archive, --model and --index name entries of the archive (one of several), not files.
	const { model, index, ...others } = options.files;
	const onDisk: CreateVoiceOptions["files"] = options.archive ? others : options.files;
	for (const [flag, file] of Object.entries({ ...onDisk, archive: options.archive })) {
		const found = file ? await stat(file).catch(() => null) : null;
		if (file && !found?.isFile()) throw new UsageError(`No such file: ${file} (--${flag})`);
	}
	const files: VoiceFiles = {};
	for (const [role, file] of Object.entries(onDisk) as [VoiceFileRole, string | undefined][]) {
		if (file) files[role] = { source: await openAsBlob(file), fileName: path.basename(file) };
	}
	if (!options.archive) return uploadAndFollow(ctx, options, options.name, files);
	// Compressed entries are inflated to files in a folder of their own, not into memory, removed once uploaded.
	const folder = await mkdtemp(path.join(tmpdir(), "voice-archive-"));
	try {
		Object.assign(files, await filesFromArchive(ctx, options.archive, folder, { model, index }));
		return await uploadAndFollow(ctx, options, options.name, files);
	} finally {
		await rm(folder, { recursive: true, force: true });
	}
}

/**
 * The model and index of a voice published as a zip (compressed ones inflated into `folder`), or the entries named
 * where it holds several; says what it took.
 */
async function filesFromArchive(
	ctx: Context,
	archivePath: string,
	folder: string,
	entries: { model: string | undefined; index: string | undefined },
): Promise<VoiceFiles> {
	let inflated = 0;
	const archive = await readVoiceArchive(await openAsBlob(archivePath), {
		...(entries.model ? { model: entries.model } : {}),
		...(entries.index ? { index: entries.index } : {}),
		inflateTo: async (stream, entry) => {
			const file = path.join(folder, `${inflated++}-${path.basename(entry)}`);
			await stream.pipeTo(Writable.toWeb(createWriteStream(file)) as WritableStream<Uint8Array>);
			return openAsBlob(file);
		},
	});
	const used = [`model ${archive.model.entry}`, ...(archive.index ? [`index ${archive.index.entry}`] : [])];
	const left = archive.skipped.map((s) => `${s.entry} (${s.reason})`);
	ctx.err.write(
		`From ${path.basename(archivePath)}: ${used.join(", ")}${left.length ? `; left out ${left.join(", ")}` : ""}\n`,
	);
	return { model: archive.model, ...(archive.index ? { index: archive.index } : {}) };
}

async function uploadAndFollow(
	ctx: Context,
	options: CreateVoiceOptions,
	name: string,
	files: VoiceFiles,
): Promise<number> {
	let bar: ReturnType<typeof progressBar> | undefined;
	let barRole: VoiceFileRole | undefined;
	let created: AccountVoice;
	try {
		created = await ctx.client.voices.create(
			{
				name,
				...(options.tags ? { tags: options.tags.split(",").map((tag) => tag.trim()) } : {}),
				...(options.description ? { description: options.description } : {}),
				...(options.voiceSettings ? { voice_settings: options.voiceSettings } : {}),
				files: files as Required<typeof files>,
			},
			{
				signal: ctx.signal,
				onProgress: (role, { loaded, total }) => {
					if (role !== barRole) {
						bar?.done(files[barRole as VoiceFileRole]?.source.size ?? 0);
						bar = progressBar(`Uploading ${role.padEnd(6)}`, ctx.err);
						barRole = role;
					}
					bar?.update(loaded, total);
				},
			},
		);
		bar?.done(files[barRole as VoiceFileRole]?.source.size ?? 0);
	} catch (error) {
		bar?.abort();
		throw error;
	}
	const sizes = Object.entries(files).map(([role, file]) => `${role} ${formatBytes(file.source.size)}`);
	ctx.err.write(`Voice ${created.id}: ${created.name} (${sizes.join(", ")})\n`);
	if (!options.wait) {
		ctx.print(ctx.json ? JSON.stringify(created, null, 2) : created.id);
		return 0;
	}
	const status = statusLine(ctx.err);
	let voice: AccountVoice;
	try {
		voice = await ctx.client.waitForVoice(created.id, {
			signal: ctx.signal,
			timeoutMs: options.timeoutSeconds * 1000,
			intervalMs: 1000,
			onUpdate: (v) => status.set(v.status),
		});
	} catch (error) {
		status.stop("Stopped waiting");
		throw error;
	}
	status.stop(voice.status === "ready" ? "Ready" : "Failed");
	if (voice.status === "failed") {
		ctx.err.write(`Validation failed: ${voice.error_message ?? "no reason given"}\n`);
		if (ctx.json) ctx.print(JSON.stringify(voice, null, 2));
		return 1;
	}
	const range = voice.pitch_range_hz
		? `, pitch range ${Math.round(voice.pitch_range_hz.low)}-${Math.round(voice.pitch_range_hz.high)} Hz`
		: "";
	ctx.print(ctx.json ? JSON.stringify(voice, null, 2) : `Voice "${voice.name}" is ready (${voice.id})${range}`);
	return 0;
}

export async function deleteVoiceCommand(ctx: Context, id: string | undefined): Promise<number> {
	if (!id) throw new UsageError("voices delete needs the voice's id: npm run cli -- voices delete <id>");
	const result = await ctx.client.voices.delete(id, { signal: ctx.signal });
	ctx.print(ctx.json ? JSON.stringify(result, null, 2) : `Deleted voice ${id}`);
	return 0;
}
