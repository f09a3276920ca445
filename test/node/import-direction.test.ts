/**
 * Which way imports point between the top-level folders (issue 11), read from the source files themselves:
 * - gpu-runner, sdk, cli, scripts and bench reach into src/ only through src/contracts/;
 * - durable-objects/ may use src/'s domain modules (the broker fails a conversion through the state machine);
 * - src/ never imports durable-objects/, except src/index.ts exporting the classes;
 * - src/contracts/ depends on nothing in src/ but other contracts and the dependency-free helpers in src/lib/.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const FOLDERS = ["src", "durable-objects", "gpu-runner", "sdk", "cli", "scripts", "bench"] as const;
const SOURCE = /\.(ts|js|cjs|mjs)$/;
/** `from "x"`, `import "x"`, `import("x")`, `require("x")`: the module specifiers of a file. */
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)["']([^"']+)["']/g;

interface Edge {
	from: string;
	to: string;
}

function sourceFiles(dir: string): string[] {
	return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
		const relative = path.posix.join(dir, entry.name);
		if (entry.isDirectory()) return entry.name === "node_modules" ? [] : sourceFiles(relative);
		return SOURCE.test(entry.name) ? [relative] : [];
	});
}

const topFolder = (file: string) => file.split("/")[0] ?? "";

/** Every import, from any file of the listed folders, of a file in another top-level folder. */
function crossFolderEdges(): Edge[] {
	return FOLDERS.flatMap((folder) =>
		sourceFiles(folder).flatMap((file) =>
			[...readFileSync(path.join(ROOT, file), "utf8").matchAll(SPECIFIER)]
				.map((match) => match[1] ?? "")
				.filter((specifier) => specifier.startsWith("."))
				.map((specifier) => ({
					from: file,
					to: path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier)),
				}))
				.filter((edge) => topFolder(edge.to) !== topFolder(edge.from)),
		),
	);
}

const edges = crossFolderEdges();
const show = (list: Edge[]) => list.map((edge) => `${edge.from} -> ${edge.to}`);

describe("import direction between top-level folders", () => {
	it("finds the edges it checks", () => {
		// The runner, the SDK and the broker do use src/; an empty list would mean the scan is broken.
		const pairs = new Set(edges.map((edge) => `${topFolder(edge.from)} -> ${topFolder(edge.to)}`));
		expect(pairs).toContain("gpu-runner -> src");
		expect(pairs).toContain("sdk -> src");
		expect(pairs).toContain("durable-objects -> src");
		expect(pairs).toContain("src -> durable-objects");
	});

	it("reaches src/ from the runner, the SDK, the CLI, scripts and benches only through src/contracts/", () => {
		const outside = edges.filter(
			(edge) =>
				topFolder(edge.from) !== "durable-objects" &&
				edge.to.startsWith("src/") &&
				!edge.to.startsWith("src/contracts/"),
		);
		expect(show(outside)).toEqual([]);
	});

	it("imports durable-objects/ from src/ only in src/index.ts", () => {
		const fromSrc = edges.filter((edge) => topFolder(edge.from) === "src" && topFolder(edge.to) === "durable-objects");
		expect(fromSrc.map((edge) => edge.from)).toEqual(["src/index.ts", "src/index.ts"]);
	});

	it("keeps src/contracts/ free of the Worker's modules", () => {
		const fromContracts = sourceFiles("src/contracts").flatMap((file) =>
			[...readFileSync(path.join(ROOT, file), "utf8").matchAll(SPECIFIER)]
				.map((match) => match[1] ?? "")
				.filter((specifier) => specifier.startsWith("."))
				.map((specifier) => ({
					from: file,
					to: path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier)),
				})),
		);
		const outside = fromContracts.filter((edge) => !/^src\/(contracts|lib)\//.test(edge.to));
		expect(show(outside)).toEqual([]);
	});
});
