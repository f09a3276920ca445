/** `npm run dev`'s child processes: stopping a group lets what its leader started finish stopping. */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { start, stop } from "../../scripts/lib/processes.ts";

const dir = mkdtempSync(path.join(tmpdir(), "vc-dev-processes-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("stop", () => {
	it("waits for the whole group, not only its leader, before killing what is left", async () => {
		const stopped = path.join(dir, "stopped");
		// A leader that exits at once on SIGTERM (as npm does), and a child that needs 0.5 s to stop cleanly. The child
		// says when its handler is in place: the signal must not come before (a slow start on a loaded machine).
		const child = `process.on("SIGTERM", () => setTimeout(() => { require("fs").writeFileSync(${JSON.stringify(stopped)}, "ok"); process.exit(0); }, 500)); setInterval(() => {}, 1000); console.log("child ready");`;
		const managed = start("group", "sh", ["-c", `trap 'exit 0' TERM; node -e '${child}' & wait`], { cwd: dir });
		await new Promise<void>((resolve) => {
			let seen = "";
			managed.child.stdout?.on("data", (data: Buffer) => {
				seen += data.toString();
				if (seen.includes("child ready")) resolve();
			});
		});
		const began = Date.now();
		await stop(managed, 5_000);
		expect(existsSync(stopped)).toBe(true);
		expect(Date.now() - began).toBeLessThan(5_000);
	});
});
