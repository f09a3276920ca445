/**
 * One signed POST to a receiver. Used by the `WebhookSubscription` Durable Object for event deliveries and by the
 * test endpoint. Redirects are not followed (a 3xx is a failure: the URL was validated, its redirect target was
 * not), and the receiver has 30 seconds to answer.
 */

import {
	EVENT_HEADER,
	ID_HEADER,
	SIGNATURE_HEADER,
	signatureHeader,
	TIMESTAMP_HEADER,
} from "../contracts/webhook-signature.ts";
import type { WebhookPayload } from "../contracts/webhooks.ts";
import { headerEventName } from "./payloads.ts";

export const DELIVERY_TIMEOUT_MS = 30_000;
export const USER_AGENT = "voice-conversion-webhooks/1.0";
/** Longest error text kept in the delivery log. */
const MAX_ERROR_LENGTH = 500;

export interface DeliveryOutcome {
	delivered: boolean;
	/** The receiver's HTTP status; null when no answer came (timeout, network error). */
	responseCode: number | null;
	error: string | null;
	durationMs: number;
}

export interface SignedDelivery {
	url: string;
	secret: string;
	payload: WebhookPayload;
	/** The exact body to send; built once so every attempt carries the same bytes. */
	body: string;
	now?: Date;
}

export async function sendSignedDelivery(delivery: SignedDelivery): Promise<DeliveryOutcome> {
	// Fresh timestamp and signature for every attempt; the body and the id stay the same.
	const timestamp = Math.floor((delivery.now ?? new Date()).getTime() / 1000);
	const headers = {
		"Content-Type": "application/json",
		"User-Agent": USER_AGENT,
		[SIGNATURE_HEADER]: await signatureHeader(delivery.secret, timestamp, delivery.body),
		[TIMESTAMP_HEADER]: String(timestamp),
		[ID_HEADER]: delivery.payload.id,
		[EVENT_HEADER]: headerEventName(delivery.payload.event),
	};
	const started = performance.now();
	const elapsed = () => Math.max(0, Math.round(performance.now() - started));
	try {
		const response = await fetch(delivery.url, {
			method: "POST",
			headers,
			body: delivery.body,
			redirect: "manual",
			signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
		});
		// Only the status matters; release the connection without reading what the receiver sent.
		await response.body?.cancel().catch(() => {});
		const code = response.status;
		if (code >= 200 && code <= 299) {
			return { delivered: true, responseCode: code, error: null, durationMs: elapsed() };
		}
		const error =
			code >= 300 && code <= 399
				? `Receiver answered HTTP ${code} (redirect to ${response.headers.get("Location") ?? "nowhere"}); redirects are not followed`
				: `Receiver answered HTTP ${code}`;
		return { delivered: false, responseCode: code, error: truncate(error), durationMs: elapsed() };
	} catch (error) {
		const name = error instanceof Error ? error.name : "";
		const message =
			name === "TimeoutError" || name === "AbortError"
				? `No answer within ${DELIVERY_TIMEOUT_MS / 1000} seconds`
				: `Request failed: ${error instanceof Error ? error.message : String(error)}`;
		return { delivered: false, responseCode: null, error: truncate(message), durationMs: elapsed() };
	}
}

const truncate = (text: string) => (text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH - 1)}…` : text);
