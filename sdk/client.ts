/**
 * The client for the voice conversion API: every endpoint of the spec, plus the workflow helpers a caller needs
 * around them (upload with progress, waiting for a conversion, downloading the result). Uses only `fetch`, streams
 * and WebCrypto, so the same code runs in Node 20+, Cloudflare Workers, Deno, Bun and browsers.
 */
import type { z } from "zod";
import { MAX_AUDIO_FILE_BYTES, RegisterAudioFileBody } from "../src/contracts/audio-files.ts";
import { CreateConversionBody, ListConversionsQuery } from "../src/contracts/voice-conversions.ts";
import { VOICE_FILE_HEAD_BYTES, voiceFileKindFor } from "../src/contracts/voice-file-kinds.ts";
import {
	CreateVoiceBody,
	UpdateVoiceBody,
	VOICE_FILE_DESCRIPTIONS,
	VOICE_FILE_ROLE_VALUES,
	type VoiceFileRoleName,
	type VoiceUpload,
} from "../src/contracts/voices.ts";
import { CreateSubscriptionBody, UpdateSubscriptionBody } from "../src/contracts/webhooks.ts";
import { errorFromResponse, SDK_ERROR_CODES, VoiceConversionError } from "./errors.ts";
import { abortedError, networkError, TokenSource, type TokenStore, withTimeout } from "./token.ts";
import type {
	AccountVoice,
	AudioFile,
	ConversionSnapshot,
	ConversionStatus,
	CreateConversionInput,
	CreatedSubscription,
	CreateSubscriptionInput,
	DeliveryLogEntry,
	ListOptions,
	Page,
	RedeliveryAccepted,
	RegeneratedSecret,
	RegisterAudioFileInput,
	TestDeliveryResult,
	UpdateSubscriptionInput,
	UpdateVoiceInput,
	VoiceConversion,
	VoiceModel,
	VoiceSettings,
	VoiceStatus,
	WebhookSubscription,
} from "./types.ts";
import { headOf, type ProgressListener, partReader, prepareBody, sizeOf, type UploadSource } from "./upload.ts";
import { describeVoiceArchive } from "./voice-archive.ts";

export interface VoiceConversionClientOptions {
	/** The API's base address (`{base_url}` in the spec), e.g. `https://api.example.com`. A trailing `/api/v1` is ignored. */
	baseUrl: string;
	clientId: string;
	clientSecret: string;
	/** The token endpoint; defaults to `{baseUrl}/oauth2/token`. */
	tokenUrl?: string;
	/** Defaults to `voice-conversion-api/base`. */
	scope?: string;
	/** A `fetch` to use instead of the global one (a Worker's service binding, a proxy, instrumentation). */
	fetch?: typeof fetch;
	/** Per-request timeout in milliseconds (default 30 s). Uploads and downloads have none unless you pass a signal. */
	timeoutMs?: number;
	/** Retries of requests that are safe to repeat, on network errors, 408, 429 and 5xx (default 2). */
	maxRetries?: number;
	/** Told before each such retry, with the failure and the wait (a CLI says why it pauses). */
	onRetry?: (retry: RetryNotice) => void;
	/** Renew the token this many seconds before it expires (default 60). */
	refreshMarginSeconds?: number;
	/** Clock in epoch milliseconds, for token expiry (tests inject one). */
	now?: () => number;
	/** Keeps the access token between processes (see `TokenStore`); by default it lives as long as the client. */
	tokenStore?: TokenStore;
}

export interface RetryNotice {
	/** The failure being retried (its `status`, `code`, `message`, `retryAfterSeconds`). */
	error: VoiceConversionError;
	/** The retry about to be made: 1 for the first. */
	attempt: number;
	delayMs: number;
}

export interface RequestOptions {
	signal?: AbortSignal;
}

export interface IdempotentRequestOptions extends RequestOptions {
	/** Repeating a request with the same key returns the first result instead of creating twice. Default: a fresh UUID per call, reused across the SDK's own retries. */
	idempotencyKey?: string;
}

export interface UploadAudioOptions extends RequestOptions {
	/** Name to register; defaults to the Blob's `name` (a `File`) or `audio`. */
	fileName?: string;
	/** WAV, MP3 or FLAC type; defaults to the Blob's type or one guessed from the file name's extension. */
	mimeType?: string;
	onProgress?: ProgressListener;
	idempotencyKey?: string;
	/**
	 * Told when the upload failed in a way worth another try (the connection dropped, storage answered 5xx or 429,
	 * or the address stopped working), before it is sent again to a fresh address (up to `VOICE_UPLOAD_TRIES` tries;
	 * a stream is not sent again); the client's own `onRetry` is told too.
	 */
	onRetry?: (retry: RetryNotice) => void;
}

