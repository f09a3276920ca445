/** `voices create` and `voices delete`: an account's own RVC voices, uploaded with a progress bar per file. */
import { openAsBlob } from "node:fs";
import { stat } from "node:fs/promises";
import path from "node:path";
import type { AccountVoice, VoiceFileRole, VoiceSettings } from "../sdk/index.ts";
import type { Context } from "./commands.ts";
import { UsageError } from "./config.ts";
import { formatBytes, progressBar, statusLine } from "./terminal.ts";

export interface CreateVoiceOptions {
	name: string | undefined;
	files: Partial<Record<VoiceFileRole, string | undefined>>;
	tags: string | undefined;
	description: string | undefined;
	voiceSettings: VoiceSettings | undefined;
	wait: boolean;
	timeoutSeconds: number;
}

/** Creates the voice, uploads each file with its own bar, then follows validation live. Exit 1 when it fails. */
export async function createVoiceCommand(ctx: Context, options: CreateVoiceOptions): Promise<number> {
	if (!options.name) throw new UsageError("voices create needs --name NAME");
	if (!options.files.model) throw new UsageError("voices create needs --model FILE (an RVC .pth or synthesizer .onnx)");
	const files: Partial<Record<VoiceFileRole, { source: Blob; fileName: string }>> = {};
	for (const [role, file] of Object.entries(options.files) as [VoiceFileRole, string | undefined][]) {
		if (!file) continue;
		if (!(await stat(file).catch(() => null))?.isFile()) throw new UsageError(`No such file: ${file} (--${role})`);
		files[role] = { source: await openAsBlob(file), fileName: path.basename(file) };
	}
	let bar: ReturnType<typeof progressBar> | undefined;
	let barRole: VoiceFileRole | undefined;
	let created: AccountVoice;
	try {
		created = await ctx.client.voices.create(
			{
				name: options.name,
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
