/**
 * Where the CLI's credentials come from, first match wins: flags, then environment variables, then (only when
 * neither names a client) the demo client that `npm run dev` saved for the local service, with the address that
 * service listens on (written by scripts/lib/seed.ts).
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

export const ENV = {
	baseUrl: "VOICE_API_URL",
	clientId: "VOICE_API_CLIENT_ID",
	clientSecret: "VOICE_API_CLIENT_SECRET",
	tokenUrl: "VOICE_API_TOKEN_URL",
} as const;

/** `npm run dev`'s address without PORT: what demo files written before they carried `base_url` were for. */
export const LOCAL_BASE_URL = "http://127.0.0.1:8787";
export const DEMO_CREDENTIALS_FILE = path.resolve(import.meta.dirname, "..", ".wrangler", "demo-credentials.json");

export interface Connection {
	baseUrl: string;
	clientId: string;
	clientSecret: string;
	tokenUrl?: string;
	/** Where the credentials came from, for messages. */
	source: "flags" | "environment" | "local demo";
}

export interface ConnectionFlags {
	"base-url"?: string;
	"client-id"?: string;
	"client-secret"?: string;
	"token-url"?: string;
}

export class UsageError extends Error {}

export function resolveConnection(
	flags: ConnectionFlags,
	env: NodeJS.ProcessEnv = process.env,
	demoFile = DEMO_CREDENTIALS_FILE,
): Connection {
	const fromFlags = flags["client-id"] ?? flags["client-secret"];
	const clientId = flags["client-id"] ?? env[ENV.clientId];
	const clientSecret = flags["client-secret"] ?? env[ENV.clientSecret];
	const baseUrl = flags["base-url"] ?? env[ENV.baseUrl];
	const tokenUrl = flags["token-url"] ?? env[ENV.tokenUrl];
	if (clientId || clientSecret) {
		if (!clientId || !clientSecret) {
			throw new UsageError(
				`Both a client id and a client secret are needed: --client-id/--client-secret or ${ENV.clientId}/${ENV.clientSecret}`,
			);
		}
		if (!baseUrl) throw new UsageError(`Which service? Pass --base-url or set ${ENV.baseUrl}`);
		return { baseUrl, clientId, clientSecret, tokenUrl, source: fromFlags ? "flags" : "environment" };
	}
	if (existsSync(demoFile)) {
		const demo = JSON.parse(readFileSync(demoFile, "utf8")) as {
			client_id: string;
			client_secret: string;
			base_url?: string;
		};
		return {
			baseUrl: baseUrl ?? demo.base_url ?? LOCAL_BASE_URL,
			clientId: demo.client_id,
			clientSecret: demo.client_secret,
			tokenUrl,
			source: "local demo",
		};
	}
	throw new UsageError(
		`No credentials. Pass --client-id and --client-secret (and --base-url), or set ${ENV.clientId}, ${ENV.clientSecret} and ${ENV.baseUrl}. For the local service, run \`npm run dev\` first.`,
	);
}