export interface WaitOptions extends RequestOptions {
	/** Give up after this many milliseconds (default 30 minutes) with a `wait_timeout` error. */
	timeoutMs?: number;
	/** First poll interval (default 1 s); it grows by half each poll up to `maxIntervalMs` (default 10 s). */
	initialIntervalMs?: number;
	maxIntervalMs?: number;
	/** Called with the conversion whenever its status changes (and once at the start). */
	onUpdate?: (conversion: ConversionSnapshot) => void;
}

/** A voice to create: its details and, by role, the files themselves (the model is required). */
export interface CreateVoiceInput {
	name: string;
	tags?: string[];
	description?: string;
	/** The defaults every conversion with this voice starts from. */
	voice_settings?: VoiceSettings;
	files: Partial<Record<VoiceFileRoleName, { source: UploadSource; fileName?: string }>> & {
		model: { source: UploadSource; fileName?: string };
	};
}

export interface CreateVoiceOptions extends IdempotentRequestOptions {
	/** Upload progress of each file, by role (`model`, `index`, `image`, `sample`). */
	onProgress?: (role: VoiceFileRoleName, progress: { loaded: number; total: number }) => void;
	/**
	 * Told when a file's upload failed in a way worth another try (the connection dropped, storage answered 5xx or
	 * 429, or the address stopped working), before it is sent again from fresh addresses; the client's own `onRetry`
	 * is told too. `attempt` counts these retries of the file, from 1 (at most `VOICE_UPLOAD_TRIES` - 1).
	 */
	onRetry?: (role: VoiceFileRoleName, retry: RetryNotice) => void;
}

/**
 * Tries of each uploaded file (a voice's files, a source recording): an index of a gigabyte goes up for long enough
 * to meet a dropped connection, and a lost upload otherwise leaves a voice waiting for its files.
 */
export const VOICE_UPLOAD_TRIES = 4;

/**
 * The retry to make of an upload try that failed, or undefined where none is worth making: only a failure that may
 * pass (no answer, 5xx, 429, an address that stopped working), of a source that can be read again (a stream cannot),
 * not aborted, and within `VOICE_UPLOAD_TRIES`.
 */
function uploadRetry(
	error: unknown,
	source: UploadSource,
	attempt: number,
	signal: AbortSignal | undefined,
): RetryNotice | undefined {
	const rereadable = source instanceof Blob || source instanceof ArrayBuffer || ArrayBuffer.isView(source);
	if (!(error instanceof VoiceConversionError) || !rereadable || signal?.aborted || attempt >= VOICE_UPLOAD_TRIES) {
		return undefined;
	}
	if (!error.retryable && error.code !== SDK_ERROR_CODES.uploadExpired) return undefined;
	return { error, attempt, delayMs: Math.max(1000 * attempt, 1000 * (error.retryAfterSeconds ?? 0)) };
}

export interface WaitForVoiceOptions extends RequestOptions {
	/** Give up after this many milliseconds (default 10 minutes) with a `wait_timeout` error. */
	timeoutMs?: number;
	/** Poll interval in milliseconds (default 2 s). */
	intervalMs?: number;
	/** Called with the voice whenever its status changes (and once at the start). */
	onUpdate?: (voice: AccountVoice) => void;
}

export interface ListConversionsOptions extends ListOptions {
	status?: ConversionStatus;
}

const API_PREFIX = "/api/v1";
/** How long `webhooks.test` waits: the service's 30 s for the receiver, and room for the answer to come back. */
const WEBHOOK_TEST_TIMEOUT_MS = 45_000;
/** The longest `Retry-After` the SDK waits out by itself before retrying; a longer one is returned as the error. */
export const MAX_RETRY_AFTER_SECONDS = 60;
const TERMINAL: ReadonlySet<string> = new Set(["completed", "failed"]);
const EXTENSION_TYPES: Record<string, string> = { wav: "audio/wav", mp3: "audio/mpeg", flac: "audio/flac" };

/** Waits `ms`; an abort ends the wait with the SDK's `aborted` error, as it ends a request. */
const sleep = (ms: number, signal?: AbortSignal) =>
	new Promise<void>((resolve, reject) => {
		if (signal?.aborted) return reject(abortedError(signal, "waiting"));
		const timer = setTimeout(() => {
			signal?.removeEventListener("abort", onAbort);
			resolve();
		}, ms);
		const onAbort = () => {
			clearTimeout(timer);
			reject(signal && abortedError(signal, "waiting"));
		};
		signal?.addEventListener("abort", onAbort, { once: true });
	});

/** Checks input against the API's own schema before sending, so mistakes surface with the same field messages. */
function validate<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
	const result = schema.safeParse(input);
	if (result.success) return result.data;
	const fieldErrors = result.error.issues.map((issue) => ({
		field: issue.path.join(".") || "body",
		message: issue.message,
	}));
	throw new VoiceConversionError({
		status: null,
		code: SDK_ERROR_CODES.invalidRequest,
		message: "The request is invalid",
		fieldErrors,
	});
}

