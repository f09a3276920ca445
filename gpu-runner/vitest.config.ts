import { createRequire } from "node:module";
import { defineConfig } from "vitest/config";

const require = createRequire(import.meta.url);

export default defineConfig({
	resolve: {
		// The shared contracts live at the repository root (`../src/contracts`) and import `zod`. Until the
		// root workspace hoists it, resolve it from this package so the runner can be tested on its own.
		alias: [{ find: /^zod$/, replacement: require.resolve("zod") }],
	},
	test: {
		environment: "node",
		include: ["test/**/*.test.ts"],
		setupFiles: ["./test/helpers/scratch-cleanup.ts"],
		testTimeout: 60_000,
		hookTimeout: 60_000,
	},
});
