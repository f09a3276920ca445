/** A real webhook receiver for end-to-end tests: node:http on 127.0.0.1, answers scripted per path. */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
	path: string;
	headers: IncomingHttpHeaders;
	body: string;
	at: number;
}

/** An HTTP status, or `"hang"`: never answer (the sender's timeout ends the request, or closing the receiver). */
export type ScriptedStatus = number | "hang";

/** A receiver whose answers are scripted per path (the last answer repeats); it records what arrives. */
export function startReceiver() {
	const received: Received[] = [];
	const scripts = new Map<string, ScriptedStatus[]>();
	const waiters: { path: string; count: number; resolve: () => void }[] = [];
	const server: Server = createServer((request, response) => {
		const chunks: Buffer[] = [];
		request.on("data", (chunk: Buffer) => chunks.push(chunk));
		request.on("end", () => {
			const path = request.url ?? "/";
			received.push({ path, headers: request.headers, body: Buffer.concat(chunks).toString("utf8"), at: Date.now() });
			const script = scripts.get(path) ?? [200];
			const status = script.length > 1 ? (script.shift() as ScriptedStatus) : (script[0] as ScriptedStatus);
			if (status !== "hang") response.writeHead(status).end();
			for (const waiter of [...waiters]) {
				if (waiter.path === path && received.filter((r) => r.path === path).length >= waiter.count) {
					waiters.splice(waiters.indexOf(waiter), 1);
					waiter.resolve();
				}
			}
		});
	});
	return {
		received,
		script: (path: string, statuses: ScriptedStatus[]) => scripts.set(path, [...statuses]),
		/** Resolves once `count` requests reached `path`; fails after `timeoutMs`. */
		waitFor(path: string, count: number, timeoutMs = 20_000) {
			if (received.filter((r) => r.path === path).length >= count) return Promise.resolve();
			return new Promise<void>((resolve, reject) => {
				const timer = setTimeout(
					() => reject(new Error(`timed out waiting for ${count} deliveries to ${path}`)),
					timeoutMs,
				);
				waiters.push({
					path,
					count,
					resolve: () => {
						clearTimeout(timer);
						resolve();
					},
				});
			});
		},
		listen: () =>
			new Promise<number>((resolve) =>
				server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)),
			),
		close: () =>
			new Promise<void>((resolve) => {
				server.close(() => resolve());
				// Requests left hanging would otherwise keep the server open.
				server.closeAllConnections();
			}),
	};
}