/** `audio/wav` etc. from a file name's extension; undefined when it is not WAV, MP3 or FLAC. */
export function mimeTypeForFileName(fileName: string): string | undefined {
	const extension = fileName.split(".").pop()?.toLowerCase() ?? "";
	return EXTENSION_TYPES[extension];
}

/** The service's base address as the client uses it: no trailing slash, and a trailing `/api/v1` ignored. */
const serviceOrigin = (baseUrl: string): string => baseUrl.replace(/\/+$/, "").replace(/\/api\/v1$/, "");

/** The token endpoint a client uses when given none: `{baseUrl}/oauth2/token`. */
export const defaultTokenUrl = (baseUrl: string): string => `${serviceOrigin(baseUrl)}/oauth2/token`;

export class VoiceConversionClient {
	readonly baseUrl: string;
	readonly tokens: TokenSource;
	readonly #fetch: typeof fetch;
	readonly #timeoutMs: number;
	readonly #maxRetries: number;
	readonly #onRetry: ((retry: RetryNotice) => void) | undefined;

	constructor(options: VoiceConversionClientOptions) {
		this.baseUrl = serviceOrigin(options.baseUrl);
		// Bound so that a global fetch keeps its `this`, and a Worker's service binding too.
		const fetcher = options.fetch ?? globalThis.fetch;
		this.#fetch = ((input, init) => fetcher(input, init)) as typeof fetch;
		this.#timeoutMs = options.timeoutMs ?? 30_000;
		this.#maxRetries = options.maxRetries ?? 2;
		this.#onRetry = options.onRetry;
		this.tokens = new TokenSource({
			tokenUrl: options.tokenUrl ?? defaultTokenUrl(options.baseUrl),
			clientId: options.clientId,
			clientSecret: options.clientSecret,
			scope: options.scope,
			fetch: this.#fetch,
			refreshMarginSeconds: options.refreshMarginSeconds,
			now: options.now,
			timeoutMs: this.#timeoutMs,
			store: options.tokenStore,
		});
	}

	// ---- Voices ----

