/**
 * The synthesizer artifact as onnxruntime can load it. A voice's `synthesizer` may be an ONNX export or the
 * RVC checkpoint itself (`.pth`, recognised by its bytes: a zip); a checkpoint is read, built into an ONNX
 * graph (`synthesizer-graph.ts`) and written once beside it as `<sha256>.synthesizer-v<N>.onnx`, named by the
 * checkpoint's checksum and the graph builder's version, so every later job (and every runner process sharing
 * the folder) loads the built file directly. The file appears by an atomic rename, so a crash mid-write never
 * leaves a partial model under the final name, and its own checksum beside it (`.onnx.sha256`) is checked on its
 * first use in each process, so one damaged later is built again. Graphs an earlier builder version made from the
 * same checkpoint are removed once the new one is in place.
 */
import { createHash, randomUUID } from "node:crypto";
import { open, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { hasZipSignature } from "../../../../src/contracts/zip-directory.ts";
import { cachedArtifactSha256, removeIfDamaged, sha256Of } from "../../artifacts/damaged-artifact.ts";
import { readFileBytes } from "./file-bytes.ts";
import { onnxFileSpeakers } from "./onnx-speakers.ts";
import { readRvcCheckpoint } from "./rvc-checkpoint.ts";
import { buildSynthesizerGraph, SYNTHESIZER_GRAPH_VERSION } from "./synthesizer-graph.ts";

const building = new Map<string, Promise<string>>();

async function startsLikeZip(path: string): Promise<boolean> {
	const file = await open(path, "r");
	try {
		const head = new Uint8Array(4);
		const { bytesRead } = await file.read(head, 0, 4, 0);
		return hasZipSignature(head.subarray(0, bytesRead));
	} finally {
		await file.close();
	}
}

async function buildBeside(path: string): Promise<string> {
	const sha256 = await sha256Of(path);
	await removeIfDamaged(path, "checkpoint", sha256);
	const target = join(dirname(path), `${sha256}.synthesizer-v${SYNTHESIZER_GRAPH_VERSION}.onnx`);
	const checksum = `${target}.sha256`;
	if (await builtIntact(target, checksum)) return target;
	const checkpoint = readRvcCheckpoint(await readFileBytes(path));
	const { bytes } = buildSynthesizerGraph(checkpoint, { decodeSpan: true });
	const temporaries = [randomUUID(), randomUUID()].map((id) => join(dirname(path), `.synthesizer-${id}`));
	const [graphFile = "", checksumFile = ""] = temporaries;
	try {
		await writeFile(graphFile, bytes);
		await writeFile(checksumFile, createHash("sha256").update(bytes).digest("hex"));
		// The checksum last: a build with one is whole (a crash between the two leaves none, and it is built again).
		await rm(checksum, { force: true });
		await rename(graphFile, target);
		await rename(checksumFile, checksum);
	} finally {
		await Promise.all(temporaries.map((file) => rm(file, { force: true })));
	}
	await removeOlderBuilds(dirname(path), sha256);
	return target;
}

/**
 * Whether the built file is there and still what was built: its checksum, written with it, is checked once per
 * process (the folder outlives processes; a disk error or a hand that truncated it must not break the voice for
 * good, as onnxruntime refuses a damaged graph on every job). A build without a checksum is made again.
 */
async function builtIntact(target: string, checksum: string): Promise<boolean> {
	if (!(await stat(target).catch(() => undefined))?.isFile()) return false;
	const expected = await readFile(checksum, "utf8").catch(() => undefined);
	if (expected !== undefined && expected.trim() === (await sha256Of(target))) return true;
	await rm(target, { force: true });
	return false;
}

/**
 * Graphs an earlier builder version made from the same checkpoint: nothing of this version loads them, and each
 * is about the checkpoint's size. A runner of that version still sharing the folder builds its own again.
 */
async function removeOlderBuilds(dir: string, sha256: string): Promise<void> {
	const prefix = `${sha256}.synthesizer-v`;
	for (const name of await readdir(dir).catch(() => [] as string[])) {
		if (!name.startsWith(prefix) || !name.endsWith(".onnx")) continue;
		const version = Number(name.slice(prefix.length, -".onnx".length));
		if (Number.isInteger(version) && version < SYNTHESIZER_GRAPH_VERSION) {
			await rm(join(dir, name), { force: true });
			await rm(join(dir, `${name}.sha256`), { force: true });
		}
	}
}

const speakerCounts = new Map<string, Promise<number | undefined>>();

/**
 * The speakers a synthesizer holds (rows of `emb_g.weight`, the `ds` values it takes), read from the file once per
 * process and version of it: an RVC checkpoint's, or an ONNX export's where its graph says it with certainty
 * (`onnx-speakers.ts`); else undefined.
 */
export async function synthesizerSpeakers(path: string): Promise<number | undefined> {
	const zip = await startsLikeZip(path);
	const { size, mtimeMs } = await stat(path);
	const key = `${path}\u0000${size}\u0000${mtimeMs}`;
	let pending = speakerCounts.get(key);
	if (pending === undefined) {
		pending = zip
			? readFileBytes(path).then((bytes) => readRvcCheckpoint(bytes).speakers)
			: Promise.resolve().then(() => onnxFileSpeakers(path));
		speakerCounts.set(key, pending);
		pending.catch(() => speakerCounts.delete(key));
	}
	return pending;
}

/**
 * `path` itself for an ONNX file; for an RVC checkpoint, the path of its built synthesizer (built on first use, its
 * checkpoint and build hashed once per process and file). A file the artifact cache keeps (`<sha256>.bin`) is the
 * same file while its inode and size are: the cache touches its mtime at each use, and hashes one changed since before
 * a job gets it, downloading it again by a rename (a new inode) where it no longer has its checksum. Keyed by its
 * mtime, each job with a `.pth` voice hashed the checkpoint and its build again (220-280 ms for a 110 MB one). Any
 * other file is the same while its size and mtime are.
 */
export async function synthesizerOnnxPath(path: string): Promise<string> {
	if (!(await startsLikeZip(path))) return path;
	const { size, mtimeMs, ino } = await stat(path);
	const key = `${path}\u0000${size}\u0000${cachedArtifactSha256(path) !== undefined ? `ino ${ino}` : mtimeMs}`;
	const known = building.get(key);
	if (known !== undefined) {
		const built = await known;
		// A trim or a deletion removes the build with its checkpoint, and the inode may come back with a download.
		if ((await stat(built).catch(() => undefined))?.isFile()) return built;
	}
	const pending = buildBeside(path);
	building.set(key, pending);
	// A failure is not remembered: the next job reads the file again (and fails the same way if it is bad).
	pending.catch(() => building.delete(key));
	return pending;
}
