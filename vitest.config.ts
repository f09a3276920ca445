import { randomBytes } from "node:crypto";
import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { unstable_readConfig } from "wrangler";
import { keepLocalRunsLocal } from "./scripts/lib/local-only.ts";

// Tests never reach out (no sample `request.cf` download, no wrangler metrics).
keepLocalRunsLocal();

const key = (id: string) => `${id}:${randomBytes(32).toString("base64url")}`;

export default defineConfig(async () => {
	const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
	const { ratelimits } = unstable_readConfig({ config: path.join(import.meta.dirname, "wrangler.toml") });
	return {
		test: {
			projects: [
				{
					plugins: [
						cloudflareTest({
							wrangler: { configPath: "./wrangler.toml" },
							remoteBindings: false,
							miniflare: {
								// Fresh keys for every run: tests never depend on a checked-in secret.
								bindings: {
									TEST_MIGRATIONS: migrations,
									// The request budgets as wrangler.toml sets them, for the tests that exhaust them.
									TEST_RATE_LIMITS: ratelimits,
									TOKEN_SIGNING_KEY: key("test-1"),
									STORAGE_SIGNING_KEY: key("storage-1"),
									WEBHOOK_SECRET_KEY: key("1"),
									// A developer's .dev.vars (written by `npm run dev`) must not change what tests see.
									ALLOW_LOCAL_WEBHOOK_URLS: "false",
									PLAYGROUND_CLIENT_ID: "",
									PLAYGROUND_CLIENT_SECRET: "",
									// R2's smallest part, so the multipart output path is tested with parts of a few MiB.
									OUTPUT_PART_BYTES: String(5 * 1024 ** 2),
									// Voice files over 100 kB go up in parts, so the committed RVC fixtures take both paths.
									VOICE_SINGLE_UPLOAD_BYTES: "100000",
								},
							},
						}),
					],
					test: {
						name: "worker",
						include: ["test/worker/**/*.test.ts"],
						setupFiles: ["./test/worker/apply-migrations.ts"],
					},
				},
				// The runner's own tests, with its own config.
				"./gpu-runner",
				{
					test: {
						name: "node",
						include: ["test/node/**/*.test.ts"],
						setupFiles: ["./gpu-runner/test/helpers/scratch-cleanup.ts"],
						environment: "node",
						testTimeout: 120_000,
						hookTimeout: 180_000,
					},
				},
			],
		},
	};
});
