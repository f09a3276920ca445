/**
 * `npm run lock:fix`, and the root `postinstall`, so that `npm install` leaves the lock as it was.
 *
 * Why: the package registry these machines use lacks some other platforms' optional binaries (for example the
 * macOS and Windows builds of @biomejs/cli-* and @cloudflare/workerd-*), and which of them it carries changes over
 * time. `npm install` leaves out of package-lock.json those it cannot resolve, while `npm ci` still places a node for
 * each in its ideal tree and refuses the lock as "out of sync". This adds, at each such location, an optional,
 * platform-restricted entry with the exact version its parent pins (and the parent's `dev` flag), so `npm ci`
 * accepts the lock without asking the registry about them, whether or not the registry has them by then: an entry
 * without a version made `npm ci` look the package up, and once the registry did carry it, npm failed with
 * "Invalid Version" comparing the two. `npm ci` skips them on this platform, as it does any other platform's binary.
 *
 * `npm install` keeps such entries (it trusts a versioned lock entry). The root `postinstall` runs this, which adds
 * entries only where they are missing, e.g. after a dependency was added. The lock is
 * then rewritten by npm itself (`npm install --package-lock-only` on a copy), so a plain `npm install` after it
 * leaves `git status` clean.
 */
const fs = require("node:fs");
const path = require("node:path");
const { execFileSync } = require("node:child_process");

/** The npm that runs this script (lifecycle scripts get its path), else the global one: its own Arborist. */
function npmRoot() {
	const cli = process.env.npm_execpath;
	if (cli && path.basename(cli) === "npm-cli.js") return path.resolve(path.dirname(cli), "..");
	return path.join(execFileSync("npm", ["root", "-g"], { encoding: "utf8" }).trim(), "npm");
}

/** npm writes the lock with package.json's indentation and a final newline; so does this script. */
function indentOf(root) {
	const match = /^[ \t]+/m.exec(fs.readFileSync(path.join(root, "package.json"), "utf8"));
	return match ? match[0] : 2;
}

/** The entry for another platform's binary that the ideal tree holds at `node`, pinned as its parent asks. */
function placeholderFor(node) {
	const n = node.name.toLowerCase();
	const wanted = [...node.edgesIn].map((edge) => edge.spec).find(Boolean);
	const entry = { version: wanted, ...(node.dev ? { dev: true } : {}), optional: true };
	if (n.includes("darwin")) entry.os = ["darwin"];
	else if (n.includes("win32") || n.includes("windows")) entry.os = ["win32"];
	else if (n.includes("android")) entry.os = ["android"];
	else if (n.includes("freebsd")) entry.os = ["freebsd"];
	if (n.includes("musl")) entry.libc = ["musl"];
	if (n.includes("arm64")) entry.cpu = ["arm64"];
	else if (n.includes("x64") || /-64$/.test(n)) entry.cpu = ["x64"];
	return entry;
}

/** A copy of the manifests and the lock without node_modules: what `npm ci` starts from. */
function cleanCopy(root) {
	const dir = fs.mkdtempSync(path.join(require("node:os").tmpdir(), "lock-fix-"));
	const lock = JSON.parse(fs.readFileSync(path.join(root, "package-lock.json"), "utf8"));
	const manifests = [
		"package.json",
		...Object.keys(lock.packages)
			.filter((k) => k && !k.includes("node_modules"))
			.map((k) => path.join(k, "package.json")),
	];
	for (const file of manifests) {
		fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
		fs.copyFileSync(path.join(root, file), path.join(dir, file));
	}
	return dir;
}

async function main() {
	const root = cleanCopy(process.cwd());
	const lockPath = path.join(root, "package-lock.json");
	fs.copyFileSync(path.join(process.cwd(), "package-lock.json"), lockPath);
	try {
		await settle(root, lockPath);
		fs.copyFileSync(lockPath, path.join(process.cwd(), "package-lock.json"));
	} finally {
		fs.rmSync(root, { recursive: true, force: true });
	}
}

async function settle(root, lockPath) {
	const Arborist = require(path.join(npmRoot(), "node_modules", "@npmcli", "arborist"));
	const semver = require(path.join(npmRoot(), "node_modules", "semver"));
	const virtual = new Arborist({ path: root });
	await virtual.loadVirtual();
	const ideal = new Arborist({ path: root });
	await ideal.buildIdealTree();
	const lock = JSON.parse(fs.readFileSync(lockPath, "utf8"));
	// Other platforms' optional packages that `npm install` left out (the registry lacked them when it ran).
	const missing = [...ideal.idealTree.inventory.entries()].filter(
		([location, node]) => location !== "" && node.optional && !(location in lock.packages),
	);
	if (missing.length === 0) return console.log("lockfile already complete");
	for (const [location, node] of missing) {
		const entry = placeholderFor(node);
		if (!semver.valid(entry.version)) throw new Error(`${location}: its parent pins no exact version`);
		lock.packages[location] = entry;
	}
	fs.writeFileSync(lockPath, `${JSON.stringify(lock, null, indentOf(process.cwd()))}\n`);
	// npm's own order and formatting, so the next `npm install` has nothing to rewrite.
	execFileSync("npm", ["install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund"], {
		cwd: root,
		stdio: "ignore",
	});
	console.log(`added ${missing.length} placeholder(s): ${missing.map(([l]) => l).join(", ")}`);
}

main().catch((error) => {
	console.error(error.message);
	process.exit(1);
});