	readonly voices = {
		/** The service's voices and your own; filter by `owner` (`service`, `account`) and `status`. */
		list: (options: RequestOptions & { owner?: "service" | "account"; status?: VoiceStatus } = {}) =>
			this.#data<(VoiceModel | AccountVoice)[]>("GET", "/voices", {
				signal: options.signal,
				query: Object.fromEntries(
					Object.entries({ owner: options.owner, status: options.status }).filter(([, v]) => v !== undefined),
				) as Record<string, string>,
			}),
		get: (id: string, options: RequestOptions = {}) =>
			this.#data<VoiceModel | AccountVoice>("GET", `/voices/${encodeURIComponent(id)}`, options),
		/**
		 * Creates your own voice and uploads its files (one PUT, or in parts for files over 100 MB: hidden here),
		 * reporting progress per file. Each file is recognised by its bytes before anything is sent. Resolves with
		 * the voice once every file is in (`validating`); `waitForVoice` then waits for `ready` or `failed`.
		 */
		create: (input: CreateVoiceInput, options: CreateVoiceOptions = {}) => this.#createVoice(input, options),
		update: (id: string, input: UpdateVoiceInput, options: RequestOptions = {}) =>
			this.#data<AccountVoice>("PATCH", `/voices/${encodeURIComponent(id)}`, {
				...options,
				json: validate(UpdateVoiceBody, input),
			}),
		/** Deletes one of your voices: running conversions finish, new ones are refused. */
		delete: (id: string, options: RequestOptions = {}) =>
			this.#data<{ id: string; deleted: true }>("DELETE", `/voices/${encodeURIComponent(id)}`, options),
	};

	async #createVoice(input: CreateVoiceInput, options: CreateVoiceOptions): Promise<AccountVoice> {
		const roles = VOICE_FILE_ROLE_VALUES.filter((role) => input.files[role] !== undefined);
		for (const role of roles) {
			const source = input.files[role]?.source as UploadSource;
			const archived = role === "model" && source instanceof Blob ? await describeVoiceArchive(source) : null;
			if (archived) {
				const message = `The model file is a zip archive holding ${archived.join(", ")}, not an RVC checkpoint: read it with readVoiceArchive (the CLI: voices create --archive)`;
				throw new VoiceConversionError({
					status: null,
					code: SDK_ERROR_CODES.invalidRequest,
					message,
					fieldErrors: [{ field: "files.model", message: "a zip archive of a voice, not an RVC checkpoint" }],
				});
			}
			const head = await headOf(source, VOICE_FILE_HEAD_BYTES);
			if (head.length > 0 && !voiceFileKindFor(role, head)) {
				throw new VoiceConversionError({
					status: null,
					code: SDK_ERROR_CODES.invalidRequest,
					message: `The ${role} file is not ${VOICE_FILE_DESCRIPTIONS[role]}`,
					fieldErrors: [{ field: `files.${role}`, message: `must be ${VOICE_FILE_DESCRIPTIONS[role]}` }],
				});
			}
		}
		const body = validate(CreateVoiceBody, {
			name: input.name,
			tags: input.tags,
			description: input.description,
			voice_settings: input.voice_settings,
			files: Object.fromEntries(
				roles.map((role) => {
					const file = input.files[role] as { source: UploadSource; fileName?: string };
					const named = file.source instanceof Blob ? (file.source as Blob & { name?: string }).name : undefined;
					return [role, { file_name: file.fileName ?? named ?? role, size_bytes: sizeOf(file.source) }];
				}),
			),
		});
		const created = await this.#data<AccountVoice & { uploads: Partial<Record<VoiceFileRoleName, VoiceUpload>> }>(
			"POST",
			"/voices",
			{ ...options, json: body, idempotencyKey: options.idempotencyKey ?? crypto.randomUUID() },
		);
		const plans = { ...created.uploads };
		for (const role of roles) {
			if (!plans[role]) continue;
			const source = input.files[role]?.source as UploadSource;
			await this.#uploadVoiceFileWithRetries(created.id, role, plans, source, options);
		}
		return this.#data<AccountVoice>("GET", `/voices/${encodeURIComponent(created.id)}`, { signal: options.signal });
	}

	/**
	 * One file of a voice, sent again from fresh addresses (`POST /voices/{id}/upload-urls`) when a try failed in a way
	 * worth repeating: the parts already received are kept and only those missing are sent. Fresh addresses replace
	 * those of every file still missing (the old ones stop working), so `plans` is updated for the files after this
	 * one too. A stream can be read only once, so a file given as one is not sent again; nor is a file the service
	 * refused (its size, its kind), nor after `signal` aborted.
	 */
	async #uploadVoiceFileWithRetries(
		voiceId: string,
		role: VoiceFileRoleName,
		plans: Partial<Record<VoiceFileRoleName, VoiceUpload>>,
		source: UploadSource,
		options: CreateVoiceOptions,
	): Promise<void> {
		const onProgress = (progress: { loaded: number; total: number }) => options.onProgress?.(role, progress);
		// Parts storage took (their answer came back): a fresh address keeps them, so they are not sent again.
		const received = new Set<number>();
		for (let attempt = 1; ; attempt++) {
			const plan = plans[role];
			if (!plan) return;
			try {
				return await this.#uploadVoiceFile(voiceId, role, plan, source, onProgress, options.signal, received);
			} catch (error) {
				const retry = uploadRetry(error, source, attempt, options.signal);
				if (!retry) throw error;
				this.#onRetry?.(retry);
				options.onRetry?.(role, retry);
				await sleep(retry.delayMs, options.signal);
				let fresh: { uploads: Partial<Record<VoiceFileRoleName, VoiceUpload>> };
				try {
					fresh = await this.#data("POST", `/voices/${encodeURIComponent(voiceId)}/upload-urls`, {
						signal: options.signal,
					});
				} catch (renewal) {
					// 409 `already_uploaded`: every file is in (the answer to the last try was lost, not the upload).
					if (renewal instanceof VoiceConversionError && renewal.status === 409) {
						for (const key of Object.keys(plans) as VoiceFileRoleName[]) delete plans[key];
						return;
					}
					if (renewal instanceof VoiceConversionError && renewal.retryable) continue;
					throw renewal;
				}
				for (const key of Object.keys(plans) as VoiceFileRoleName[]) delete plans[key];
				Object.assign(plans, fresh.uploads);
			}
		}
	}

	async #uploadVoiceFile(
		voiceId: string,
		role: VoiceFileRoleName,
		plan: VoiceUpload,
		source: UploadSource,
		onProgress: ProgressListener,
		signal: AbortSignal | undefined,
		received: Set<number>,
	): Promise<void> {
		const mimeType = "application/octet-stream";
		if (plan.method === "PUT") return this.#put(plan.upload_url, source, { mimeType, onProgress, signal });
		const total = sizeOf(source);
		const read = partReader(source);
		for (const part of plan.parts) {
			if (received.has(part.part_number)) continue;
			const start = (part.part_number - 1) * plan.part_size_bytes;
			const bytes = await read(start, Math.min(total, start + plan.part_size_bytes));
			await this.#put(part.upload_url, bytes, {
				mimeType,
				signal,
				onProgress: ({ loaded }) => onProgress({ loaded: start + loaded, total }),
			});
			received.add(part.part_number);
		}
		await this.#data("POST", `/voices/${encodeURIComponent(voiceId)}/files/${role}/complete`, { signal });
	}

	/**
	 * Polls one of your voices until validation made it `ready` or `failed` (then `error_message` says why), and
	 * resolves with it; a failed voice resolves, it does not throw.
	 */
	async waitForVoice(id: string, options: WaitForVoiceOptions = {}): Promise<AccountVoice> {
		const timeoutMs = options.timeoutMs ?? 10 * 60_000;
		const deadline = Date.now() + timeoutMs;
		let status: string | undefined;
		for (;;) {
			const voice = (await this.voices.get(id, { signal: options.signal })) as AccountVoice;
			if (voice.status !== status) options.onUpdate?.(voice);
			status = voice.status;
			if (voice.status === "ready" || voice.status === "failed") return voice;
			const remaining = deadline - Date.now();
			if (remaining <= 0) {
				throw new VoiceConversionError({
					status: null,
					code: SDK_ERROR_CODES.waitTimeout,
					message: `Voice ${id} was still ${voice.status} after ${Math.round(timeoutMs / 1000)} s`,
				});
			}
			await sleep(Math.min(remaining, options.intervalMs ?? 2000), options.signal);
		}
	}

	// ---- Audio files ----

	readonly audioFiles = {
		/** Registers a file and returns it with its pre-signed `upload_url` (valid 30 minutes). */
		register: async (input: RegisterAudioFileInput, options: IdempotentRequestOptions = {}) =>
			this.#data<AudioFile>("POST", "/audio-files", {
				...options,
				json: validate(RegisterAudioFileBody, input),
				idempotencyKey: options.idempotencyKey ?? crypto.randomUUID(),
			}),
		list: (options: ListOptions = {}) => this.#page<AudioFile>("/audio-files", options),
		get: (id: string, options: RequestOptions = {}) =>
			this.#data<AudioFile>("GET", `/audio-files/${encodeURIComponent(id)}`, options),
		delete: (id: string, options: RequestOptions = {}) =>
			this.#data<{ id: string; deleted: true }>("DELETE", `/audio-files/${encodeURIComponent(id)}`, options),
		/** A fresh upload address for a file still awaiting its upload. */
		regenerateUploadUrl: (id: string, options: RequestOptions = {}) =>
			this.#data<AudioFile>("POST", `/audio-files/${encodeURIComponent(id)}/regenerate-upload-url`, options),
		/** PUTs bytes to a pre-signed upload address (no bearer token: the address carries its own authorization). */
		put: (uploadUrl: string, source: UploadSource, options: { mimeType: string } & UploadAudioOptions) =>
			this.#put(uploadUrl, source, options),
	};

	/**
	 * Registers `source` and uploads it: the spec's steps 3 and 4 in one call. Resolves with the audio file as the
	 * service sees it after the upload. Files of 100 MB (10^8 bytes) or more are refused before anything is sent.
	 */
	async uploadAudio(source: UploadSource, options: UploadAudioOptions = {}): Promise<AudioFile> {
		const size = sizeOf(source);
		if (size >= MAX_AUDIO_FILE_BYTES) {
			throw new VoiceConversionError({
				status: null,
				code: SDK_ERROR_CODES.fileTooLarge,
				message: `The file is ${size} bytes; source audio must be under 100 MB (at most ${MAX_AUDIO_FILE_BYTES - 1} bytes)`,
			});
		}
		const blobName = typeof (source as { name?: unknown }).name === "string" ? (source as File).name : undefined;
		const fileName = options.fileName ?? blobName ?? "audio";
		const blobType = source instanceof Blob && source.type ? source.type : undefined;
		const mimeType = options.mimeType ?? blobType ?? mimeTypeForFileName(fileName);
		if (!mimeType) {
			throw new VoiceConversionError({
				status: null,
				code: SDK_ERROR_CODES.invalidRequest,
				message: `Cannot tell the audio type of "${fileName}": pass mimeType (WAV, MP3 or FLAC)`,
				fieldErrors: [
					{ field: "mime_type", message: "is required when the file name has no .wav, .mp3 or .flac extension" },
				],
			});
		}
		const registered = await this.audioFiles.register(
			{ file_name: fileName, mime_type: mimeType },
			{ signal: options.signal, idempotencyKey: options.idempotencyKey },
		);
		if (!registered.upload_url) {
			throw new VoiceConversionError({
				status: null,
				code: SDK_ERROR_CODES.unexpectedResponse,
				message: `Audio file ${registered.id} has no upload address (already uploaded?)`,
			});
		}
		let uploadUrl = registered.upload_url;
		for (let attempt = 1; ; attempt++) {
			try {
				await this.#put(uploadUrl, source, { ...options, mimeType });
				break;
			} catch (error) {
				// Sent again to a fresh address; 409 `already_uploaded` says the bytes arrived and only the answer was lost.
				const retry = uploadRetry(error, source, attempt, options.signal);
				if (!retry) throw error;
				this.#onRetry?.(retry);
				options.onRetry?.(retry);
				await sleep(retry.delayMs, options.signal);
				const fresh = await this.audioFiles
					.regenerateUploadUrl(registered.id, { signal: options.signal })
					.catch((renewal: unknown) => {
						if (renewal instanceof VoiceConversionError && renewal.code === "already_uploaded") return null;
						throw renewal;
					});
				if (fresh === null) break;
				uploadUrl = fresh.upload_url ?? uploadUrl;
			}
		}
		return this.audioFiles.get(registered.id, { signal: options.signal });
	}

	async #put(url: string, source: UploadSource, options: { mimeType: string } & UploadAudioOptions): Promise<void> {
		const total = sizeOf(source);
		const { body, init } = prepareBody(source, options.onProgress);
		let response: Response;
		try {
			response = await this.#fetch(url, {
				method: "PUT",
				// A streamed body needs its length stated; for a Blob or bytes, fetch states it itself.
				headers: {
					"Content-Type": options.mimeType,
					...(body instanceof ReadableStream ? { "Content-Length": String(total) } : {}),
				},
				body,
				signal: options.signal,
				...init,
			} as RequestInit);
		} catch (cause) {
			throw networkError(cause, "Upload");
		}
		if (!response.ok) {
			const error = await errorFromResponse(response, "Upload");
			if (response.status === 403) {
				throw new VoiceConversionError({
					status: 403,
					code: SDK_ERROR_CODES.uploadExpired,
					message: `${error.message}. The upload address expired or was already used: regenerate it or register the file again`,
				});
			}
			throw error;
		}
		await response.body?.cancel();
		options.onProgress?.({ loaded: total, total });
	}

	// ---- Voice conversions ----

	readonly conversions = {
		/** Creates a conversion; it starts by itself once the audio is preprocessed. */
		create: async (input: CreateConversionInput, options: IdempotentRequestOptions = {}) =>
			this.#data<VoiceConversion>("POST", "/voice-conversions", {
				...options,
				json: validate(CreateConversionBody, input),
				idempotencyKey: options.idempotencyKey ?? crypto.randomUUID(),
			}),
		/** May carry only `id`, `use_preview`, `status` and `output_url` while processing (spec section 2). */
		get: (id: string, options: RequestOptions = {}) =>
			this.#data<ConversionSnapshot>("GET", `/voice-conversions/${encodeURIComponent(id)}`, options),
		list: async (options: ListConversionsOptions = {}) => {
			const query = validate(ListConversionsQuery, {
				status: options.status,
				limit: options.limit,
				cursor: options.cursor,
			});
			return this.#page<VoiceConversion>("/voice-conversions", { ...options, ...query });
		},
		/** Every conversion (optionally of one status), newest first, fetching pages as the loop asks for them. */
		iterate: (options: Omit<ListConversionsOptions, "cursor"> = {}) => this.#iterate(options),
	};

	async *#iterate(options: Omit<ListConversionsOptions, "cursor">): AsyncGenerator<VoiceConversion> {
		let cursor: string | undefined;
		do {
			const page = await this.conversions.list({ ...options, cursor });
			yield* page.data;
			cursor = page.nextCursor ?? undefined;
		} while (cursor);
	}

	/**
	 * Polls a conversion until it is `completed` or `failed`, backing off between polls, and resolves with it.
	 * Partial answers are merged into what is already known, so the result has every field the service ever sent.
	 * Transient failures (network, 429, 5xx) are polled through; a `failed` conversion resolves, it does not throw.
	 */
	async waitForConversion(id: string, options: WaitOptions = {}): Promise<ConversionSnapshot> {
		const timeoutMs = options.timeoutMs ?? 30 * 60_000;
		const deadline = Date.now() + timeoutMs;
		const maxInterval = options.maxIntervalMs ?? 10_000;
		let interval = options.initialIntervalMs ?? 1000;
		/** A `Retry-After` the service sent with a transient error: the next poll waits at least this long. */
		let notBeforeMs = 0;
		let known: ConversionSnapshot | null = null;
		let lastError: VoiceConversionError | null = null;
		for (;;) {
			try {
				const latest = await this.conversions.get(id, { signal: options.signal });
				const changed = known?.status !== latest.status;
				known = { ...known, ...definedFields(latest) } as ConversionSnapshot;
				lastError = null;
				if (changed) options.onUpdate?.(known);
				if (TERMINAL.has(known.status)) return known;
			} catch (error) {
				if (!(error instanceof VoiceConversionError) || !error.retryable) throw error;
				lastError = error;
				if (error.retryAfterSeconds !== undefined) {
					interval = Math.max(interval, error.retryAfterSeconds * 1000);
					notBeforeMs = error.retryAfterSeconds * 1000;
				}
			}
			const remaining = deadline - Date.now();
			if (remaining <= 0) {
				throw new VoiceConversionError({
					status: null,
					code: SDK_ERROR_CODES.waitTimeout,
					message: `Conversion ${id} was still ${known?.status ?? "unknown"} after ${Math.round(timeoutMs / 1000)} s${
						lastError ? ` (last error: ${lastError.message})` : ""
					}`,
				});
			}
			// Jitter spreads many waiting clients apart; the interval never overshoots the deadline.
			await sleep(Math.min(remaining, Math.max(notBeforeMs, interval * (0.8 + Math.random() * 0.4))), options.signal);
			notBeforeMs = 0;
			interval = Math.min(maxInterval, interval * 1.5);
		}
	}

	/**
	 * Downloads a completed conversion's WAV. Takes the conversion (its `output_url` is used while fresh) or its id.
	 * An expired address (storage answers 403) is replaced by fetching the conversion again, as the spec advises.
	 * Resolves with the storage `Response`: stream `body`, or call `arrayBuffer()`.
	 */
	async downloadConversion(
		conversion: string | Pick<ConversionSnapshot, "id" | "output_url" | "status">,
		options: RequestOptions = {},
	): Promise<Response> {
		let current = typeof conversion === "string" ? await this.conversions.get(conversion, options) : conversion;
		for (let attempt = 0; ; attempt++) {
			if (current.status !== "completed" || !current.output_url) {
				throw new VoiceConversionError({
					status: null,
					code: SDK_ERROR_CODES.notCompleted,
					message: `Conversion ${current.id} has no output to download (status ${current.status})`,
				});
			}
			let response: Response;
			try {
				response = await this.#fetch(current.output_url, { signal: options.signal });
			} catch (cause) {
				throw networkError(cause, "Download");
			}
			if (response.ok) return response;
			if (response.status === 403 && attempt === 0) {
				await response.body?.cancel();
				current = await this.conversions.get(current.id, options);
				continue;
			}
			throw await errorFromResponse(response, "Download");
		}
	}

	// ---- Webhook subscriptions ----

	readonly webhooks = {
		/** The response is the only time the signing `secret` is shown: store it. */
		create: async (input: CreateSubscriptionInput, options: RequestOptions = {}) =>
			this.#data<CreatedSubscription>("POST", "/webhooks/subscriptions", {
				...options,
				json: validate(CreateSubscriptionBody, input),
			}),
		list: (options: RequestOptions = {}) =>
			this.#data<WebhookSubscription[]>("GET", "/webhooks/subscriptions", options),
		get: (id: string, options: RequestOptions = {}) =>
			this.#data<WebhookSubscription>("GET", `/webhooks/subscriptions/${encodeURIComponent(id)}`, options),
		update: async (id: string, input: UpdateSubscriptionInput, options: RequestOptions = {}) =>
			this.#data<WebhookSubscription>("PATCH", `/webhooks/subscriptions/${encodeURIComponent(id)}`, {
				...options,
				json: validate(UpdateSubscriptionBody, input),
			}),
		delete: (id: string, options: RequestOptions = {}) =>
			this.#data<{ id: string; deleted: true }>("DELETE", `/webhooks/subscriptions/${encodeURIComponent(id)}`, options),
		/** The old secret stops working at once; the new one is shown only here. Never retried by the SDK. */
		regenerateSecret: (id: string, options: RequestOptions = {}) =>
			this.#data<RegeneratedSecret>(
				"POST",
				`/webhooks/subscriptions/${encodeURIComponent(id)}/regenerate-secret`,
				options,
			),
		/**
		 * Sends a signed `webhook.test` delivery to the subscription's URL now. The service waits up to 30 s for the
		 * receiver, so this call is given longer than that, whatever the client's own timeout.
		 */
		test: (id: string, options: RequestOptions = {}) =>
			this.#data<TestDeliveryResult>("POST", `/webhooks/subscriptions/${encodeURIComponent(id)}/test`, {
				...options,
				timeoutMs: Math.max(this.#timeoutMs, WEBHOOK_TEST_TIMEOUT_MS),
			}),
		/** The delivery log, one entry per attempt, newest first (`limit` 1..100, default 50). */
		deliveries: (id: string, options: { limit?: number } & RequestOptions = {}) =>
			this.#data<DeliveryLogEntry[]>("GET", `/webhooks/subscriptions/${encodeURIComponent(id)}/deliveries`, {
				...options,
				query: options.limit === undefined ? undefined : { limit: String(options.limit) },
			}),
		/** Delivers the event of a logged delivery again, with the same payload `id`. */
		redeliver: (id: string, deliveryId: string, options: RequestOptions = {}) =>
			this.#data<RedeliveryAccepted>(
				"POST",
				`/webhooks/subscriptions/${encodeURIComponent(id)}/deliveries/${encodeURIComponent(deliveryId)}/redeliver`,
				options,
			),
	};

	// ---- Transport ----

	async #page<T>(path: string, options: ListOptions & { status?: string }): Promise<Page<T>> {
		const query: Record<string, string> = {};
		if (options.limit !== undefined) query.limit = String(options.limit);
		if (options.cursor) query.cursor = options.cursor;
		if (options.status) query.status = options.status;
		const body = await this.#request("GET", path, { signal: options.signal, query });
		return { data: body.data as T[], nextCursor: (body.next_cursor as string | null | undefined) ?? null };
	}

	async #data<T>(method: string, path: string, options: RequestInitLite): Promise<T> {
		return (await this.#request(method, path, options)).data as T;
	}

	/**
	 * One API call: bearer token, JSON body, timeout, retries of what is safe to repeat (reads, deletes, updates and
	 * POSTs that carry an idempotency key), and one fresh token if the service refuses the cached one. A delete
	 * retried after a failure in transit or a 5xx that then finds nothing (404) succeeded the first time.
	 */
	async #request(method: string, path: string, options: RequestInitLite): Promise<Record<string, unknown>> {
		const url = new URL(`${this.baseUrl}${API_PREFIX}${path}`);
		for (const [name, value] of Object.entries(options.query ?? {})) url.searchParams.set(name, value);
		const retrySafe = method !== "POST" || options.idempotencyKey !== undefined;
		let refreshedToken = false;
		let maybeDone = false;
		for (let attempt = 0; ; attempt++) {
			let token: string | undefined;
			let error: VoiceConversionError;
			try {
				// Inside the try: a token request that fails in transit is retried like the call itself.
				token = await this.tokens.get(options.signal);
				const headers: Record<string, string> = { Authorization: `Bearer ${token}`, Accept: "application/json" };
				if (options.json !== undefined) headers["Content-Type"] = "application/json";
				if (options.idempotencyKey) headers["Idempotency-Key"] = options.idempotencyKey;
				const response = await this.#fetch(url, {
					method,
					headers,
					body: options.json === undefined ? undefined : JSON.stringify(options.json),
					signal: withTimeout(options.signal, options.timeoutMs ?? this.#timeoutMs),
				});
				if (response.ok) {
					const body = (await response.json().catch(() => null)) as Record<string, unknown> | null;
					if (body && typeof body === "object") return body;
					error = new VoiceConversionError({
						status: response.status,
						code: SDK_ERROR_CODES.unexpectedResponse,
						message: `${method} ${url.pathname} answered ${response.status} without a JSON body`,
					});
				} else {
					error = await errorFromResponse(response, `${method} ${url.pathname}`);
				}
			} catch (cause) {
				error = cause instanceof VoiceConversionError ? cause : networkError(cause, `${method} ${url.pathname}`);
				if (error.code === SDK_ERROR_CODES.aborted) throw error;
			}
			if (error.status === 401 && token !== undefined && !refreshedToken) {
				// A token can be refused before its expiry (signing key rotated, clock skew): try one fresh token.
				this.tokens.invalidate(token);
				refreshedToken = true;
				attempt--;
				continue;
			}
			if (method === "DELETE" && error.status === 404 && maybeDone) {
				// An earlier attempt may have deleted it and lost the answer: what was asked for is true.
				return { data: { id: decodeURIComponent(path.slice(path.lastIndexOf("/") + 1)), deleted: true } };
			}
			if (!retrySafe || !error.retryable || attempt >= this.#maxRetries) throw error;
			// A failure in transit or a 5xx may come after the service acted.
			maybeDone ||= error.status === null || error.status >= 500;
			// The service said when: never sooner (jitter only adds), and a wait longer than we would hold the caller
			// is handed back as the error, whose `retryAfterSeconds` says when to come back.
			if (error.retryAfterSeconds !== undefined && error.retryAfterSeconds > MAX_RETRY_AFTER_SECONDS) throw error;
			const delayMs =
				error.retryAfterSeconds !== undefined
					? error.retryAfterSeconds * 1000 * (1 + Math.random() * 0.2)
					: Math.min(500 * 2 ** attempt, 8000) * (0.8 + Math.random() * 0.4);
			this.#onRetry?.({ error, attempt: attempt + 1, delayMs });
			await sleep(delayMs, options.signal);
		}
	}
}

interface RequestInitLite {
	signal?: AbortSignal;
	/** This call's timeout, where it differs from the client's. */
	timeoutMs?: number;
	json?: unknown;
	query?: Record<string, string>;
	idempotencyKey?: string;
}

/** The fields of a partial answer that carry a value, so merging never erases what an earlier answer said. */
function definedFields<T extends object>(value: T): Partial<T> {
	return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
