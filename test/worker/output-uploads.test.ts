/**
 * Output uploads in parts (runner API): a runner sends a large output as R2 multipart parts, each under the
 * zone's request-body limit, then completes the lease; the client downloads the assembled WAV. Parts are 5 MiB here
 * (`OUTPUT_PART_BYTES` in vitest.config.ts), R2's smallest.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import type { JobBroker } from "../../durable-objects/job-broker.ts";
import { LEASE_SECONDS } from "../../durable-objects/job-broker-logic.ts";
import { dropIfLeaseEnded } from "../../src/conversions/output-upload-hook.ts";
import { outputObjectKey, UNUSED_OUTPUT_GRACE_MS } from "../../src/conversions/outputs.ts";
import type { StorageGrant } from "../../src/storage/signed-url.ts";
import { broker, deliveredConversion, json, resetBroker, shiftBrokerClock } from "./conversion-fixtures.ts";
import { call } from "./helpers.ts";

const PART = 5 * 1024 ** 2;

beforeEach(resetBroker);

/** Bytes that differ at every offset, so a misplaced or repeated part shows in the download. */
function pattern(length: number, seed: number): Uint8Array {
	const bytes = new Uint8Array(length);
	for (let i = 0; i < length; i++) bytes[i] = (i * 31 + seed * 7 + (i >> 8)) & 0xff;
	return bytes;
}

const sha256 = async (bytes: Uint8Array) =>
	Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)), (b) => b.toString(16).padStart(2, "0")).join(
		"",
	);

async function leased() {
	const { alice, worker, created } = await deliveredConversion();
	const lease = await worker.leaseOne();
	const base = `/internal/v1/leases/${lease.lease_id}/output-uploads`;
	const start = async () => {
		const response = await worker.post(base, {});
		expect(response.status).toBe(200);
		return (await json<{ data: { upload_id: string; part_size_bytes: number } }>(response)).data;
	};
	const putPart = (uploadId: string, n: number, bytes: Uint8Array, headers: Record<string, string> = {}) =>
		worker.api(`${base}/${encodeURIComponent(uploadId)}/parts/${n}`, {
			method: "PUT",
			headers: { "Content-Type": "application/octet-stream", "Content-Length": String(bytes.length), ...headers },
			body: bytes,
		});
	const complete = (uploadId: string, parts: { part_number: number; etag: string }[]) =>
		worker.post(`${base}/${encodeURIComponent(uploadId)}/complete`, { parts });
	const key = outputObjectKey(alice.accountId, created.id, lease.lease_id);
	return { alice, worker, created, lease, base, key, start, putPart, complete };
}

/** The output uploads the broker holds to abort should their lease end first. */
const trackedUploads = () =>
	runInDurableObject(broker(), (_instance, state) =>
		state.storage.sql.exec<{ upload_id: string }>("SELECT upload_id FROM output_uploads").toArray(),
	);

/** Whether R2 still holds the multipart upload: completing it with its parts works only then. */
async function stillOpen(key: string, uploadId: string, parts: R2UploadedPart[]): Promise<boolean> {
	try {
		await env.BUCKET.resumeMultipartUpload(key, uploadId).complete(parts);
		await env.BUCKET.delete(key);
		return true;
	} catch {
		return false;
	}
}

