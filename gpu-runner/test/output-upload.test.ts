/**
 * The multipart side of output uploads: how parts are cut, retried and abandoned. The endpoints themselves are
 * tested against the real Worker (test/worker/output-uploads.test.ts, and end to end with the runner process in
 * test/node/end-to-end.test.ts); here an in-memory implementation of the interface records what the runner asks.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { UploadedPart } from "../../src/contracts/runner.ts";
import { ApiError } from "../src/api/api-error.ts";
import { type OutputUploads, uploadOutput } from "../src/storage/output-upload.ts";
import { TransferError, uploadWav } from "../src/storage/transfer.ts";

let dir: string;
let file: string;
const SIZE = 2500;

beforeAll(async () => {
	dir = await mkdtemp(path.join(tmpdir(), "output-upload-"));
	file = path.join(dir, "out.wav");
	await writeFile(
		file,
		Uint8Array.from({ length: SIZE }, (_, i) => i % 251),
	);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Keeps the bytes of each part; `failures` scripts errors for given part numbers, consumed in order. */
function memoryUploads(partSize: number, failures: Record<number, Error[]> = {}) {
	const received = new Map<number, Uint8Array>();
	const calls: string[] = [];
	let completed: UploadedPart[] | null = null;
	const uploads: OutputUploads = {
		async startOutputUpload() {
			calls.push("start");
			return { upload_id: "u1", part_size_bytes: partSize };
		},
		async uploadOutputPart(_lease, _upload, part) {
			calls.push(`part ${part.number}`);
			const failure = failures[part.number]?.shift();
			if (failure) throw failure;
			const bytes = await readFile(part.path);
			received.set(part.number, bytes.subarray(part.start, part.start + part.length));
			return { part_number: part.number, etag: `etag-${part.number}` };
		},
		async completeOutputUpload(_lease, _upload, parts) {
			calls.push("complete");
			completed = parts;
		},
		async abortOutputUpload() {
			calls.push("abort");
		},
	};
	return { uploads, received, calls, completed: () => completed };
}

const lease = (partSize: number) => ({
	lease_id: "lease-1",
	output: { url: "http://127.0.0.1:9/unused", content_type: "audio/wav" as const, part_size_bytes: partSize },
});

describe("output upload in parts", () => {
	it("cuts the file into parts of the part size, in order, and completes with every etag", async () => {
		const memory = memoryUploads(1000);
		await uploadOutput({ lease: lease(1000), uploads: memory.uploads }, file, SIZE, new AbortController().signal);
		expect(memory.calls).toEqual(["start", "part 1", "part 2", "part 3", "complete"]);
		expect([...memory.received.values()].map((b) => b.length)).toEqual([1000, 1000, 500]);
		const joined = Buffer.concat([...memory.received.values()]);
		expect(joined.equals(await readFile(file))).toBe(true);
		expect(memory.completed()).toEqual([1, 2, 3].map((n) => ({ part_number: n, etag: `etag-${n}` })));
	});

	it("retries a part that failed in transit", async () => {
		const memory = memoryUploads(1000, { 2: [new TransferError("connection reset")] });
		await uploadOutput(
			{ lease: lease(1000), uploads: memory.uploads, partAttempts: 2 },
			file,
			SIZE,
			new AbortController().signal,
		);
		expect(memory.calls).toEqual(["start", "part 1", "part 2", "part 2", "part 3", "complete"]);
	});

	it("abandons the upload and reports a transient failure when a part keeps failing", async () => {
		const busy = () => new ApiError("upload output part", 503, "unavailable", "busy");
		const memory = memoryUploads(1000, { 1: [busy(), busy()] });
		const attempt = uploadOutput(
			{ lease: lease(1000), uploads: memory.uploads, partAttempts: 2 },
			file,
			SIZE,
			new AbortController().signal,
		);
		await expect(attempt).rejects.toBeInstanceOf(TransferError);
		expect(memory.calls).toEqual(["start", "part 1", "part 1", "abort"]);
	});

	it("stops at once on a lost lease, still cleaning up, and passes the lease_lost error on", async () => {
		const lost = new ApiError("upload output part", 409, "lease_lost", "lease lost");
		const memory = memoryUploads(1000, { 2: [lost] });
		const attempt = uploadOutput(
			{ lease: lease(1000), uploads: memory.uploads },
			file,
			SIZE,
			new AbortController().signal,
		);
		await expect(attempt).rejects.toMatchObject({ leaseLost: true });
		expect(memory.calls).toEqual(["start", "part 1", "part 2", "abort"]);
	});
});

describe("output upload in one PUT", () => {
	it("fails with a TransferError, and no stray rejection, when storage cannot be reached", async () => {
		// A port that refuses connections, as the Worker's does while it restarts.
		const server = createServer();
		await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
		const { port } = server.address() as { port: number };
		await new Promise<void>((resolve) => server.close(() => resolve()));
		const stray: unknown[] = [];
		const onStray = (reason: unknown) => stray.push(reason);
		process.on("unhandledRejection", onStray);
		try {
			const upload = uploadWav(`http://127.0.0.1:${port}/out.wav`, file, SIZE, new AbortController().signal);
			await expect(upload).rejects.toBeInstanceOf(TransferError);
			// An unhandled rejection is reported after the microtasks of the failing turn: give it that time.
			await new Promise((resolve) => setTimeout(resolve, 50));
		} finally {
			process.off("unhandledRejection", onStray);
		}
		// A stray rejection ends a runner's process (Node's default), dropping every job it holds.
		expect(stray).toEqual([]);
	});
});
