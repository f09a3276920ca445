/**
 * A fake of the Worker's side of the runner API (src/contracts/runner.ts) and of its signed storage routes,
 * served by a real HTTP server on 127.0.0.1 so the runner's own HTTP client, token handling and streaming
 * are exercised. Requests are validated with the contract's zod schemas, as the Worker will.
 */
import { createHash, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
	CompleteRequest,
	FailRequest,
	HeartbeatRequest,
	type Lease,
	LeaseRequest,
	type ModelArtifact,
	ReleaseRequest,
	RUNNER_SCOPE,
	type VoiceDescriptor,
} from "../../../src/contracts/runner.ts";

export const CLIENT_ID = "runner-test";
export const CLIENT_SECRET = "runner-test-secret";

export type LeaseEvent =
	| { type: "heartbeat"; leaseId: string; progress?: number }
	| { type: "complete"; leaseId: string; body: CompleteRequest }
	| { type: "fail"; leaseId: string; body: FailRequest }
	| { type: "release"; leaseId: string; reason: string };

export interface FakeJob {
	conversionId: string;
	source: Uint8Array;
	format: "wav" | "flac" | "mp3";
	sampleRate: number;
	channels: number;
	durationSeconds: number;
	semitones?: number;
	pitchShift?: Lease["pitch_shift"];
	voiceSettings?: Record<string, unknown>;
	usePreview?: boolean;
	voice?: Partial<VoiceDescriptor>;
	/** Send the source slowly: bytes per 50 ms tick (to keep a job running while a test acts). */
	trickleBytesPer50ms?: number;
	/** Answer the source GET with this HTTP status instead of the bytes. */
	sourceStatus?: number;
}

export interface Upload {
	contentType: string | undefined;
	contentLength: number | undefined;
	body: Uint8Array;
}

export class FakeRunnerApi {
	readonly events: LeaseEvent[] = [];
	/** When each of `events` arrived (`performance.now()`, ms), by index. */
	readonly eventTimes: number[] = [];
	readonly uploads = new Map<string, Upload>();
	readonly leaseRequests: LeaseRequest[] = [];
	/** The `wait_id`s runners cancelled (`POST /internal/v1/leases/waits/{wait_id}/cancel`). */
	readonly cancelledWaits: string[] = [];
	tokenRequests = 0;
	heartbeatIntervalSeconds = 5;
	tokenLifetimeSeconds = 3600;
	/** Answer the next n requests to a route (e.g. "leases", "complete", "heartbeat") with this status. */
	readonly faults = new Map<string, { status: number; remaining: number }>();
	/** Leases the broker has taken back: heartbeats and reports on them answer 409 lease_lost. */
	readonly lostLeases = new Set<string>();
	/** Model files served at `/storage/artifact/<name>` (signed GETs in the real service). */
	readonly artifacts = new Map<string, Uint8Array>();
	/** Voices deleted in the service: a lease request listing one in `loaded_voice_ids` is told to forget it. */
	readonly deletedVoices = new Set<string>();
	/**
	 * The failure reasons this Worker knows, as an older Worker's schema lists them: a fail report with another is
	 * refused with 400 `invalid_request`, as such a Worker refuses it. All of the contract's when unset.
	 */
	failReasons: readonly string[] | undefined;
	/** Calls this when a lease is handed out (tests use it to act mid-job). */
	onLeased: ((lease: Lease) => void) | undefined;

	#server: Server;
	#queue: FakeJob[] = [];
	#malformed: string[] = [];
	#jobs = new Map<string, FakeJob>(); // by conversion id
	#leases = new Map<string, Lease>();
	#waiters: (() => void)[] = [];
	#tokens = new Set<string>();
	#eventWaiters: (() => void)[] = [];
	baseUrl = "";

