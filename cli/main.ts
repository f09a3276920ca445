/**
 * `npm run cli -- <command>`: the voice conversion API from a terminal, built on the SDK. Results go to stdout
 * (`--json` for scripts), progress and messages to stderr. Exit codes: 0 done, 1 the service or the conversion
 * failed, 2 the command line was wrong, 130 interrupted.
 */
import { parseArgs } from "node:util";
import {
	defaultTokenUrl,
	F0_METHODS,
	REQUESTED_PITCH_SHIFTS,
	VoiceConversionClient,
	VoiceConversionError,
} from "../sdk/index.ts";
import { conversionsCommand, convertCommand, parseVoiceSettings, voicesCommand, webhooksCommand } from "./commands.ts";
import { ENV, resolveConnection, UsageError } from "./config.ts";
import { stderr } from "./terminal.ts";
import { tokenCache } from "./token-cache.ts";
import { createVoiceCommand, deleteVoiceCommand } from "./voice-commands.ts";

const HELP = `Voice conversion CLI

Usage: npm run cli -- <command> [options]

Commands
  convert <file> --voice NAME [--pitch P] [--preview] [--out FILE]
                          upload a WAV/MP3/FLAC, convert it, follow the status, save the WAV
        --pitch           ${REQUESTED_PITCH_SHIFTS.join(" | ")} (default same_octave;
                          auto picks the shift that suits the voice's range)
        --preview         convert only the first 10 seconds
      voice settings (optional; a setting the voice cannot honour is refused):
        --index-rate R    0..1, rvc voices with a feature index
        --protect P       0..0.5, rvc voices with a feature index and pitch input
        --rms-mix-rate R  0..1, rvc voices
        --formant-shift=S -12..12 semitones, dsp voices (rvc: 0 only)
        --f0-method M     ${F0_METHODS.join(" | ")}, rvc voices
        --out FILE        where to save (default <file>.<voice>.wav)
        --no-wait         print the conversion id and return
        --timeout SECONDS stop waiting after this long (default 1800)
  voices                  list the voice models (the service's and your own, with owner and status)
  voices create --name NAME --model FILE [--index FILE] [--image FILE] [--sample FILE]
                [--tags a,b] [--description TEXT] [voice settings as for convert]
                          upload your own RVC voice (.pth or .onnx, faiss .index, PNG/JPEG/WebP image,
                          WAV/MP3/FLAC sample) with a progress bar per file, then follow its validation
        --archive FILE    instead of --model and --index: a voice published as a .zip of its
                          .pth and .index (RVC's trained_ index and other files are left out);
                          with it, --model ENTRY and --index ENTRY pick one where the zip holds several
        --no-wait         print the voice id once uploaded and return
  voices delete <id>      delete one of your voices (running conversions finish)
  conversions list [--status S] [--limit N] [--cursor C]
  conversions show <id>
  conversions download <id> [--out FILE]
  webhooks create --url URL [--events conversion_completed,conversion_failed] [--description TEXT]
  webhooks list
  webhooks test <id>
  webhooks deliveries <id> [--limit N]
  webhooks delete <id>

Connection (flags, else environment, else the local demo client of \`npm run dev\`)
  --base-url URL          ${ENV.baseUrl}
  --client-id ID          ${ENV.clientId}
  --client-secret SECRET  ${ENV.clientSecret}
  --token-url URL         ${ENV.tokenUrl} (default <base-url>/oauth2/token)

  --json                  print results as JSON
  -h, --help              this help
`;

const OPTIONS = {
	voice: { type: "string" },
	pitch: { type: "string", default: "same_octave" },
	"index-rate": { type: "string" },
	protect: { type: "string" },
	"rms-mix-rate": { type: "string" },
	"formant-shift": { type: "string" },
	"f0-method": { type: "string" },
	preview: { type: "boolean", default: false },
	out: { type: "string", short: "o" },
	"no-wait": { type: "boolean", default: false },
	timeout: { type: "string", default: "1800" },
	status: { type: "string" },
	limit: { type: "string" },
	cursor: { type: "string" },
	url: { type: "string" },
	events: { type: "string" },
	description: { type: "string" },
	"base-url": { type: "string" },
	"client-id": { type: "string" },
	"client-secret": { type: "string" },
	"token-url": { type: "string" },
	name: { type: "string" },
	model: { type: "string" },
	index: { type: "string" },
	archive: { type: "string" },
	image: { type: "string" },
	sample: { type: "string" },
	tags: { type: "string" },
	json: { type: "boolean", default: false },
	help: { type: "boolean", short: "h", default: false },
} as const;

