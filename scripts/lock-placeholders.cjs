/**
 * `npm run lock:fix`, after any `npm install` that changes the lockfile.
 *
 * Why: the package registry these machines use lacks some other platforms' optional binaries (for example the
 * macOS and Windows builds of @biomejs/cli-* and @cloudflare/workerd-*). `npm install` then leaves them out of
 * package-lock.json, while `npm ci` still places an unresolved node for each in its ideal tree and refuses the
 * lock as "out of sync". This adds a version-less, optional, platform-restricted entry at each such location,
 * which is what the ideal tree holds there, so `npm ci` accepts the lock and installs exactly what it did before.
 */
const fs = require("node:fs");
const path = require("node:path");
const { execFileSync } = require("node:child_process");

const npmRoot = path.join(execFileSync("npm", ["root", "-g"], { encoding: "utf8" }).trim(), "npm");
const Arborist = require(path.join(npmRoot, "node_modules", "@npmcli", "arborist"));

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
	fs.writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
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
