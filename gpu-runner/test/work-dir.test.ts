/** Cleaning the shared work dir at start, on a real folder and with real processes alive and gone. */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { processAlive, processWorkDir, removeStaleWork } from "../src/work-dir.ts";

let dir: string;
const children: ChildProcess[] = [];

beforeEach(() => {
	dir = mkdtempSync(join(tmpdir(), "work-dir-"));
});
afterEach(() => {
	for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
	rmSync(dir, { recursive: true, force: true });
});

/** A real process that stays alive for the test, as another runner sharing the folder would. */
function liveProcess(): number {
	const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 30000)"], { stdio: "ignore" });
	children.push(child);
	if (child.pid === undefined) throw new Error("no child process");
	return child.pid;
}

/** The pid of a process that has exited, as a runner killed mid-job has. */
async function deadProcess(): Promise<number> {
	const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
	await new Promise((resolve) => child.once("exit", resolve));
	if (child.pid === undefined) throw new Error("no child process");
	return child.pid;
}

function file(path: string, bytes: number): void {
	mkdirSync(join(path, ".."), { recursive: true });
	writeFileSync(path, new Uint8Array(bytes));
}

describe("removeStaleWork", () => {
	it("removes a dead runner's folder and loose outputs, and keeps a live runner's folder and unrelated files", async () => {
		const dead = await deadProcess();
		const live = liveProcess();
		expect(processAlive(dead)).toBe(false);
		expect(processAlive(live)).toBe(true);
		file(join(processWorkDir(dir, dead), "output-1.wav"), 1000);
		file(join(processWorkDir(dir, dead), "output-2.wav"), 500);
		file(join(dir, "output-6f1c.wav"), 300); // left by a runner from before process folders
		file(join(processWorkDir(dir, live), "output-3.wav"), 700);
		file(join(dir, "notes.txt"), 10);
		file(join(dir, "output-notes.txt"), 10);
		file(join(dir, "runner-cache", "model.onnx"), 10);
		file(join(dir, "runner-0", "x"), 10);
		file(join(dir, "runner-01", "x"), 10);
		mkdirSync(join(dir, "output-dir.wav"));

		const removed = await removeStaleWork(dir, { ownPid: process.pid });

		expect(removed).toEqual({ files: 3, bytes: 1800, failures: [] });
		expect(readdirSync(dir).sort()).toEqual(
			[
				`runner-${live}`,
				"notes.txt",
				"output-notes.txt",
				"runner-cache",
				"runner-0",
				"runner-01",
				"output-dir.wav",
			].sort(),
		);
		expect(readdirSync(processWorkDir(dir, live))).toEqual(["output-3.wav"]);
	});

	it("removes the folder of its own pid, which an earlier process had (a restarted container reuses pids)", async () => {
		const live = liveProcess();
		file(join(processWorkDir(dir, live), "output-1.wav"), 1234);
		const removed = await removeStaleWork(dir, { ownPid: live });
		expect(removed).toEqual({ files: 1, bytes: 1234, failures: [] });
		expect(readdirSync(dir)).toEqual([]);
	});

	it("counts nothing when the work dir does not exist yet", async () => {
		expect(await removeStaleWork(join(dir, "missing"))).toEqual({ files: 0, bytes: 0, failures: [] });
	});
});
