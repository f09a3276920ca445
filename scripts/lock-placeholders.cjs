/**
 * `npm run lock:fix`, and the root `postinstall` (`--after-install`), so that `npm install` leaves the lock as it was.
 *
 * Why: the package registry these machines use lacks some other platforms' optional binaries (for example the
 * macOS and Windows builds of @biomejs/cli-* and @cloudflare/workerd-*). `npm install` then leaves them out of
 * package-lock.json, while `npm ci` still places an unresolved node for each in its ideal tree and refuses the
 * lock as "out of sync". This adds a version-less, optional, platform-restricted entry at each such location,
 * which is what the ideal tree holds there, so `npm ci` accepts the lock and installs exactly what it did before.
 *
 * Every `npm install` drops these entries again (it resolves them, the registry has no such version, and an
 * optional dependency that fails to resolve is pruned), and writes the lock in package.json's formatting (tabs).
 * So the root `postinstall` runs this with `--after-install`: when the lock holds no placeholder any more, they are
 * added back; when it still holds them (`npm ci`, which never writes the lock), nothing is done. The lock is written
 * the way npm writes it, so a plain `npm install` leaves `git status` clean.
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

const isPlaceholder = (entry) => entry.optional === true && entry.version === undefined;

function platformOf(name) {
	const n = name.toLowerCase();
	const entry = { optional: true };
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
	if (process.argv.includes("--after-install")) {
		const lock = JSON.parse(fs.readFileSync(path.join(process.cwd(), "package-lock.json"), "utf8"));
		if (Object.values(lock.packages).some(isPlaceholder)) return;
	}
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
	const virtual = new Arborist({ path: root });
	await virtual.loadVirtual();
	const ideal = new Arborist({ path: root });
	await ideal.buildIdealTree();
	const lock = JSON.parse(fs.readFileSync(lockPath, "utf8"));
	// Unresolvable optional packages are the ideal tree's nodes without a version.
	const missing = [...ideal.idealTree.inventory.entries()].filter(
		([location, node]) => !node.version && !(location in lock.packages),
	);
	for (const [location, node] of missing) lock.packages[location] = platformOf(node.name);
	fs.writeFileSync(lockPath, `${JSON.stringify(lock, null, indentOf(process.cwd()))}\n`);
	console.log(
		missing.length
			? `added ${missing.length} placeholder(s): ${missing.map(([l]) => l).join(", ")}`
			: "lockfile already complete",
	);
}

main().catch((error) => {
	console.error(error.message);
	process.exit(1);
});
