/**
 * `npm run bench`: runs every benchmark in turn (`bench/*.bench.ts`, then the runner's own in `bench/runner/`) and prints their
 * figures. Benchmarks start their own local stack, bound their loops, and stop by themselves.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";

const ROOT = path.resolve(import.meta.dirname, "..");
const only = process.argv.slice(2);
const benches = readdirSync(path.join(ROOT, "bench"))
	.filter((f) => f.endsWith(".bench.ts"))
	.filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
	.sort();

// Names only: flags belong to a benchmark (the runner's take theirs in gpu-runner/), and a name that matches nothing
// would otherwise run nothing and succeed.
const known = [...readdirSync(path.join(ROOT, "bench")).filter((f) => f.endsWith(".bench.ts")), "runner"];
if (only.some((o) => o.startsWith("-")) || (benches.length === 0 && !only.includes("runner"))) {
	const help = only.includes("--help") || only.includes("-h");
	(help ? console.log : console.error)(
		[
			...(help ? [] : [`No benchmark matches ${only.join(" ")}.`]),
			"usage: npm run bench [-- NAME ...]   runs the benchmarks whose file names contain a NAME (all without one):",
			...known.map((name) => `  ${name.replace(/\.bench\.ts$/, "")}`),
			"The runner's take flags there: cd gpu-runner && npm run bench -- --threads 2 --jobs 8 --capacity 2 (or --long).",
		].join("\n"),
	);
	process.exit(help ? 0 : 2);
}

let failed = 0;
for (const file of benches) {
	console.log(`\n=== ${file} ===`);
	const result = spawnSync(process.execPath, [path.join(ROOT, "bench", file)], { cwd: ROOT, stdio: "inherit" });
	if (result.status !== 0) {
		failed++;
		console.error(`${file} failed (exit ${result.status})`);
	}
}
if (existsSync(path.join(ROOT, "gpu-runner", "package.json")) && (only.length === 0 || only.includes("runner"))) {
	console.log("\n=== gpu-runner ===");
	const result = spawnSync("npm", ["run", "bench"], { cwd: path.join(ROOT, "gpu-runner"), stdio: "inherit" });
	if (result.status !== 0) failed++;
}
process.exitCode = failed ? 1 : 0;
