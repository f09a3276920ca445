/**
 * Liveness/readiness and metrics over plain HTTP, for the container HEALTHCHECK and for Prometheus.
 * `GET /healthz` answers 200 when ready or busy and 503 while starting or stopping, with a JSON body that
 * names each engine's execution provider and says whether the Worker answers (`api`: still 200 when it does not,
 * as a restart would not bring it back). `GET /metrics` is the Prometheus text format.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { RunnerMetrics } from "./metrics.ts";

export type RunnerState = "starting" | "ready" | "busy" | "stopping";

export interface HealthSnapshot {
	status: RunnerState;
	runner_id: string;
	active_jobs: number;
	capacity: number;
	engines: Record<string, { execution_provider: string }>;
	/** Whether the Worker answers the runner's lease requests (`LeaseLoop.api`). */
	api: { reachable: boolean | null; failing_since: string | null; error: string | null };
}

export interface HealthServer {
	port: number;
	close(): Promise<void>;
}

export async function startHealthServer(options: {
	host: string;
	port: number;
	snapshot: () => HealthSnapshot;
	metrics: RunnerMetrics;
}): Promise<HealthServer> {
	const server: Server = createServer((request, response) => {
		const path = new URL(request.url ?? "/", "http://runner").pathname;
		if (request.method === "GET" && (path === "/healthz" || path === "/health")) {
			const snapshot = options.snapshot();
			const healthy = snapshot.status === "ready" || snapshot.status === "busy";
			response.writeHead(healthy ? 200 : 503, { "content-type": "application/json" });
			response.end(JSON.stringify(snapshot));
		} else if (request.method === "GET" && path === "/metrics") {
			options.metrics.registry.metrics().then(
				(text) => {
					response.writeHead(200, { "content-type": options.metrics.registry.contentType });
					response.end(text);
				},
				() => {
					response.writeHead(500).end();
				},
			);
		} else {
			response.writeHead(404, { "content-type": "application/json" });
			response.end(JSON.stringify({ success: false, message: "not found", code: "not_found" }));
		}
	});
	await new Promise<void>((resolve, reject) => {
		server.once("error", reject);
		server.listen(options.port, options.host, () => resolve());
	});
	return {
		port: (server.address() as AddressInfo).port,
		close: () => new Promise((resolve) => server.close(() => resolve())),
	};
}
