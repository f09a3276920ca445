/** Entry point (`npm start`): configuration from the environment, then the runner until it stops. */
import { ConfigError, loadConfig } from "./config.ts";
import { describeError, jsonLogger } from "./logger.ts";
import { runRunner } from "./runner.ts";

try {
	await runRunner(loadConfig());
	process.exit(0);
} catch (error) {
	if (error instanceof ConfigError) {
		process.stderr.write(`${error.message}\n`);
		process.exit(2);
	}
	jsonLogger.error("runner failed", { error: describeError(error) });
	process.exit(1);
}
