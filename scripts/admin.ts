/** `npm run admin -- ...`: accounts, API and runner clients, voices. See USAGE. */
// Wrangler's local-proxy warnings (unbound DOs, secrets) are noise for admin commands.
process.env.WRANGLER_LOG ??= "error";

import { parseArgs } from "node:util";
import { type AdminBackend, localBackend, remoteBackend } from "./lib/admin-backend.ts";
import { runAdmin, USAGE, UsageError } from "./lib/admin-commands.ts";

function splitGlobalFlags(argv: string[]) {
	const { values, tokens } = parseArgs({
		args: argv,
		strict: false,
		tokens: true,
		options: {
			remote: { type: "boolean" },
			env: { type: "string" },
			"persist-to": { type: "string" },
			help: { type: "boolean" },
		},
	});
	const globalIndexes = new Set<number>();
	for (const token of tokens ?? []) {
		if (token.kind === "option" && ["remote", "env", "persist-to", "help"].includes(token.name)) {
			globalIndexes.add(token.index);
			if (token.inlineValue === false && token.value !== undefined) globalIndexes.add(token.index + 1);
		}
	}
	return { values, rest: argv.filter((_, i) => !globalIndexes.has(i)) };
}

async function main(): Promise<number> {
	const { values, rest } = splitGlobalFlags(process.argv.slice(2));
	if (values.help || rest.length === 0) {
		console.log(USAGE);
		return values.help ? 0 : 2;
	}
	if (values.env && !values.remote) {
		console.error("--env is only used with --remote");
		return 2;
	}
	let backend: AdminBackend | undefined;
	try {
		backend = values.remote
			? remoteBackend(values.env as string | undefined)
			: await localBackend(values["persist-to"] as string | undefined);
		console.log(JSON.stringify(await runAdmin(rest, backend), null, 2));
		return 0;
	} catch (error) {
		const usage = error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
		console.error(`admin: ${(error as Error).message}`);
		if (usage) console.error("Run `npm run admin -- --help` for usage.");
		return usage ? 2 : 1;
	} finally {
		await backend?.close();
	}
}

process.exitCode = await main();