describe("output uploads in parts", () => {
	it("assembles parts into the output, completes the conversion and serves the whole WAV", async () => {
		const { alice, worker, created, lease, start, putPart, complete } = await leased();
		expect(lease.output.part_size_bytes).toBe(PART);
		const upload = await start();
		expect(upload.part_size_bytes).toBe(PART);

		const parts = [pattern(PART, 1), pattern(PART, 2), pattern(12_345, 3)];
		// Sent out of order, as concurrent part uploads may arrive.
		const etags: { part_number: number; etag: string }[] = [];
		for (const n of [2, 1, 3]) {
			const response = await putPart(upload.upload_id, n, parts[n - 1] as Uint8Array);
			expect(response.status).toBe(200);
			etags.push((await json<{ data: { part_number: number; etag: string } }>(response)).data);
		}
		const assembled = await complete(upload.upload_id, etags);
		expect(assembled.status).toBe(200);
		const total = 2 * PART + 12_345;
		expect((await json<{ data: { size_bytes: number } }>(assembled)).data.size_bytes).toBe(total);

		const completed = await worker.post(`/internal/v1/leases/${lease.lease_id}/complete`, {
			output: { size_bytes: total, duration_seconds: 60, sample_rate: 44_100, channels: 2 },
		});
		expect(completed.status).toBe(200);
		const conversion = await alice.get(created.id);
		expect(conversion.status).toBe("completed");
		const download = await call(String(conversion.output_url));
		const bytes = new Uint8Array(await download.arrayBuffer());
		expect(bytes.length).toBe(total);
		// Compared by digest: element-wise equality of 10 MiB arrays is slow.
		const expected = new Uint8Array(total);
		expected.set(parts[0] as Uint8Array, 0);
		expected.set(parts[1] as Uint8Array, PART);
		expected.set(parts[2] as Uint8Array, 2 * PART);
		expect(await sha256(bytes)).toBe(await sha256(expected));
	});

	it("aborts the upload of a runner that stopped mid-upload once its lease has ended, expired or released", async () => {
		for (const end of ["expired", "released"] as const) {
			await resetBroker();
			const { worker, lease, key, start, putPart } = await leased();
			const upload = await start();
			const sent = await json<{ data: { part_number: number; etag: string } }>(
				await putPart(upload.upload_id, 1, pattern(100, 1)),
			);
			expect(await trackedUploads()).toEqual([{ upload_id: upload.upload_id }]);
			if (end === "expired") {
				await shiftBrokerClock((LEASE_SECONDS + 1) * 1000);
				await broker().sweep();
			} else {
				expect((await worker.release(lease.lease_id)).status).toBe(200);
			}
			expect(await trackedUploads()).toEqual([]);
			const part = { partNumber: sent.data.part_number, etag: sent.data.etag };
			expect(await stillOpen(key, upload.upload_id, [part]), end).toBe(false);
		}
	});

	it("leaves a completed upload's output alone when its lease ends", async () => {
		const { worker, lease, key, start, putPart, complete } = await leased();
		const upload = await start();
		const part = await json<{ data: { part_number: number; etag: string } }>(
			await putPart(upload.upload_id, 1, pattern(100, 1)),
		);
		expect((await complete(upload.upload_id, [part.data])).status).toBe(200);
		expect(await trackedUploads()).toEqual([]);
		// As if the completion's word to the broker had been lost: the broker still holds the upload when the lease
		// ends (the runner fails the job after uploading), tries to abort it, and R2 no longer knows it.
		await runInDurableObject(broker(), (_instance, state) => {
			state.storage.sql.exec(
				"INSERT INTO output_uploads (upload_id, lease_id, object_key) VALUES (?, ?, ?)",
				upload.upload_id,
				lease.lease_id,
				key,
			);
		});
		expect((await worker.fail(lease.lease_id, "transient", "internal")).status).toBe(200);
		expect(await trackedUploads()).toEqual([]);
		const stored = await env.BUCKET.get(key);
		expect(new Uint8Array(await (stored as R2ObjectBody).arrayBuffer())).toEqual(pattern(100, 1));
	});

	it("refuses parts over the part size, without a length, or empty, and uploads for lost leases", async () => {
		const { worker, lease, base, start, putPart } = await leased();
		const upload = await start();
		expect((await putPart(upload.upload_id, 1, new Uint8Array(PART + 1))).status).toBe(413);
		expect((await putPart(upload.upload_id, 1, new Uint8Array(0))).status).toBe(400);
		const chunked = await worker.api(`${base}/${upload.upload_id}/parts/1`, {
			method: "PUT",
			body: new ReadableStream({
				start(controller) {
					controller.enqueue(new Uint8Array(10));
					controller.close();
				},
			}),
		});
		expect(chunked.status).toBe(411);
		expect((await putPart(upload.upload_id, 0, new Uint8Array(10))).status).toBe(404);

		expect((await worker.release(lease.lease_id)).status).toBe(200);
		const late = await putPart(upload.upload_id, 1, new Uint8Array(10));
		expect(late.status).toBe(409);
		expect((await json<{ code: string }>(late)).code).toBe("lease_lost");
		expect((await worker.post(base, {})).status).toBe(409);
	});

	it("reports a completion with a missing or wrong part, and an unknown upload id, clearly", async () => {
		const { start, putPart, complete } = await leased();
		const upload = await start();
		const first = await json<{ data: { part_number: number; etag: string } }>(
			await putPart(upload.upload_id, 1, pattern(PART, 1)),
		);
		const second = await json<{ data: { part_number: number; etag: string } }>(
			await putPart(upload.upload_id, 2, pattern(100, 2)),
		);
		const wrongEtag = await complete(upload.upload_id, [first.data, { part_number: 2, etag: "not-the-etag" }]);
		expect(wrongEtag.status).toBe(400);
		expect((await json<{ code: string }>(wrongEtag)).code).toBe("invalid_parts");

		const unknown = await putPart("no-such-upload", 1, new Uint8Array(10));
		expect(unknown.status).toBe(404);
		expect((await json<{ code: string }>(unknown)).code).toBe("upload_not_found");

		expect((await complete(upload.upload_id, [first.data, second.data])).status).toBe(200);
	});

	it("abandons an upload so that nothing of it is kept", async () => {
		const { worker, base, start, putPart, complete } = await leased();
		const upload = await start();
		const part = await json<{ data: { part_number: number; etag: string } }>(
			await putPart(upload.upload_id, 1, pattern(100, 1)),
		);
		const aborted = await worker.api(`${base}/${upload.upload_id}`, { method: "DELETE" });
		expect(aborted.status).toBe(200);
		expect((await complete(upload.upload_id, [part.data])).status).toBe(404);
		const listed = await env.BUCKET.list({ prefix: "outputs/" });
		expect(listed.objects.filter((o) => o.key.includes(upload.upload_id))).toEqual([]);
	});
});