	constructor() {
		this.#server = createServer((request, response) => {
			this.#handle(request, response).catch((error: unknown) => {
				response.writeHead(500, { "content-type": "application/json" });
				response.end(JSON.stringify({ success: false, message: String(error), code: "internal" }));
			});
		});
	}

	/** Serves `bytes` at `/storage/artifact/<file>` and describes them as artifact `name`, with their true checksum. */
	serveArtifact(name: string, bytes: Uint8Array): ModelArtifact {
		const sha256 = createHash("sha256").update(bytes).digest("hex");
		const file = `${name}-${sha256.slice(0, 12)}`;
		this.artifacts.set(file, bytes);
		return { name, url: `${this.baseUrl}/storage/artifact/${file}?sig=test`, sha256, size_bytes: bytes.length };
	}

	async start(): Promise<this> {
		await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
		this.baseUrl = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
		return this;
	}

	async close(): Promise<void> {
		this.#server.closeAllConnections();
		await new Promise<void>((resolve) => this.#server.close(() => resolve()));
	}

	/** Hand out, with the next lease response, a lease that breaks the contract (a runner must still answer it). */
	enqueueMalformedLease(leaseId: string): void {
		this.#malformed.push(leaseId);
		for (const wake of this.#waiters.splice(0)) wake();
	}

	enqueue(job: FakeJob): void {
		this.#queue.push(job);
		this.#jobs.set(job.conversionId, job);
		for (const wake of this.#waiters.splice(0)) wake();
	}

	eventsFor(leaseId: string): LeaseEvent[] {
		return this.events.filter((e) => e.leaseId === leaseId);
	}

	leaseFor(conversionId: string): Lease | undefined {
		return [...this.#leases.values()].find((l) => l.conversion_id === conversionId);
	}

	/** The final report (complete, fail or release) of a lease, if any. */
	finalReport(leaseId: string): LeaseEvent | undefined {
		return this.eventsFor(leaseId).find((e) => e.type !== "heartbeat");
	}

	/** Resolve when `predicate` holds, checking after every event (fails the test after `timeoutMs`). */
	async waitFor(predicate: () => boolean, timeoutMs = 20_000): Promise<void> {
		const deadline = Date.now() + timeoutMs;
		while (!predicate()) {
			if (Date.now() > deadline) throw new Error("timed out waiting for the runner");
			await new Promise<void>((resolve) => {
				this.#eventWaiters.push(resolve);
				setTimeout(resolve, 50);
			});
		}
	}

	#record(event: LeaseEvent): void {
		this.events.push(event);
		this.eventTimes.push(performance.now());
		for (const wake of this.#eventWaiters.splice(0)) wake();
	}

	async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
		const url = new URL(request.url ?? "/", this.baseUrl);
		const path = url.pathname;
		if (request.method === "POST" && path === "/oauth2/token") return this.#token(request, response);
		if (request.method === "GET" && path.startsWith("/storage/source/")) return this.#serveSource(path, response);
		if (request.method === "PUT" && path.startsWith("/storage/output/"))
			return this.#receiveOutput(request, path, response);
		if (request.method === "GET" && path.startsWith("/storage/artifact/")) {
			const bytes = this.artifacts.get(path.split("/").pop() ?? "");
			if (!bytes) return json(response, 404, { success: false, message: "no such object", code: "not_found" });
			response.writeHead(200, { "content-length": bytes.length }).end(bytes);
			return;
		}

		const auth = request.headers.authorization ?? "";
		if (!this.#tokens.has(auth.replace(/^Bearer /, ""))) {
			return json(response, 401, { success: false, message: "invalid token", code: "invalid_token" });
		}
		const body: unknown = JSON.parse((await readBody(request)).toString("utf8") || "{}");
		if (path === "/internal/v1/leases") {
			if (this.#injectFault("leases", response)) return;
			return this.#lease(LeaseRequest.parse(body), response);
		}
		const cancelled = /^\/internal\/v1\/leases\/waits\/([^/]+)\/cancel$/.exec(path);
		if (cancelled) {
			this.cancelledWaits.push(cancelled[1] ?? "");
			return json(response, 200, { success: true, data: { waiting: false, released: 0 } });
		}
		const match = /^\/internal\/v1\/leases\/([^/]+)\/(heartbeat|complete|fail|release)$/.exec(path);
		if (!match) return json(response, 404, { success: false, message: "not found", code: "not_found" });
		const [, leaseId = "", action = ""] = match;
		if (this.#injectFault(action, response)) return;
		if (this.lostLeases.has(leaseId) || !this.#leases.has(leaseId)) {
			return json(response, 409, { success: false, message: "the lease is no longer held", code: "lease_lost" });
		}
		switch (action) {
			case "heartbeat": {
				const parsed = HeartbeatRequest.parse(body);
				this.#record({ type: "heartbeat", leaseId, progress: parsed.progress });
				return json(response, 200, {
					success: true,
					data: { lease_expires_at: new Date(Date.now() + 60_000).toISOString() },
				});
			}
			case "complete":
				this.#record({ type: "complete", leaseId, body: CompleteRequest.parse(body) });
				break;
			case "fail": {
				const parsed = FailRequest.parse(body);
				if (this.failReasons !== undefined && !this.failReasons.includes(parsed.reason)) {
					return json(response, 400, {
						success: false,
						message: `Invalid reason: expected one of ${this.failReasons.join(", ")}`,
						code: "invalid_request",
					});
				}
				this.#record({ type: "fail", leaseId, body: parsed });
				break;
			}
			default:
				this.#record({ type: "release", leaseId, reason: ReleaseRequest.parse(body).reason });
		}
		this.lostLeases.add(leaseId); // a reported lease is over: later calls on it answer lease_lost
		return json(response, 200, { success: true, data: {} });
	}

	#injectFault(route: string, response: ServerResponse): boolean {
		const fault = this.faults.get(route);
		if (!fault || fault.remaining <= 0) return false;
		fault.remaining--;
		json(response, fault.status, { success: false, message: "injected fault", code: "unavailable" });
		return true;
	}

	async #token(request: IncomingMessage, response: ServerResponse): Promise<void> {
		this.tokenRequests++;
		const form = new URLSearchParams((await readBody(request)).toString("utf8"));
		const valid =
			request.headers["content-type"]?.startsWith("application/x-www-form-urlencoded") &&
			form.get("grant_type") === "client_credentials" &&
			form.get("client_id") === CLIENT_ID &&
			form.get("client_secret") === CLIENT_SECRET &&
			form.get("scope") === RUNNER_SCOPE;
		if (!valid) return json(response, 401, { error: "invalid_client", message: "bad client credentials" });
		const token = randomUUID();
		this.#tokens.add(token);
		json(response, 200, { access_token: token, expires_in: this.tokenLifetimeSeconds, token_type: "Bearer" });
	}

	async #lease(request: LeaseRequest, response: ServerResponse): Promise<void> {
		this.leaseRequests.push(request);
		const deadline = Date.now() + request.wait_seconds * 1000;
		while (this.#queue.length === 0 && this.#malformed.length === 0 && Date.now() < deadline && !response.destroyed) {
			await new Promise<void>((resolve) => {
				this.#waiters.push(resolve);
				setTimeout(resolve, Math.max(0, deadline - Date.now()));
			});
		}
		const jobs = this.#queue.splice(0, request.capacity);
		const leases = jobs.map((job) => this.#makeLease(job));
		if (response.destroyed) {
			// The runner hung up (shutdown): put the jobs back, as the broker would when the lease expires.
			this.#queue.unshift(...jobs);
			return;
		}
		for (const lease of leases) this.#leases.set(lease.lease_id, lease);
		const malformed = this.#malformed.splice(0).map((leaseId) => {
			this.#leases.set(leaseId, { lease_id: leaseId } as Lease);
			return { lease_id: leaseId, conversion_id: "not-a-uuid" };
		});
		const forget = request.loaded_voice_ids.filter((id) => this.deletedVoices.has(id));
		json(response, 200, { success: true, data: { leases: [...leases, ...malformed], forget_voice_ids: forget } });
		for (const lease of leases) this.onLeased?.(lease);
	}

	#makeLease(job: FakeJob): Lease {
		return {
			lease_id: `lease-${randomUUID()}`,
			conversion_id: job.conversionId,
			attempt: 1,
			lease_expires_at: new Date(Date.now() + this.heartbeatIntervalSeconds * 3000).toISOString(),
			heartbeat_interval_seconds: this.heartbeatIntervalSeconds,
			voice: {
				id: "11111111-1111-4111-8111-111111111111",
				name: "Test voice",
				engine: "dsp",
				params: { formant_shift: 2 },
				artifacts: [],
				...job.voice,
			},
			source: {
				url: `${this.baseUrl}/storage/source/${job.conversionId}?sig=test`,
				mime_type: `audio/${job.format}`,
				format: job.format,
				sample_rate: job.sampleRate,
				channels: job.channels,
				duration_seconds: job.durationSeconds,
				size_bytes: job.source.length,
			},
			output: { url: `${this.baseUrl}/storage/output/${job.conversionId}?sig=test`, content_type: "audio/wav" },
			semitones: job.semitones ?? 0,
			...(job.pitchShift ? { pitch_shift: job.pitchShift } : {}),
			...(job.voiceSettings ? { voice_settings: job.voiceSettings } : {}),
			use_preview: job.usePreview ?? false,
			preview_seconds: 10,
		};
	}

	async #serveSource(path: string, response: ServerResponse): Promise<void> {
		const job = this.#jobs.get(path.split("/").pop() ?? "");
		if (!job) return json(response, 404, { success: false, message: "no such object", code: "not_found" });
		if (job.sourceStatus)
			return json(response, job.sourceStatus, { success: false, message: "injected", code: "storage" });
		response.writeHead(200, { "content-type": `audio/${job.format}`, "content-length": job.source.length });
		const step = job.trickleBytesPer50ms;
		if (!step) {
			response.end(job.source);
			return;
		}
		for (let offset = 0; offset < job.source.length && !response.destroyed; offset += step) {
			response.write(job.source.subarray(offset, offset + step));
			await new Promise((resolve) => setTimeout(resolve, 50));
		}
		response.end();
	}

	async #receiveOutput(request: IncomingMessage, path: string, response: ServerResponse): Promise<void> {
		const body = await readBody(request);
		const length = request.headers["content-length"];
		this.uploads.set(path.split("/").pop() ?? "", {
			contentType: request.headers["content-type"],
			contentLength: length === undefined ? undefined : Number(length),
			body: new Uint8Array(body),
		});
		response.writeHead(200).end();
	}
}

function json(response: ServerResponse, status: number, body: unknown): void {
	response.writeHead(status, { "content-type": "application/json" });
	response.end(JSON.stringify(body));
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
	const chunks: Buffer[] = [];
	for await (const chunk of request) chunks.push(chunk as Buffer);
	return Buffer.concat(chunks);
}
