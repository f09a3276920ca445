/**
 * onnxruntime-node's telemetry uploader stays off in the runner (`onnxruntime-telemetry-off.ts`): loading the
 * library and running the provider self-test, as the runner does at start, leaves no device id or event database
 * in the home folder and no telemetry files in the temp folder, unless the operator asks for telemetry.
 */
import { execFile } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../helpers/scratch.ts";

const RUNNER_ROOT = join(import.meta.dirname, "..", "..");

/** Every path under `dir`, relative to it. */
function filesUnder(dir: string): string[] {
	return readdirSync(dir, { recursive: true, encoding: "utf8" }).sort();
}

/** Runs the CPU provider's self-test in a fresh Node process whose home and temp folders are empty scratch folders. */
async function selfTestIn(extraEnv: NodeJS.ProcessEnv): Promise<{ home: string[]; temp: string[] }> {
	const home = scratchDir("ort-home");
	const temp = scratchDir("ort-temp");
	const script = `
		const { selectExecutionProvider } = await import("./src/engines/rvc/execution-provider.ts");
		const { provider } = await selectExecutionProvider(["cpu"]);
		if (provider !== "cpu") throw new Error(provider);
	`;
	const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, TMPDIR: temp, ...extraEnv };
	await promisify(execFile)(
		process.execPath,
		["--import", "./src/resolve-fallback.ts", "--input-type=module", "-e", script],
		{ cwd: RUNNER_ROOT, env },
	);
	return { home: filesUnder(home), temp: filesUnder(temp) };
}

describe("onnxruntime telemetry", () => {
	it("is off when the runner loads onnxruntime: nothing written to the home or temp folder", async () => {
		expect(await selfTestIn({})).toEqual({ home: [], temp: [] });
	});

	it("follows the operator where they set ORT_DISABLE_TELEMETRY themselves", async () => {
		const { home, temp } = await selfTestIn({ ORT_DISABLE_TELEMETRY: "0" });
		// What the uploader keeps when it runs: the files the default above must not leave.
		expect(home).toContain(join(".cache", "Microsoft", "DeveloperTools", ".onnxruntime", "deviceid"));
		expect(temp.some((name) => /^mat-debug-\d+\.log$/.test(name))).toBe(true);
	});
});