describe("output uploads in one PUT", () => {
	/** Counts the broker's lease checks while `run` runs (every ask about a lease's state goes through `checkLease`). */
	async function leaseChecksDuring(run: () => Promise<unknown>): Promise<number> {
		const asked: string[] = [];
		await runInDurableObject(broker(), (instance: JobBroker) => {
			const prototype = Object.getPrototypeOf(instance) as JobBroker;
			const original = prototype.checkLease;
			(prototype as { checkLease: JobBroker["checkLease"] }).checkLease = function (this: JobBroker, id: string) {
				asked.push(id);
				return original.call(this, id);
			};
			restoreCheckLease = () => {
				prototype.checkLease = original;
			};
		});
		try {
			await run();
		} finally {
			await runInDurableObject(broker(), () => restoreCheckLease());
		}
		return asked.length;
	}
	let restoreCheckLease = () => {};

	it("asks the broker about the lease once for a PUT that is over in moments", async () => {
		const { worker, lease, key } = await leased();
		const bytes = pattern(200_000, 4);
		const asks = await leaseChecksDuring(async () => {
			expect((await worker.uploadOutput(lease, bytes)).status).toBe(200);
		});
		expect(asks).toBe(1);
		const stored = await env.BUCKET.get(key);
		expect(await sha256(new Uint8Array(await (stored as R2ObjectBody).arrayBuffer()))).toBe(await sha256(bytes));
	});

	it("removes what a PUT stored for a lease that ended meanwhile: the broker after its grace, or the PUT itself when it took long", async () => {
		for (const took of [1_000, UNUSED_OUTPUT_GRACE_MS]) {
			await resetBroker();
			const { worker, lease, key } = await leased();
			const grant = { key, contentType: "audio/wav" } as StorageGrant;
			// The PUT's body is in; its lease was given back while the bytes streamed in.
			const object = await env.BUCKET.put(key, pattern(1_000, 5));
			expect((await worker.release(lease.lease_id)).status).toBe(200);
			const startedAt = Date.now() - took;
			if (took < UNUSED_OUTPUT_GRACE_MS / 2) {
				// Over in moments: the broker's removal, a grace after the lease ended, comes after the bytes, and takes them.
				await dropIfLeaseEnded(env, grant, object as R2Object, startedAt);
				expect(await env.BUCKET.head(key)).not.toBeNull();
				await shiftBrokerClock(UNUSED_OUTPUT_GRACE_MS + 1_000);
				await runDurableObjectAlarm(broker());
			} else {
				// Long enough that the broker's removal may have come first: the PUT removes its bytes itself.
				await expect(dropIfLeaseEnded(env, grant, object as R2Object, startedAt)).rejects.toMatchObject({
					status: 409,
					code: "lease_lost",
				});
			}
			expect(await env.BUCKET.head(key), `a PUT that took ${took} ms`).toBeNull();
		}
	});
});