export async function main(argv: string[]): Promise<number> {
	const controller = new AbortController();
	const onInterrupt = () => controller.abort(new Error("interrupted"));
	process.once("SIGINT", onInterrupt);
	try {
		const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
		const [command, ...rest] = positionals;
		if (values.help || !command || command === "help") {
			process.stdout.write(HELP);
			return command || values.help ? 0 : 2;
		}
		const connection = resolveConnection(values);
		if (connection.source === "local demo" && !values.json)
			stderr.write(`Using the local demo client at ${connection.baseUrl}\n`);
		const client = new VoiceConversionClient({
			...connection,
			// A token kept between runs (cli/token-cache.ts): a loop of CLI calls asks for one token, not one a call.
			tokenStore: tokenCache({ ...connection, tokenUrl: connection.tokenUrl ?? defaultTokenUrl(connection.baseUrl) }),
			// A pause the service asked for (429 past a request budget, 503) is said, not waited out in silence.
			onRetry: ({ error, delayMs }) => stderr.write(`${error.message}; retrying in ${Math.ceil(delayMs / 1000)} s\n`),
		});
		const ctx = {
			client,
			print: (text: string) => text && process.stdout.write(`${text}\n`),
			err: stderr,
			json: values.json,
			signal: controller.signal,
		};
		switch (command) {
			case "convert": {
				const [input] = rest;
				if (!input) throw new UsageError("convert needs a source file: npm run cli -- convert input.mp3 --voice NAME");
				if (!values.voice) throw new UsageError("convert needs --voice NAME (see `npm run cli -- voices`)");
				const timeoutSeconds = Number(values.timeout);
				if (!(timeoutSeconds > 0)) throw new UsageError("--timeout must be a positive number of seconds");
				return await convertCommand(ctx, {
					input,
					voice: values.voice,
					pitch: values.pitch,
					voiceSettings: parseVoiceSettings(values),
					preview: values.preview,
					out: values.out,
					wait: !values["no-wait"],
					timeoutSeconds,
				});
			}
			case "voices": {
				const [sub, id] = rest;
				if (sub === "create") {
					const timeoutSeconds = Number(values.timeout);
					if (!(timeoutSeconds > 0)) throw new UsageError("--timeout must be a positive number of seconds");
					return await createVoiceCommand(ctx, {
						name: values.name,
						files: { model: values.model, index: values.index, image: values.image, sample: values.sample },
						archive: values.archive,
						tags: values.tags,
						description: values.description,
						voiceSettings: parseVoiceSettings(values),
						wait: !values["no-wait"],
						timeoutSeconds,
					});
				}
				if (sub === "delete") return await deleteVoiceCommand(ctx, id);
				if (sub !== undefined && sub !== "list") {
					throw new UsageError(`Unknown voices command "${sub}": use voices, voices create or voices delete`);
				}
				await voicesCommand(ctx);
				return 0;
			}
			case "conversions":
				return await conversionsCommand(ctx, rest, values);
			case "webhooks":
				return await webhooksCommand(ctx, rest, values);
			default:
				throw new UsageError(`Unknown command "${command}". Run \`npm run cli -- --help\``);
		}
	} catch (error) {
		if (controller.signal.aborted) {
			stderr.write("Interrupted.\n");
			return 130;
		}
		if (error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
			stderr.write(`${(error as Error).message}\n`);
			return 2;
		}
		if (error instanceof VoiceConversionError) {
			const status = error.status === null ? "" : ` (HTTP ${error.status}, ${error.code})`;
			stderr.write(`Error: ${error.describe()}${status}\n`);
			if (error.status === 401) stderr.write("Check the client id, secret and base URL.\n");
			return error.code === "invalid_request" || error.code === "unsupported_voice_setting" ? 2 : 1;
		}
		stderr.write(`Error: ${(error as Error).message}\n`);
		return 1;
	} finally {
		process.off("SIGINT", onInterrupt);
	}
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
