/**
 * The web playground in a real browser: Debian's Chromium, headless, driven by playwright-core (which never
 * downloads a browser), against the local stack and the real runner process. A user signs in with the prefilled
 * credentials, browses a voice with its portrait and sample, uploads a generated recording, converts it with a
 * pitch shift and preview, then plays, looks at and downloads the result. The run leaves a full-page screenshot
 * in `test-results/playground.png`.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { SignJWT } from "jose";
import { type Browser, type BrowserContext, type BrowserContextOptions, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildTinyContentVec, buildTinyRmvpe } from "../../gpu-runner/test/rvc/support/tiny-models.ts";
import { runAdmin } from "../../scripts/lib/admin-commands.ts";
import { DEMO_VOICES, demoVoiceImage, demoVoiceSample } from "../../scripts/lib/demo-voices.ts";
import { createAccount, createClient, createVoice, voiceObjectKeys } from "../../scripts/lib/provisioning.ts";
import { VoiceConversionClient } from "../../sdk/index.ts";
import { TOKEN_LIFETIME_SECONDS } from "../../src/auth/scopes.ts";
import { type Credentials, callApi, type LocalStack, ROOT, startLocalStack } from "../support/local-stack.ts";
import { type RunnerProcess, startRunner } from "../support/runner-process.ts";
import { makeWav } from "../support/wav-generator.ts";
import { readWav } from "../support/wav-reader.ts";

const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOT = path.join(ROOT, "test-results", "playground.png");
const SOURCE_SECONDS = 3;

let stack: LocalStack;
let runner: RunnerProcess;
let client: Credentials;
let browser: Browser;
let tempDir: string;
let voiceId: string;
const demoVoice = DEMO_VOICES[0];

/** A voice as `npm run dev` seeds it: a demo voice's generated PNG portrait and WAV sample in R2. */
async function addVoiceWithAssets(name = `Playground ${demoVoice?.name}`): Promise<string> {
	if (!demoVoice) throw new Error("no demo voice");
	const id = crypto.randomUUID();
	const keys = voiceObjectKeys(id);
	await stack.env.BUCKET.put(keys.image("png"), new Uint8Array(demoVoiceImage(demoVoice)), {
		httpMetadata: { contentType: "image/png" },
	});
	await stack.env.BUCKET.put(keys.sample("wav"), new Uint8Array(demoVoiceSample(demoVoice)), {
		httpMetadata: { contentType: "audio/wav" },
	});
	const plan = createVoice(id, {
		name,
		engine: "dsp",
		tags: demoVoice.tags,
		params: demoVoice.params,
		imageKey: keys.image("png"),
		sampleKey: keys.sample("wav"),
	});
	await stack.runSql(plan.statements);
	return id;
}

/** A token for the test client, as the Worker issues them, that expires in `seconds`. */
async function agingToken(seconds: number): Promise<string> {
	const env = (await stack.harness.getWorker().getEnv()) as unknown as {
		TOKEN_SIGNING_KEY: string;
		TOKEN_ISSUER: string;
	};
	const [kid = "", secret = ""] = env.TOKEN_SIGNING_KEY.split(":");
	const issuedAt = Math.floor(Date.now() / 1000) - TOKEN_LIFETIME_SECONDS + seconds;
	return new SignJWT({ client_id: client.clientId, scope: client.scope, acc: client.accountId })
		.setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid })
		.setIssuer(env.TOKEN_ISSUER)
		.setAudience("voice-conversion-api")
		.setSubject(client.clientId)
		.setJti(crypto.randomUUID())
		.setIssuedAt(issuedAt)
		.setExpirationTime(issuedAt + TOKEN_LIFETIME_SECONDS)
		.sign(Buffer.from(secret, "base64url"));
}

interface PageWatch {
	page: Page;
	context: BrowserContext;
	pageErrors: string[];
	consoleErrors: string[];
	requests: string[];
}

/** A fresh browser context and page, with what the page logs, throws and requests kept for assertions. */
async function openPlayground(options: BrowserContextOptions = {}): Promise<PageWatch> {
	const context = await browser.newContext({
		acceptDownloads: true,
		viewport: { width: 1100, height: 900 },
		...options,
	});
	const page = await context.newPage();
	const watch: PageWatch = { page, context, pageErrors: [], consoleErrors: [], requests: [] };
	page.on("pageerror", (error) => watch.pageErrors.push(String(error.stack ?? error)));
	page.on("console", (message) => {
		if (message.type() === "error") watch.consoleErrors.push(`${message.text()} (${message.location().url})`);
	});
	page.on("request", (request) => watch.requests.push(request.url()));
	await page.goto(`${stack.url}/playground/`);
	// Prefill is asynchronous (it fetches /playground/defaults.json).
	await page.waitForFunction(() => (document.getElementById("client-secret") as HTMLInputElement).value !== "");
	return watch;
}

/** Runs `use` on a fresh playground page (`openPlayground`), closing its browser context however `use` ends. */
async function withPlayground(
	use: (watch: PageWatch) => Promise<void>,
	options: BrowserContextOptions = {},
): Promise<void> {
	const watch = await openPlayground(options);
	try {
		await use(watch);
	} finally {
		await watch.context.close();
	}
}

/** Clicks "Create voice" and answers the files the page declared in its registration (`POST /voices`). */
async function createdFiles(page: Page): Promise<Record<string, { file_name: string; size_bytes: number }>> {
	const created = page.waitForRequest((r) => r.url().endsWith("/api/v1/voices") && r.method() === "POST");
	await page.click("#own-voice-create");
	return (await created).postDataJSON().files;
}

/** Nothing leaves the stack's origin: no CDN, font or analytics fetches (blob: addresses carry the page origin). */
function expectOnlyStackOrigin(requests: string[]) {
	expect(requests.length).toBeGreaterThan(0);
	for (const url of requests) expect(new URL(url).origin, url).toBe(stack.url);
}

/** Signs in with the prefilled credentials and selects the test voice; returns its card. */
async function signInAndSelectVoice(page: Page) {
	await page.click("#sign-in");
	await expect.poll(() => page.textContent("#token-status"), { timeout: 15_000 }).toMatch(/signed in/i);
	const card = page.locator(`.voice[data-voice-id="${voiceId}"]`);
	await card.waitFor();
	return card;
}

/** Until the conversion shows a terminal status or the page shows an error. */
async function waitForOutcome(page: Page) {
	await page.waitForFunction(
		() =>
			/completed|failed/.test(document.getElementById("status")?.textContent ?? "") ||
			document.getElementById("error")?.textContent,
		undefined,
		{ timeout: 60_000 },
	);
}

/** The conversion the page followed completed, with no error shown (the runner's log explains one that did not). */
async function expectCompleted(page: Page) {
	expect(await page.textContent("#error"), runner.log().slice(-3000)).toBe("");
	expect(await page.textContent("#status")).toMatch(/^Status: completed/);
}

/** Signs in and opens "Your voices"; the list fills with each voice the page registers (`POST /api/v1/voices`). */
async function openOwnVoices(page: Page): Promise<string[]> {
	await signInAndSelectVoice(page);
	await page.locator("#own-voices-step").waitFor();
	const registrations: string[] = [];
	page.on("request", (r) => {
		if (r.method() === "POST" && r.url().endsWith("/api/v1/voices")) registrations.push(r.url());
	});
	return registrations;
}

/** Until the page's own voice `name` ends its validation; it must end ready, with no error shown. */
async function expectOwnVoiceReady(page: Page, name: string) {
	await page.waitForFunction(
		() =>
			/is ready|failed/.test(document.getElementById("own-voice-status")?.textContent ?? "") ||
			document.getElementById("error")?.textContent,
		undefined,
		{ timeout: 60_000 },
	);
	expect(await page.textContent("#error"), runner.log().slice(-3000)).toBe("");
	expect(await page.textContent("#own-voice-status")).toBe(
		`Voice "${name}" is ready: pick it above to convert with it.`,
	);
}

/** Picks a file and the options, converts, and waits until the page shows an outcome (or an error). */
async function convertInPage(page: Page, file: { name: string; bytes: Uint8Array }) {
	const sourcePath = path.join(tempDir, file.name);
	await writeFile(sourcePath, file.bytes);
	await page.setInputFiles("#file", sourcePath);
	await page.selectOption("#pitch", "third_up");
	await page.check("#preview");
	// Every status text the page shows, in order, to see it follow the conversion live.
	await page.evaluate(() => {
		const status = document.getElementById("status") as HTMLElement;
		const seen: string[] = [];
		(window as unknown as { statusHistory: string[] }).statusHistory = seen;
		new MutationObserver(() => seen.push(status.textContent ?? "")).observe(status, {
			childList: true,
			characterData: true,
			subtree: true,
		});
	});
	await page.click("#convert");
	await waitForOutcome(page);
	return page.evaluate(() => (window as unknown as { statusHistory: string[] }).statusHistory);
}

beforeAll(async () => {
	if (!existsSync(CHROMIUM)) {
		throw new Error(
			`${CHROMIUM} is missing: the playground test drives Debian's Chromium. Install it with \`apt-get install chromium\` (.ci/run does).`,
		);
	}
	tempDir = await mkdtemp(path.join(os.tmpdir(), "playground-test-"));
	// The Worker reads the prefill credentials from variables fixed at start, so the API client is planned first
	// (the same admin plans as the CLI) and its rows are written once the stack's D1 is up.
	const account = createAccount(`playground ${crypto.randomUUID().slice(0, 8)}`);
	const apiClient = await createClient(account.output.account_id, { name: "playground", kind: "api" });
	stack = await startLocalStack({
		vars: {
			PLAYGROUND_CLIENT_ID: apiClient.output.client_id,
			PLAYGROUND_CLIENT_SECRET: apiClient.output.client_secret,
			// Voice files over 200 kB go up in parts: the index fixture takes that path from the page.
			VOICE_SINGLE_UPLOAD_BYTES: "200000",
		},
	});
	await stack.runSql([...account.statements, ...apiClient.statements]);
	client = {
		accountId: account.output.account_id,
		clientId: apiClient.output.client_id,
		clientSecret: apiClient.output.client_secret,
		scope: apiClient.output.scope,
	};
	// The deployment's base models (tiny ContentVec and RMVPE builds), set with the admin command, so the runner
	// validates and runs RVC voices.
	await writeFile(path.join(tempDir, "contentvec.onnx"), buildTinyContentVec());
	await writeFile(path.join(tempDir, "rmvpe.onnx"), buildTinyRmvpe({ pitchBin: 168 }));
	for (const name of ["contentvec", "rmvpe"]) {
		await runAdmin(["base-model", "set", name, path.join(tempDir, `${name}.onnx`)], stack.admin);
	}
	runner = startRunner(stack.url, await stack.provision("runner", client.accountId), {
		RUNNER_ENGINES: "dsp,rvc",
		RUNNER_CACHE_DIR: path.join(tempDir, "runner-cache"),
	});
	voiceId = await addVoiceWithAssets();
	browser = await chromium.launch({
		executablePath: CHROMIUM,
		args: [
			"--headless",
			"--no-sandbox",
			"--disable-gpu",
			"--disable-background-networking",
			"--disable-component-update",
			"--disable-default-apps",
			"--no-first-run",
			"--disable-dev-shm-usage",
			"--mute-audio",
		],
	});
}, 180_000);

afterAll(async () => {
	await browser?.close();
	await runner?.stop();
	await stack?.close();
	if (tempDir) await rm(tempDir, { recursive: true, force: true });
});

describe("playground in headless Chromium", () => {
	it("signs in, browses a voice, uploads, converts, plays, draws and downloads the result", async () => {
		await withPlayground(async ({ page, pageErrors, consoleErrors, requests }) => {
			expect(await page.inputValue("#client-id")).toBe(client.clientId);
			expect(await page.inputValue("#client-secret")).toBe(client.clientSecret);
			// The voice card: its portrait decoded, its sample served as audio and playable.
			const card = await signInAndSelectVoice(page);
			expect(await card.textContent()).toContain(`Playground ${demoVoice?.name}`);
			const image = card.locator("img");
			await expect
				.poll(() => image.evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0)))
				.toBe(256);
			const sample = card.locator("audio");
			const sampleUrl = await sample.getAttribute("src");
			expect(sampleUrl).toBeTruthy();
			const served = await page.evaluate(async (url) => {
				const response = await fetch(url);
				const bytes = new Uint8Array(await response.arrayBuffer());
				return {
					status: response.status,
					type: response.headers.get("content-type"),
					magic: String.fromCharCode(...bytes.subarray(0, 4)),
				};
			}, String(sampleUrl));
			expect(served).toEqual({ status: 200, type: "audio/wav", magic: "RIFF" });
			const sampleSeconds = await sample.evaluate(
				(audio: HTMLAudioElement) =>
					new Promise<number>((resolve, reject) => {
						audio.addEventListener("loadedmetadata", () => resolve(audio.duration), { once: true });
						audio.addEventListener("error", () => reject(new Error(`sample error ${audio.error?.code}`)), {
							once: true,
						});
						audio.preload = "metadata";
						audio.load();
					}),
			);
			expect(sampleSeconds).toBeCloseTo(4, 1);

			await card.click();
			expect(await card.locator("input[type=radio]").isChecked()).toBe(true);
			await page.locator("#convert-step").waitFor();

			const sampleRate = 44_100;
			const frames = sampleRate * SOURCE_SECONDS;
			const history = await convertInPage(page, {
				name: "take-1.wav",
				bytes: makeWav({ sampleRate, channels: 1, frames, encoding: "pcm", bits: 16 }),
			});
			expect(await page.textContent("#error"), runner.log().slice(-3000)).toBe("");
			expect(await page.textContent("#status")).toMatch(/completed/);
			expect(history.some((text) => /upload/i.test(text))).toBe(true);
			// The status the API answered at creation shows before the first poll, then each new one.
			expect(history.some((text) => /^Status: (pending_preprocessing|queued|processing) /.test(text))).toBe(true);
			expect(history.at(-1)).toMatch(/^Status: completed/);
			expect(await page.locator("#upload-progress").evaluate((p: HTMLProgressElement) => p.value)).toBe(100);
			expect(await page.textContent("#upload-label")).toMatch(/100%/);

			// The result: playable audio, a drawn waveform, a WAV download of the source's length (it is under 10 s).
			await page.locator("#result-step").waitFor();
			const resultSeconds = await page.locator("#result-audio").evaluate(
				(audio: HTMLAudioElement) =>
					new Promise<number>((resolve, reject) => {
						if (audio.readyState >= 1) return resolve(audio.duration);
						audio.addEventListener("loadedmetadata", () => resolve(audio.duration), { once: true });
						audio.addEventListener("error", () => reject(new Error(`result error ${audio.error?.code}`)), {
							once: true,
						});
					}),
			);
			expect(resultSeconds).toBeGreaterThan(0);
			expect(resultSeconds).toBeCloseTo(SOURCE_SECONDS, 1);
			const canvas = page.locator("#waveform");
			expect(await canvas.getAttribute("data-drawn")).toBe("true");
			const paintedPixels = await canvas.evaluate((c: HTMLCanvasElement) => {
				const { data } = (c.getContext("2d") as CanvasRenderingContext2D).getImageData(0, 0, c.width, c.height);
				let painted = 0;
				for (let i = 3; i < data.length; i += 4) if ((data[i] ?? 0) > 0) painted++;
				return painted;
			});
			expect(paintedPixels).toBeGreaterThan(1000);
			// A narrower window: the waveform is drawn again at the canvas's new size, not stretched.
			const sizes = () =>
				canvas.evaluate((c: HTMLCanvasElement) => ({
					drawn: c.width,
					shown: Math.round(c.clientWidth * (window.devicePixelRatio || 1)),
				}));
			const before = await sizes();
			const viewport = page.viewportSize();
			await page.setViewportSize({ width: 420, height: viewport?.height ?? 800 });
			await expect.poll(async () => (await sizes()).drawn, { timeout: 5_000 }).toBe((await sizes()).shown);
			expect((await sizes()).drawn).toBeLessThan(before.drawn);
			if (viewport) await page.setViewportSize(viewport);

			const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download")]);
			expect(download.suggestedFilename()).toBe(`take-1-Playground_${demoVoice?.name}-third_up.wav`);
			const wav = readWav(new Uint8Array(await readFile(await download.path())));
			expect(Math.abs(wav.durationSeconds - SOURCE_SECONDS)).toBeLessThan(0.01);
			expect(await page.textContent("#result-info")).toContain(
				`${SOURCE_SECONDS.toFixed(2)} s · ${wav.sampleRate} Hz · ${wav.channels} ch`,
			);

			await mkdir(path.dirname(SCREENSHOT), { recursive: true });
			await page.screenshot({ path: SCREENSHOT, fullPage: true });
			expect((await stat(SCREENSHOT)).size).toBeGreaterThan(0);

			expect(pageErrors).toEqual([]);
			expect(consoleErrors).toEqual([]);
			expectOnlyStackOrigin(requests);
		});
	});

	it("is served with headers that keep it from being framed, sniffed or loading scripts from elsewhere", async () => {
		for (const page of ["/playground/", "/playground/app.js", "/docs"]) {
			const response = await fetch(`${stack.url}${page}`);
			expect(response.status, page).toBe(200);
			const csp = response.headers.get("content-security-policy") ?? "";
			expect(csp, page).toMatch(/default-src 'self'/);
			expect(csp, page).toMatch(/frame-ancestors 'none'/);
			expect(response.headers.get("x-frame-options"), page).toBe("DENY");
			expect(response.headers.get("x-content-type-options"), page).toBe("nosniff");
			expect(response.headers.get("referrer-policy"), page).toBe("no-referrer");
		}
		// Another page that frames the playground (its credentials form) gets nothing.
		const context = await browser.newContext();
		try {
			const page = await context.newPage();
			await page.setContent(`<iframe src="${stack.url}/playground/"></iframe>`);
			await page.waitForTimeout(1000);
			const frame = page.frames().find((f) => f !== page.mainFrame());
			expect(frame).toBeDefined();
			expect(await frame?.locator("#client-secret").count()).toBe(0);
		} finally {
			await context.close();
		}
	});

	it("fits a phone's screen, long unbroken voice names and file names included", async () => {
		const longName = "Averyveryverylongvoicename".repeat(4).slice(0, 100);
		const longVoiceId = await addVoiceWithAssets(longName);
		await withPlayground(
			async ({ page, pageErrors }) => {
				await signInAndSelectVoice(page);
				const card = page.locator(`.voice[data-voice-id="${longVoiceId}"]`);
				await card.click();
				expect(await card.locator("input[type=radio]").isChecked()).toBe(true);
				await page.click("#voice-settings summary");
				await page.setInputFiles("#file", {
					name: `${"a-very-long-recording-name".repeat(8)}.wav`,
					mimeType: "audio/wav",
					buffer: Buffer.from(makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 })),
				});
				const widths = await page.evaluate(() => {
					const root = document.documentElement;
					const wider = Array.from(document.querySelectorAll("body *")).filter(
						(e) => e.getBoundingClientRect().right > root.clientWidth,
					);
					return {
						scroll: root.scrollWidth,
						client: root.clientWidth,
						wider: wider.map((e) => e.outerHTML.slice(0, 80)),
					};
				});
				expect(widths.wider).toEqual([]);
				expect(widths.scroll).toBe(widths.client);
				expect(pageErrors).toEqual([]);
			},
			{
				viewport: { width: 375, height: 667 },
				isMobile: true,
				hasTouch: true,
			},
		);
	});

	it("refuses a recording of 100 MB or more before registering or sending any of it", async () => {
		await withPlayground(async ({ page, pageErrors, requests }) => {
			await (await signInAndSelectVoice(page)).click();
			const big = path.join(tempDir, "long-take.wav");
			await writeFile(big, "");
			await truncate(big, 100_000_000);
			await page.setInputFiles("#file", big);
			await page.click("#convert");
			await page.waitForFunction(() => document.getElementById("error")?.textContent);
			expect(await page.textContent("#error")).toMatch(/^long-take\.wav is 100\.0 MB: recordings must be under 100 MB/);
			expect(await page.textContent("#status")).toBe("");
			expect(await page.isEnabled("#convert")).toBe(true);
			expect(requests.filter((url) => /audio-files/.test(url))).toEqual([]);
			// Beside the file, in the words its upload address answers a file that large with.
			const token = await stack.token(client);
			const registered = await callApi<{ upload_url: string }>(stack, token, "/api/v1/audio-files", {
				method: "POST",
				body: { file_name: "long-take.wav", mime_type: "audio/wav" },
			});
			const answer = await fetch(registered.upload_url, {
				method: "PUT",
				headers: { "Content-Type": "audio/wav" },
				body: new Uint8Array(100_000_000),
			});
			expect(answer.status).toBe(413);
			expect(await page.textContent("#file-problem")).toBe(((await answer.json()) as { message: string }).message);
			expect(await page.getAttribute("#file", "aria-invalid")).toBe("true");
			expect(await page.getAttribute("#file", "aria-describedby")).toBe("file-problem");
			// A file of the right size takes the problem away.
			await page.setInputFiles("#file", {
				name: "take.wav",
				mimeType: "audio/wav",
				buffer: Buffer.from(makeWav({ sampleRate: 16_000, channels: 1, frames: 1_600, encoding: "pcm", bits: 16 })),
			});
			expect(await page.locator("#file-problem").count()).toBe(0);
			expect(pageErrors).toEqual([]);
		});
	});

	it("clears the step it was on when a step fails", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			await (await signInAndSelectVoice(page)).click();
			await page.click("#voice-settings summary");
			await page.fill("#protect", "0.2");
			await convertInPage(page, {
				name: "take-3.wav",
				bytes: makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 }),
			});
			// The creation is refused after the upload: the page no longer says "Uploading…".
			expect(await page.textContent("#error")).toMatch(/voice_settings\.protect/);
			expect(await page.textContent("#status")).toBe("");
			expect(pageErrors).toEqual([]);
		});
	});

	it("gets a new token by itself when the one it holds expires mid-session", async () => {
		await withPlayground(async ({ page, pageErrors, requests }) => {
			// The first token the page gets is one signed with the Worker's key (as the Worker signs them) an hour
			// less 8 s ago: it expires while the page is in use, as an hour-old session's does.
			const aging = await agingToken(8);
			let handedOut = false;
			await page.route("**/oauth2/token", async (route) => {
				if (handedOut) return route.continue();
				handedOut = true;
				await route.fulfill({ json: { access_token: aging, expires_in: 8, token_type: "Bearer" } });
			});
			await (await signInAndSelectVoice(page)).click();
			const answer = await fetch(`${stack.url}/api/v1/voices`, { headers: { Authorization: `Bearer ${aging}` } });
			expect(answer.status).toBe(200);
			await expect
				.poll(
					async () =>
						(await fetch(`${stack.url}/api/v1/voices`, { headers: { Authorization: `Bearer ${aging}` } })).status,
					{ timeout: 15_000, interval: 500 },
				)
				.toBe(401);
			await convertInPage(page, {
				name: "take-4.wav",
				bytes: makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 }),
			});
			await expectCompleted(page);
			expect(requests.filter((url) => url.endsWith("/oauth2/token"))).toHaveLength(2);
			expect(pageErrors).toEqual([]);
		});
	}, 60_000);

	it("keeps following a conversion through a dropped connection, and says what a network error is", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			await (await signInAndSelectVoice(page)).click();
			// The browser loses the network for the first two looks at the conversion (the service is untouched).
			let dropped = 0;
			await page.route("**/api/v1/voice-conversions/*", (route) =>
				dropped++ < 2 ? route.abort("internetdisconnected") : route.continue(),
			);
			const history = await convertInPage(page, {
				name: "take-5.wav",
				bytes: makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 }),
			});
			expect(dropped).toBeGreaterThan(2);
			expect(history.some((text) => /connection lost, trying again/.test(text))).toBe(true);
			await expectCompleted(page);
			await page.locator("#result-step").waitFor();
			await page.unroute("**/api/v1/voice-conversions/*");

			await page.route("**/oauth2/token", (route) => route.abort("internetdisconnected"));
			await page.click("#sign-in");
			await page.waitForFunction(() => document.getElementById("error")?.textContent);
			expect(await page.textContent("#error")).toBe(
				"Token request: no answer from the service (network error). Check the connection and try again.",
			);
			expect(pageErrors).toEqual([]);
		});
	}, 60_000);

	it("can be used with the keyboard alone, and names every control", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			await page.focus("#client-secret");
			await page.keyboard.press("Tab");
			expect(await page.evaluate(() => document.activeElement?.id)).toBe("sign-in");
			await page.keyboard.press("Enter");
			const cards = page.locator(".voice");
			await cards.nth(1).waitFor();
			// Tab enters the voices at the first; the arrow keys pick the next one.
			await page.keyboard.press("Tab");
			const first = await page.evaluate(() => (document.activeElement as HTMLInputElement).type);
			expect(first).toBe("radio");
			await page.keyboard.press("ArrowDown");
			expect(await cards.nth(1).locator("input[type=radio]").isChecked()).toBe(true);
			expect(
				await cards
					.nth(1)
					.locator("input[type=radio]")
					.evaluate((r) => r === document.activeElement),
			).toBe(true);
			await page.locator("#convert-step").waitFor();
			await page.setInputFiles("#file", {
				name: "take-6.wav",
				mimeType: "audio/wav",
				buffer: Buffer.from(makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 })),
			});
			await page.focus("#preview");
			await page.keyboard.press("Tab");
			expect(await page.evaluate(() => document.activeElement?.id)).toBe("convert");
			await page.keyboard.press("Enter");
			await waitForOutcome(page);
			expect(await page.textContent("#error"), runner.log().slice(-3000)).toBe("");
			await page.locator("#result-step").waitFor();
			// Every control has a name, and nothing but buttons, links and form controls takes focus.
			const unnamed = await page.evaluate(() =>
				Array.from(document.querySelectorAll("input, select, progress, audio, canvas"))
					.filter(
						(e) =>
							!(e as HTMLInputElement).labels?.length &&
							!e.getAttribute("aria-label") &&
							!e.getAttribute("aria-labelledby"),
					)
					.map((e) => e.outerHTML.slice(0, 80)),
			);
			expect(unnamed).toEqual([]);
			expect(await page.locator("[role=radio], [role=button], div[tabindex], span[tabindex]").count()).toBe(0);
			expect(pageErrors).toEqual([]);
		});
	}, 60_000);

	it("finds the conversion it was following again after a reload", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			await (await signInAndSelectVoice(page)).click();
			await page.selectOption("#pitch", "fifth_down");
			await page.setInputFiles("#file", {
				name: "take-7.wav",
				mimeType: "audio/wav",
				buffer: Buffer.from(makeWav({ sampleRate: 16_000, channels: 1, frames: 32_000, encoding: "pcm", bits: 16 })),
			});
			const created = page.waitForResponse(
				(r) => r.url().endsWith("/api/v1/voice-conversions") && r.request().method() === "POST",
			);
			await page.click("#convert");
			const conversion = (await (await created).json()).data;
			await page.reload();
			await page.waitForFunction(() => (document.getElementById("client-secret") as HTMLInputElement).value !== "");
			expect(await page.locator("#result-step").isHidden()).toBe(true);
			await page.click("#sign-in");
			await waitForOutcome(page);
			await expectCompleted(page);
			expect(new URL(page.url()).hash).toBe(`#conversion=${conversion.id}`);
			await page.locator("#result-step").waitFor();
			expect(await page.locator(`.voice[data-voice-id="${voiceId}"] input`).isChecked()).toBe(true);
			expect(await page.getAttribute("#download", "download")).toBe(
				`take-7-Playground_${demoVoice?.name}-fifth_down.wav`,
			);
			expect(await page.textContent("#result-info")).toContain("pitch fifth_down · 2.00 s");
			expect(pageErrors).toEqual([]);
		});
	}, 60_000);

	it("refuses a file that is not what its role takes before registering the voice, and follows the next try through a dropped connection", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			const registrations = await openOwnVoices(page);
			await page.fill("#own-voice-name", "Second try");
			await page.setInputFiles("#own-voice-model", {
				name: "model.pth",
				mimeType: "application/octet-stream",
				buffer: Buffer.from("these bytes are no model"),
			});
			// A real image named as a sample: refused by its bytes too, in the same message.
			await page.setInputFiles("#own-voice-sample", {
				name: "sample.wav",
				mimeType: "audio/wav",
				buffer: demoVoiceImage(demoVoice as (typeof DEMO_VOICES)[number]),
			});
			await page.click("#own-voice-create");
			await page.waitForFunction(() => document.getElementById("error")?.textContent);
			// The SDK's words (and the API's), naming the file; nothing was registered, so nothing is left to delete.
			expect(await page.textContent("#error")).toBe(
				[
					"The model file is not an RVC checkpoint (.pth) or an RVC synthesizer exported to ONNX (recognised by its bytes, not its name): model.pth",
					"The sample file is not a WAV, MP3 or FLAC recording (recognised by its bytes, not its name): sample.wav",
					"Nothing was registered: pick the right file and upload the voice again.",
				].join("\n"),
			);
			expect(registrations).toEqual([]);
			expect(await page.textContent("#own-voice-status")).toBe("");
			expect(await page.locator("#own-voices li", { hasText: "Second try" }).count()).toBe(0);
			await page.setInputFiles("#own-voice-sample", []);

			// This time the browser loses the network for the first two looks at the voice being checked.
			let dropped = 0;
			await page.route("**/api/v1/voices/*", (route) =>
				route.request().method() === "GET" && dropped++ < 2 ? route.abort("internetdisconnected") : route.continue(),
			);
			const statuses: string[] = [];
			await page.exposeFunction("noteVoiceStatus", (text: string) => statuses.push(text));
			await page.evaluate(() => {
				const status = document.getElementById("own-voice-status") as HTMLElement;
				const note = (window as unknown as { noteVoiceStatus: (text: string) => void }).noteVoiceStatus;
				new MutationObserver(() => note(status.textContent ?? "")).observe(status, { childList: true, subtree: true });
			});
			await page.setInputFiles("#own-voice-model", path.join(ROOT, "gpu-runner/test/rvc/fixtures/v2-f0-40k.pth"));
			await page.click("#own-voice-create");
			await expectOwnVoiceReady(page, "Second try");
			expect(dropped).toBeGreaterThan(2);
			expect(statuses).toContain('Voice "Second try": connection lost, trying again…');
			expect(pageErrors).toEqual([]);
		});
	}, 120_000);

	it("does not keep a voice whose file the API refused where the page's own check let it through", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			// The page's check is a courtesy; the API's on upload is the authority. A page without it (an older copy,
			// say) registers the voice, gets the API's 415, and deletes the voice so that its name is free again.
			const source = await readFile(path.join(ROOT, "public/playground/voice-file-kinds.js"), "utf8");
			await page.route("**/playground/voice-file-kinds.js", (route) =>
				route.fulfill({
					contentType: "text/javascript",
					body: source.replace(
						"export async function voiceFileProblems(files) {",
						"export async function voiceFileProblems(files) {\n\treturn [];",
					),
				}),
			);
			await page.reload();
			await page.waitForFunction(() => (document.getElementById("client-secret") as HTMLInputElement).value !== "");
			await signInAndSelectVoice(page);
			await page.locator("#own-voices-step").waitFor();
			await page.fill("#own-voice-name", "Refused by the API");
			await page.setInputFiles("#own-voice-model", {
				name: "model.pth",
				mimeType: "application/octet-stream",
				buffer: Buffer.from("these bytes are no model"),
			});
			await page.click("#own-voice-create");
			await page.waitForFunction(() => document.getElementById("error")?.textContent);
			expect(await page.textContent("#error")).toMatch(
				/^The model file is not an RVC checkpoint[^\n]*; nothing was kept\.[^\n]*\nThe voice "Refused by the API" was not kept: pick the right files and upload it again\.$/,
			);
			expect(await page.locator("#own-voices li", { hasText: "Refused by the API" }).count()).toBe(0);
			expect(pageErrors).toEqual([]);
		});
	}, 60_000);

	it("keeps its text readable in the dark colour scheme", async () => {
		await withPlayground(
			async ({ page, pageErrors }) => {
				await signInAndSelectVoice(page);
				// A voice waiting for its files, made through the API, for its status badge.
				const token = await stack.token(client);
				const waiting = await callApi<{ id: string }>(stack, token, "/api/v1/voices", {
					method: "POST",
					body: {
						name: `Dark ${crypto.randomUUID().slice(0, 8)}`,
						files: { model: { file_name: "m.pth", size_bytes: 1000 } },
					},
				});
				await page.click("#sign-in"); // lists the voices again
				await page.locator(`#own-voices li[data-voice-id="${waiting.id}"]`).waitFor();
				// WCAG contrast of each piece of text against the background it is painted on.
				const ratios = await page.evaluate(() => {
					const luminance = (color: string) => {
						const [r = 0, g = 0, b = 0] = (color.match(/[\d.]+/g) ?? []).map(Number).map((v) => {
							const c = v / 255;
							return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
						});
						return 0.2126 * r + 0.7152 * g + 0.0722 * b;
					};
					const background = (e: Element | null): string => {
						for (; e; e = e.parentElement) {
							const color = getComputedStyle(e).backgroundColor;
							if (color !== "rgba(0, 0, 0, 0)" && color !== "transparent") return color;
						}
						return "rgb(255, 255, 255)";
					};
					return Array.from(document.querySelectorAll(".voice-status, button")).map((e) => {
						const [a, b] = [luminance(getComputedStyle(e).color), luminance(background(e))].sort((x, y) => y - x);
						return { text: e.textContent, ratio: Math.round((((a ?? 0) + 0.05) / ((b ?? 0) + 0.05)) * 10) / 10 };
					});
				});
				expect(ratios.length).toBeGreaterThan(3);
				for (const { text, ratio } of ratios) expect(ratio, String(text)).toBeGreaterThanOrEqual(4.5);
				expect(pageErrors).toEqual([]);
			},
			{ colorScheme: "dark" },
		);
	});

	it("shows why a conversion failed when the upload is not audio", async () => {
		await withPlayground(async ({ page, pageErrors, consoleErrors, requests }) => {
			await (await signInAndSelectVoice(page)).click();
			const history = await convertInPage(page, {
				name: "notes.wav",
				bytes: new TextEncoder().encode("this is not audio at all, just text"),
			});
			expect(history.at(-1)).toMatch(/^Status: failed/);
			expect(await page.textContent("#error")).toMatch(/^Conversion failed: .*(format|corrupt)/i);
			expect(await page.locator("#result-step").isHidden()).toBe(true);
			expect(await page.isEnabled("#convert")).toBe(true);
			expect(pageErrors).toEqual([]);
			expect(consoleErrors).toEqual([]);
			expectOnlyStackOrigin(requests);
		});
	});

	it("sends the voice settings filled in, and shows why the voice cannot honour one", async () => {
		await withPlayground(async ({ page, pageErrors, consoleErrors, requests }) => {
			await (await signInAndSelectVoice(page)).click();
			await page.click("#voice-settings summary");
			// Any value in range, not only the spinner's steps (the API takes 0.33 as well as 0.35).
			await page.fill("#index_rate", "0.33");
			await page.fill("#formant_shift", "-2.25");
			const created = page.waitForRequest(
				(r) => r.url().endsWith("/api/v1/voice-conversions") && r.method() === "POST",
			);
			await convertInPage(page, {
				name: "take-2.wav",
				bytes: makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 }),
			});
			expect((await created).postDataJSON().voice_settings).toEqual({ index_rate: 0.33, formant_shift: -2.25 });
			// The test voice is a dsp voice: it has no feature index to blend.
			expect(await page.textContent("#error")).toMatch(
				/voice_settings.index_rate: the dsp engine .* honours only formant_shift/,
			);
			expect(await page.locator("#result-step").isHidden()).toBe(true);
			expect(pageErrors).toEqual([]);
			expect(consoleErrors.filter((e) => !/status of 400/.test(e))).toEqual([]);
			expectOnlyStackOrigin(requests);
		});
	});

	it("shows each field the API refused a conversion for beside that field, and clears them when sent again", async () => {
		await withPlayground(async ({ page, context, pageErrors, consoleErrors }) => {
			await (await signInAndSelectVoice(page)).click();
			await page.click("#voice-settings summary");
			await page.fill("#index_rate", "0.5");
			await page.fill("#protect", "0.3");
			// The settings are folded away again: the page opens them to show their problems.
			await page.click("#voice-settings summary");
			await page.setInputFiles("#file", {
				name: "take-9.wav",
				mimeType: "audio/wav",
				buffer: Buffer.from(makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 })),
			});
			await page.selectOption("#pitch", "auto");
			const refused = page.waitForResponse(
				(r) => r.url().endsWith("/api/v1/voice-conversions") && r.request().method() === "POST",
			);
			await page.click("#convert");
			// The test voice is a dsp voice: no index to blend, no consonants to protect, no measured pitch range.
			const body = await (await refused).json();
			expect(body.errors.map((e: { field: string }) => e.field).sort()).toEqual([
				"pitch_shift",
				"voice_settings.index_rate",
				"voice_settings.protect",
			]);
			await page.locator("#pitch-problem").waitFor();
			const problems = await page.evaluate(() =>
				["index_rate", "protect", "pitch"].map((id) => {
					const control = document.getElementById(id) as HTMLElement;
					const problem = document.getElementById(`${id}-problem`);
					return {
						id,
						text: problem?.textContent,
						shown: problem ? problem.getBoundingClientRect().height > 0 : false,
						besideItsField: problem?.previousElementSibling === control,
						invalid: control.getAttribute("aria-invalid"),
						describedBy: control.getAttribute("aria-describedby"),
					};
				}),
			);
			for (const problem of problems) {
				expect(problem, problem.id).toMatchObject({
					shown: true,
					besideItsField: true,
					invalid: "true",
					describedBy: `${problem.id}-problem`,
				});
			}
			const byId = Object.fromEntries(problems.map((p) => [p.id, p.text]));
			const message = (field: string) => body.errors.find((e: { field: string }) => e.field === field).message;
			expect(byId).toEqual({
				index_rate: message("voice_settings.index_rate"),
				protect: message("voice_settings.protect"),
				pitch: message("pitch_shift"),
			});
			expect(byId.pitch).toMatch(/^auto needs the voice's pitch range/);
			expect(await page.getAttribute("#voice-settings", "open")).not.toBeNull();
			// Every field has its place: the message above them is the API's, nothing listed beside it.
			expect(await page.textContent("#error")).toBe(body.message);
			// The field is named by the control alone; its problem is its description.
			expect(await page.getByRole("spinbutton", { name: "Index rate (0–1)", exact: true }).count()).toBe(1);
			const cdp = await context.newCDPSession(page);
			const { nodes } = (await cdp.send("Accessibility.getFullAXTree")) as {
				nodes: { role?: { value?: string }; name?: { value?: string }; description?: { value?: string } }[];
			};
			const described = nodes.find((n) => n.role?.value === "spinbutton" && n.name?.value === "Index rate (0–1)");
			expect(described?.description?.value).toBe(byId.index_rate);

			// Changing a field takes its problem away; sending again clears the rest.
			await page.fill("#index_rate", "");
			expect(await page.locator("#index_rate-problem").count()).toBe(0);
			expect(await page.getAttribute("#index_rate", "aria-invalid")).toBeNull();
			expect(await page.locator("#protect-problem").count()).toBe(1);
			await page.fill("#protect", "");
			await page.selectOption("#pitch", "same_octave");
			await page.click("#convert");
			await waitForOutcome(page);
			await expectCompleted(page);
			expect(await page.locator(".field-problem").count()).toBe(0);
			expect(await page.locator("[aria-invalid]").count()).toBe(0);
			expect(pageErrors).toEqual([]);
			expect(consoleErrors.filter((e) => !/status of 400/.test(e))).toEqual([]);
		});
	}, 60_000);

	it("shows each field of a voice refused by the page or by the API beside that field", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			const registrations = await openOwnVoices(page);
			await page.fill("#own-voice-name", "Fields");
			await page.setInputFiles("#own-voice-model", path.join(ROOT, "gpu-runner/test/rvc/fixtures/v2-f0-40k.pth"));
			// The page's own check: a portrait picked as the sample.
			await page.setInputFiles("#own-voice-sample", {
				name: "sample.wav",
				mimeType: "audio/wav",
				buffer: demoVoiceImage(demoVoice as (typeof DEMO_VOICES)[number]),
			});
			await page.click("#own-voice-create");
			await page.locator("#own-voice-sample-problem").waitFor();
			expect(await page.textContent("#own-voice-sample-problem")).toBe("must be a WAV, MP3 or FLAC recording");
			expect(await page.getAttribute("#own-voice-sample", "aria-invalid")).toBe("true");
			expect(registrations).toEqual([]);

			// The page's own check again: a portrait (a real PNG) over the image limit of 10 MB, in the API's words (the
			// API's own refusal of it is compared in the test of each role's limit).
			await page.setInputFiles("#own-voice-sample", []);
			expect(await page.locator("#own-voice-sample-problem").count()).toBe(0);
			const portrait = path.join(tempDir, "large-portrait.png");
			await writeFile(portrait, demoVoiceImage(demoVoice as (typeof DEMO_VOICES)[number]));
			await truncate(portrait, 10_000_001);
			await page.setInputFiles("#own-voice-image", portrait);
			await page.click("#own-voice-create");
			await page.locator("#own-voice-image-problem").waitFor();
			expect(await page.textContent("#own-voice-image-problem")).toBe(
				"must be at most 10000000 bytes (10 MB) for the image file",
			);
			expect(registrations).toEqual([]);

			// The API's: a name of spaces only (the page leaves names to it), beside the name.
			await page.setInputFiles("#own-voice-image", []);
			expect(await page.locator("#own-voice-image-problem").count()).toBe(0);
			await page.fill("#own-voice-name", "   ");
			await page.setInputFiles("#own-voice-image", {
				name: "portrait.png",
				mimeType: "image/png",
				buffer: demoVoiceImage(demoVoice as (typeof DEMO_VOICES)[number]),
			});
			const refused = page.waitForResponse(
				(r) => r.url().endsWith("/api/v1/voices") && r.request().method() === "POST",
			);
			await page.click("#own-voice-create");
			const body = await (await refused).json();
			expect(body.errors.map((e: { field: string }) => e.field).sort()).toEqual(["name"]);
			await page.locator("#own-voice-name-problem").waitFor();
			const message = (field: string) => body.errors.find((e: { field: string }) => e.field === field).message;
			expect(await page.textContent("#own-voice-name-problem")).toBe(message("name"));
			for (const id of ["own-voice-name"]) {
				expect(await page.getAttribute(`#${id}`, "aria-invalid"), id).toBe("true");
				expect(await page.getAttribute(`#${id}`, "aria-describedby"), id).toBe(`${id}-problem`);
			}
			// The model's own description stays, the problem joins it (none here: the model was fine).
			expect(await page.getAttribute("#own-voice-model", "aria-describedby")).toBe("own-voice-archive-contents");
			expect(await page.textContent("#error")).toBe(body.message);
			expect(await page.textContent("#own-voice-status")).toBe("");
			expect(registrations).toHaveLength(1);
			expect(await page.locator("#own-voices li", { hasText: "Fields" }).count()).toBe(0);
			expect(pageErrors).toEqual([]);
		});
	}, 60_000);

	it("refuses voice files larger than their roles take before any request, in the API's words beside each", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			await openOwnVoices(page);
			const sent: string[] = [];
			page.on("request", (r) => {
				if (r.method() !== "GET") sent.push(`${r.method()} ${r.url()}`);
			});
			// Each file starts as its role takes (a real checkpoint, index, PNG and WAV), and is made one byte larger
			// than its role's limit as a sparse file: nothing that large is written or committed.
			const limits = { model: 200_000_000, index: 1_000_000_000, image: 10_000_000, sample: 50_000_000 };
			const heads = {
				model: await readFile(path.join(ROOT, "gpu-runner/test/rvc/fixtures/v2-f0-40k.pth")),
				index: await readFile(path.join(ROOT, "gpu-runner/test/rvc/fixtures/index/flat-l2.index")),
				image: demoVoiceImage(demoVoice as (typeof DEMO_VOICES)[number]),
				sample: demoVoiceSample(demoVoice as (typeof DEMO_VOICES)[number]),
			};
			const names = { model: "big.pth", index: "big.index", image: "big.png", sample: "big.wav" };
			await page.fill("#own-voice-name", "Too large");
			for (const role of ["model", "index", "image", "sample"] as const) {
				const file = path.join(tempDir, names[role]);
				await writeFile(file, heads[role]);
				await truncate(file, limits[role] + 1);
				await page.setInputFiles(`#own-voice-${role}`, file);
			}
			await page.click("#own-voice-create");
			await page.locator("#own-voice-sample-problem").waitFor();
			expect(sent).toEqual([]);

			// What the API answers a voice declaring these files, beside each file.
			const token = await stack.token(client);
			const answer = await fetch(`${stack.url}/api/v1/voices`, {
				method: "POST",
				headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
				body: JSON.stringify({
					name: "Too large",
					files: Object.fromEntries(
						Object.entries(limits).map(([role, limit]) => [
							role,
							{ file_name: names[role as keyof typeof names], size_bytes: limit + 1 },
						]),
					),
				}),
			});
			expect(answer.status).toBe(400);
			const refusal = (await answer.json()) as { message: string; errors: { field: string; message: string }[] };
			expect(refusal.errors.map((e) => e.field).sort()).toEqual(
				["image", "index", "model", "sample"].map((role) => `files.${role}.size_bytes`),
			);
			for (const { field, message } of refusal.errors) {
				const id = `own-voice-${field.split(".")[1]}`;
				expect(await page.textContent(`#${id}-problem`), id).toBe(message);
				expect(await page.getAttribute(`#${id}`, "aria-invalid"), id).toBe("true");
			}
			const error = (await page.textContent("#error")) ?? "";
			expect(error.startsWith(`${refusal.message} (big.pth is 200000001 bytes)`)).toBe(true);
			expect(error).toMatch(/Nothing was registered/);
			expect(await page.textContent("#own-voice-status")).toBe("");
			expect(await page.isEnabled("#own-voice-create")).toBe(true);
			expect(await page.locator("#own-voices li", { hasText: "Too large" }).count()).toBe(0);
			expect(sent).toEqual([]);
			expect(pageErrors).toEqual([]);
		});
	}, 60_000);

	it("shows a readable error for a wrong client secret", async () => {
		await withPlayground(async ({ page, pageErrors, consoleErrors, requests }) => {
			await page.fill("#client-secret", "not-the-secret");
			await page.click("#sign-in");
			await page.waitForFunction(() => document.getElementById("error")?.textContent);
			const message = String(await page.textContent("#error"));
			expect(message).toMatch(/client authentication failed/i);
			expect(message).not.toMatch(/\n\s+at |TypeError|undefined|\[object/);
			expect(await page.locator("#voices-step").isHidden()).toBe(true);
			expect(await page.textContent("#token-status")).toBe("");
			expect(pageErrors).toEqual([]);
			// The only console line is Chromium's own note about the refused token request.
			for (const line of consoleErrors) expect(line).toMatch(/401.*\/oauth2\/token/);
			expectOnlyStackOrigin(requests);
		});
	});

	it("uploads your own voice with a bar per file, follows its validation, and converts with it", async () => {
		await withPlayground(async ({ page, pageErrors, consoleErrors, requests }) => {
			await signInAndSelectVoice(page);
			await page.locator("#own-voices-step").waitFor();
			const fixtures = path.join(ROOT, "gpu-runner/test/rvc/fixtures");
			await page.fill("#own-voice-name", "Mine in the playground");
			await page.setInputFiles("#own-voice-model", path.join(fixtures, "v2-f0-40k.pth"));
			await page.setInputFiles("#own-voice-index", path.join(fixtures, "index/voice-v2-768.index"));
			const sample = path.join(tempDir, "my-sample.wav");
			await writeFile(sample, makeWav({ sampleRate: 16_000, channels: 1, frames: 32_000, encoding: "pcm", bits: 16 }));
			await page.setInputFiles("#own-voice-sample", sample);
			await page.click("#own-voice-create");
			await expectOwnVoiceReady(page, "Mine in the playground");
			for (const role of ["model", "index", "sample"]) {
				const bar = page.locator(`#own-voice-progress-${role}`);
				expect(await bar.evaluate((p: HTMLProgressElement) => p.value)).toBe(100);
			}
			const item = page.locator("#own-voices li", { hasText: "Mine in the playground" });
			expect(await item.locator(".voice-status").textContent()).toBe("ready");

			// "Use in a conversion" selects the voice's card; the conversion runs on the rvc engine at 40 kHz.
			await item.getByRole("button", { name: "Use in a conversion" }).click();
			const card = page.locator(".voice:has(input:checked)");
			expect(await card.textContent()).toContain("Mine in the playground");
			expect(await card.textContent()).toContain("yours");
			await page.selectOption("#pitch", "same_octave");
			await page.uncheck("#preview");
			await page.setInputFiles("#file", sample);
			await page.click("#convert");
			await waitForOutcome(page);
			expect(await page.textContent("#error"), runner.log().slice(-3000)).toBe("");
			await page.locator("#result-step").waitFor();
			expect(await page.textContent("#result-info")).toContain("2.00 s · 40000 Hz · 1 ch");

			// Delete asks again, in place; "Keep it" sends nothing and brings the button back.
			const deletes: string[] = [];
			page.on("request", (request) => {
				if (request.method() === "DELETE") deletes.push(request.url());
			});
			await item.getByRole("button", { name: "Delete", exact: true }).click();
			expect(await item.textContent()).toContain('Delete "Mine in the playground" for good?');
			await item.getByRole("button", { name: "Keep it" }).click();
			expect(await item.getByRole("button", { name: "Delete for good" }).count()).toBe(0);
			expect(deletes).toEqual([]);
			await item.getByRole("button", { name: "Delete", exact: true }).click();
			await item.getByRole("button", { name: "Delete for good" }).click();
			// The delete goes to the real Worker and the list is fetched again: more than the poll's default second
			// on a loaded machine.
			await expect
				.poll(() => page.locator("#own-voices li", { hasText: "Mine in the playground" }).count(), {
					timeout: 15_000,
				})
				.toBe(0);
			expect(pageErrors).toEqual([]);
			expect(consoleErrors).toEqual([]);
			expectOnlyStackOrigin(requests);
		});
	}, 120_000);

	it("creates a voice from its published .zip: the model and added_ index out of it, ready, converting", async () => {
		await withPlayground(async ({ page, pageErrors, consoleErrors, requests }) => {
			await signInAndSelectVoice(page);
			await page.locator("#own-voices-step").waitFor();
			const fixtures = path.join(ROOT, "gpu-runner/test/rvc/fixtures");
			await page.fill("#own-voice-name", "Zipped Aurora");
			await page.setInputFiles("#own-voice-model", path.join(fixtures, "archive/published-voice.zip"));
			// Picking it reads its directory: what it will use is said, and there is nothing to choose.
			await expect
				.poll(() => page.textContent("#own-voice-archive-contents"))
				.toBe(
					"published-voice.zip is a voice archive: model Aurora/Aurora.pth, index Aurora/added_IVF13_Flat_nprobe_1_Aurora_v2.index.",
				);
			expect(await page.isHidden("#own-voice-archive-model")).toBe(true);
			expect(await page.isHidden("#own-voice-archive-index")).toBe(true);
			const created = await createdFiles(page);
			const model = await readFile(path.join(fixtures, "v2-f0-40k.pth"));
			const index = await readFile(path.join(fixtures, "index/voice-v2-768.index"));
			expect(created).toEqual({
				model: { file_name: "Aurora.pth", size_bytes: model.length },
				index: { file_name: "added_IVF13_Flat_nprobe_1_Aurora_v2.index", size_bytes: index.length },
			});
			await expectOwnVoiceReady(page, "Zipped Aurora");
			expect(await page.textContent("#own-voice-archive-contents")).toMatch(
				/^From published-voice\.zip: model Aurora\/Aurora\.pth, index Aurora\/added_IVF13_Flat_nprobe_1_Aurora_v2\.index; left out Aurora\/ \(a folder\), Aurora\/trained_IVF4_Flat_nprobe_1_Aurora_v2\.index \(RVC's trained_ index, .*\), .*__MACOSX\/Aurora\/\._Aurora\.pth \(a hidden or macOS file\)\.$/,
			);
			for (const role of ["model", "index"]) {
				expect(await page.locator(`#own-voice-progress-${role}`).evaluate((p: HTMLProgressElement) => p.value)).toBe(
					100,
				);
			}
			// The runner checked exactly the fixture's bytes: the inflated entries went up whole.
			const item = page.locator("#own-voices li", { hasText: "Zipped Aurora" });
			const id = String(await item.getAttribute("data-voice-id"));
			const voice = await callApi<{ files: Record<string, { sha256: string }> }>(
				stack,
				await stack.token(client),
				`/api/v1/voices/${id}`,
			);
			const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");
			expect(voice.files.model?.sha256).toBe(sha256(model));
			expect(voice.files.index?.sha256).toBe(sha256(index));

			await item.getByRole("button", { name: "Use in a conversion" }).click();
			expect(await page.locator(".voice:has(input:checked)").textContent()).toContain("Zipped Aurora");
			await page.selectOption("#pitch", "same_octave");
			await page.uncheck("#preview");
			const source = path.join(tempDir, "zipped-source.wav");
			await writeFile(source, makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 }));
			await page.setInputFiles("#file", source);
			await page.click("#convert");
			await waitForOutcome(page);
			await expectCompleted(page);
			await page.locator("#result-step").waitFor();
			expect(await page.textContent("#result-info")).toContain("40000 Hz · 1 ch");

			await item.getByRole("button", { name: "Delete", exact: true }).click();
			await item.getByRole("button", { name: "Delete for good" }).click();
			await expect
				.poll(() => page.locator("#own-voices li", { hasText: "Zipped Aurora" }).count(), { timeout: 15_000 })
				.toBe(0);
			expect(pageErrors).toEqual([]);
			expect(consoleErrors).toEqual([]);
			expectOnlyStackOrigin(requests);
		});
	}, 120_000);

	it("asks which model of an archive holding several, and refuses an archive it cannot read before registering", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			const registered = await openOwnVoices(page);
			const fixtures = path.join(ROOT, "gpu-runner/test/rvc/fixtures");

			// A cut archive: refused when picked, and again when sent, with the reader's words; nothing registered.
			const cut = path.join(tempDir, "cut-voice.zip");
			await writeFile(cut, (await readFile(path.join(fixtures, "archive/published-voice.zip"))).subarray(0, 200_000));
			await page.fill("#own-voice-name", "Two of them");
			await page.setInputFiles("#own-voice-model", cut);
			const unreadable =
				"The archive cannot be read: no zip end of central directory record: the archive is truncated or not a zip";
			await expect.poll(() => page.textContent("#error")).toBe(unreadable);
			await page.click("#own-voice-create");
			await expect.poll(() => page.textContent("#own-voice-status")).toBe("");
			expect(await page.textContent("#error")).toBe(unreadable);

			// Two voices' models: the page offers both, keyboard-reachable under their label, and refuses to guess.
			await page.setInputFiles("#own-voice-model", path.join(fixtures, "archive/two-models.zip"));
			const choice = page.getByLabel("Model in the archive");
			await choice.waitFor();
			expect(await page.textContent("#error")).toBe("");
			expect(await choice.locator("option").allTextContents()).toEqual([
				"Choose one…",
				"VoiceA/VoiceA.pth",
				"VoiceB/VoiceB.pth",
			]);
			expect(await page.textContent("#own-voice-archive-contents")).toBe(
				"two-models.zip is a voice archive: several models (choose one above), no index.",
			);
			expect(await page.isHidden("#own-voice-archive-index")).toBe(true);
			await mkdir(path.dirname(SCREENSHOT), { recursive: true });
			await page
				.locator("#own-voices-step")
				.screenshot({ path: path.join(path.dirname(SCREENSHOT), "playground-archive-choice.png") });
			await page.click("#own-voice-create");
			await expect
				.poll(() => page.textContent("#error"))
				.toBe(
					"The archive holds several models (VoiceA/VoiceA.pth, VoiceB/VoiceB.pth): name the one to use\nChoose it in the list beside the file.",
				);
			expect(registered).toEqual([]);

			// The one chosen goes up, with the index picked beside the archive.
			await choice.selectOption("VoiceB/VoiceB.pth");
			await page.setInputFiles("#own-voice-index", path.join(fixtures, "index/voice-v2-768.index"));
			const created = await createdFiles(page);
			const model = await readFile(path.join(fixtures, "v2-f0-48k.pth"));
			const index = await readFile(path.join(fixtures, "index/voice-v2-768.index"));
			expect(created).toEqual({
				model: { file_name: "VoiceB.pth", size_bytes: model.length },
				index: { file_name: "voice-v2-768.index", size_bytes: index.length },
			});
			await expectOwnVoiceReady(page, "Two of them");
			expect(await page.textContent("#own-voice-archive-contents")).toBe(
				"From two-models.zip: model VoiceB/VoiceB.pth, index voice-v2-768.index (picked beside it); left out VoiceA/VoiceA.pth (another model).",
			);
			expect(pageErrors).toEqual([]);
		});
	}, 120_000);

	it("asks which index of an archive holding several, and takes none when told", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			await signInAndSelectVoice(page);
			// An archive as Info-ZIP makes it: a model and two added_ indexes (and the trained_ one, never offered).
			const fixtures = path.join(ROOT, "gpu-runner/test/rvc/fixtures");
			const folder = await mkdtemp(path.join(tempDir, "two-indexes-"));
			await mkdir(path.join(folder, "Voice"));
			await writeFile(path.join(folder, "Voice/Voice.pth"), await readFile(path.join(fixtures, "v2-f0-40k.pth")));
			const index = await readFile(path.join(fixtures, "index/voice-v2-768.index"));
			for (const name of ["added_IVF13_Flat_nprobe_1_a_v2", "added_IVF13_Flat_nprobe_1_b_v2", "trained_IVF4_a_v2"]) {
				await writeFile(path.join(folder, `Voice/${name}.index`), index);
			}
			execFileSync("zip", ["-q", "-r", "two-indexes.zip", "Voice"], { cwd: folder });
			await page.fill("#own-voice-name", "One of two indexes");
			await page.setInputFiles("#own-voice-model", path.join(folder, "two-indexes.zip"));
			const choice = page.getByLabel("Index in the archive");
			await choice.waitFor();
			expect(await page.isHidden("#own-voice-archive-model")).toBe(true);
			// In the archive's order (as zip found the files), between the prompt and "No index".
			const options = await choice.locator("option").allTextContents();
			expect([options[0], options.at(-1)]).toEqual(["Choose one…", "No index"]);
			expect(options.slice(1, -1).sort()).toEqual([
				"Voice/added_IVF13_Flat_nprobe_1_a_v2.index",
				"Voice/added_IVF13_Flat_nprobe_1_b_v2.index",
			]);
			expect(await page.textContent("#own-voice-archive-contents")).toBe(
				"two-indexes.zip is a voice archive: model Voice/Voice.pth, several indexes (choose one above).",
			);
			await choice.selectOption({ label: "No index" });
			const created = await createdFiles(page);
			expect(Object.keys(created)).toEqual(["model"]);
			await expectOwnVoiceReady(page, "One of two indexes");
			expect(await page.textContent("#own-voice-archive-contents")).toMatch(
				/^From two-indexes\.zip: model Voice\/Voice\.pth; left out /,
			);

			await page.fill("#own-voice-name", "The other index");
			await choice.selectOption("Voice/added_IVF13_Flat_nprobe_1_b_v2.index");
			const again = await createdFiles(page);
			expect(again.index).toEqual({
				file_name: "added_IVF13_Flat_nprobe_1_b_v2.index",
				size_bytes: index.length,
			});
			await expectOwnVoiceReady(page, "The other index");
			expect(pageErrors).toEqual([]);
		});
	}, 120_000);

	it("says so when the browser cannot inflate an archive's entries, and registers nothing", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			// A browser without DecompressionStream (Safari before 16.4, Firefox before 113).
			await page.evaluate(() => {
				(window as unknown as { DecompressionStream?: unknown }).DecompressionStream = undefined;
			});
			await signInAndSelectVoice(page);
			const registered: string[] = [];
			page.on("request", (r) => {
				if (r.url().endsWith("/api/v1/voices") && r.method() === "POST") registered.push(r.url());
			});
			await page.fill("#own-voice-name", "Old browser");
			await page.setInputFiles(
				"#own-voice-model",
				path.join(ROOT, "gpu-runner/test/rvc/fixtures/archive/published-voice.zip"),
			);
			await page.click("#own-voice-create");
			await expect
				.poll(() => page.textContent("#error"))
				.toBe(
					"This browser cannot inflate the archive's Aurora/Aurora.pth (it has no DecompressionStream for deflate-raw): use a current browser, or extract the archive and pick its files",
				);
			expect(registered).toEqual([]);
			expect(pageErrors).toEqual([]);
		});
	});

	it("sends a voice file again from fresh addresses when the connection drops during its upload", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			await signInAndSelectVoice(page);
			const fixtures = path.join(ROOT, "gpu-runner/test/rvc/fixtures");
			// The index's upload (in parts here: it is over VOICE_SINGLE_UPLOAD_BYTES) loses the network once.
			let puts = 0;
			await page.route("**/storage/v1/**", (route) =>
				route.request().method() === "PUT" && ++puts === 2 ? route.abort("internetdisconnected") : route.continue(),
			);
			const statuses: string[] = [];
			await page.exposeFunction("noteVoiceStatus", (text: string) => statuses.push(text));
			await page.evaluate(() => {
				const status = document.getElementById("own-voice-status") as HTMLElement;
				const note = (window as unknown as { noteVoiceStatus: (text: string) => void }).noteVoiceStatus;
				new MutationObserver(() => note(status.textContent ?? "")).observe(status, { childList: true, subtree: true });
			});
			const renewals: string[] = [];
			page.on("request", (r) => {
				if (r.url().endsWith("/upload-urls")) renewals.push(r.url());
			});
			await page.fill("#own-voice-name", "Through a dropped connection");
			await page.setInputFiles("#own-voice-model", path.join(fixtures, "v2-f0-40k.pth"));
			await page.setInputFiles("#own-voice-index", path.join(fixtures, "index/voice-v2-768.index"));
			const sample = path.join(tempDir, "dropped-sample.wav");
			await writeFile(sample, makeWav({ sampleRate: 16_000, channels: 1, frames: 16_000, encoding: "pcm", bits: 16 }));
			await page.setInputFiles("#own-voice-sample", sample);
			await page.click("#own-voice-create");
			await expectOwnVoiceReady(page, "Through a dropped connection");
			expect(statuses).toContain("Uploading the index: the connection dropped; trying again…");
			expect(renewals).toHaveLength(1);
			// The sample, after the index, went up through the fresh addresses (the first ones stopped working).
			expect(puts).toBe(4);
			const item = page.locator("#own-voices li", { hasText: "Through a dropped connection" });
			const voice = await callApi<{ files: Record<string, { upload_status: string }> }>(
				stack,
				await stack.token(client),
				`/api/v1/voices/${await item.getAttribute("data-voice-id")}`,
			);
			expect(Object.values(voice.files).map((file) => file.upload_status)).toEqual([
				"uploaded",
				"uploaded",
				"uploaded",
			]);
			expect(await page.textContent("#error")).toBe("");
			expect(pageErrors).toEqual([]);
		});
	}, 120_000);

	it("keeps the voice picked for conversion, and the conversion step, while your own voice is created", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			const card = await signInAndSelectVoice(page);
			await card.click();
			await page.locator("#convert-step").waitFor();
			await page.fill("#own-voice-name", "Made beside a conversion");
			await page.setInputFiles("#own-voice-model", path.join(ROOT, "gpu-runner/test/rvc/fixtures/v2-f0-40k.pth"));
			await page.click("#own-voice-create");
			await expectOwnVoiceReady(page, "Made beside a conversion");
			// The lists were fetched again (the new voice has its card), and the pick was kept through it.
			await page.locator(".voice", { hasText: "Made beside a conversion" }).waitFor();
			expect(await card.locator("input[type=radio]").isChecked()).toBe(true);
			expect(await page.isVisible("#convert-step")).toBe(true);
			expect(pageErrors).toEqual([]);
		});
	}, 120_000);

	it("follows a voice it finds being checked when it lists the voices, until it is ready, beside an upload", async () => {
		const { page, context, pageErrors } = await openPlayground();
		// The runner is held (SIGSTOP) while the voice goes up from another client, so the page, signing in, finds it
		// validating; let go, the runner checks it, and the page, still open, must show the outcome by itself.
		runner.process.kill("SIGSTOP");
		try {
			const sdk = new VoiceConversionClient({
				baseUrl: stack.url,
				clientId: client.clientId,
				clientSecret: client.clientSecret,
			});
			const model = await readFile(path.join(ROOT, "gpu-runner/test/rvc/fixtures/v2-f0-40k.pth"));
			const created = await sdk.voices.create({
				name: "Uploaded elsewhere",
				files: { model: { source: new Blob([model]), fileName: "elsewhere.pth" } },
			});
			expect((await sdk.voices.get(created.id)).status).toBe("validating");
			await signInAndSelectVoice(page);
			const item = page.locator(`#own-voices li[data-voice-id="${created.id}"]`);
			expect(await item.locator(".voice-status").textContent()).toBe("being checked by a runner");

			// Another voice uploaded from the page meanwhile: its status line is its own, not talked over.
			const statuses: string[] = [];
			await page.exposeFunction("noteVoiceStatus", (text: string) => statuses.push(text));
			await page.evaluate(() => {
				const status = document.getElementById("own-voice-status") as HTMLElement;
				const note = (window as unknown as { noteVoiceStatus: (text: string) => void }).noteVoiceStatus;
				new MutationObserver(() => note(status.textContent ?? "")).observe(status, { childList: true, subtree: true });
			});
			await page.fill("#own-voice-name", "Uploaded here");
			await page.setInputFiles("#own-voice-model", path.join(ROOT, "gpu-runner/test/rvc/fixtures/v2-f0-40k.pth"));
			await page.click("#own-voice-create");
			await expect.poll(() => statuses.includes('Voice "Uploaded here": being checked by a runner…')).toBe(true);
			await new Promise((resolve) => setTimeout(resolve, 2500)); // both followed, each looking every second
			runner.process.kill("SIGCONT");

			await expect
				.poll(() => statuses.filter((text) => text.endsWith("is ready: pick it above to convert with it.")).sort(), {
					timeout: 60_000,
				})
				.toEqual([
					'Voice "Uploaded elsewhere" is ready: pick it above to convert with it.',
					'Voice "Uploaded here" is ready: pick it above to convert with it.',
				]);
			expect(statuses.filter((text) => text.startsWith('Voice "Uploaded elsewhere":'))).toEqual([]);
			// An ended validation is said once, as how it ended: no "ready…" as if still under way before it.
			expect(statuses.filter((text) => text.endsWith("ready…"))).toEqual([]);
			expect(await item.locator(".voice-status").textContent()).toBe("ready");
			await page.locator(`.voice[data-voice-id="${created.id}"]`).waitFor();
			expect(await page.textContent("#error")).toBe("");
			expect(pageErrors).toEqual([]);
		} finally {
			runner.process.kill("SIGCONT");
			await context.close();
		}
	}, 120_000);

	it("shows why validation failed, in the API's words, beside the voice", async () => {
		await withPlayground(async ({ page, pageErrors }) => {
			await signInAndSelectVoice(page);
			await page.locator("#own-voices-step").waitFor();
			await page.fill("#own-voice-name", "Chinese HuBERT");
			// A real checkpoint (so the upload takes it) of a voice trained on an embedder the service does not run.
			await page.setInputFiles(
				"#own-voice-model",
				path.join(ROOT, "gpu-runner/test/rvc/fixtures/refused-embedder-chinese-hubert.pth"),
			);
			expect(await page.textContent("#own-voice-archive-contents")).toBe("");
			await page.click("#own-voice-create");
			await page.waitForFunction(
				() =>
					/is ready|failed/.test(document.getElementById("own-voice-status")?.textContent ?? "") ||
					document.getElementById("error")?.textContent,
				undefined,
				{ timeout: 60_000 },
			);
			const item = page.locator("#own-voices li", { hasText: "Chinese HuBERT" });
			const id = String(await item.getAttribute("data-voice-id"));
			const voice = await callApi<{ status: string; error_message: string }>(
				stack,
				await stack.token(client),
				`/api/v1/voices/${id}`,
			);
			expect(voice.status).toBe("failed");
			expect(voice.error_message).toMatch(/embedder/i);
			expect(await page.textContent("#error")).toBe("");
			expect(await page.textContent("#own-voice-status")).toBe(`Voice "Chinese HuBERT" failed: ${voice.error_message}`);
			expect(await item.locator(".voice-status").textContent()).toBe("failed");
			expect(await item.locator(".error").textContent()).toBe(voice.error_message);
			// A failed voice is not offered for conversion.
			expect(await page.locator(`.voice[data-voice-id="${id}"]`).count()).toBe(0);
			expect(pageErrors).toEqual([]);
		});
	}, 120_000);
});

describe("API reference page in headless Chromium", () => {
	it("fits a phone's screen: the operations above the reference, nothing wider than the screen", async () => {
		const context = await browser.newContext({ viewport: { width: 375, height: 667 }, isMobile: true });
		try {
			const page = await context.newPage();
			await page.goto(`${stack.url}/docs`);
			await page.locator("#POST-api-v1-voice-conversions").waitFor();
			const layout = await page.evaluate(() => {
				const root = document.documentElement;
				const nav = (document.getElementById("nav") as HTMLElement).getBoundingClientRect();
				const content = (document.getElementById("content") as HTMLElement).getBoundingClientRect();
				return { scroll: root.scrollWidth, client: root.clientWidth, navBottom: nav.bottom, contentTop: content.top };
			});
			expect(layout.scroll).toBe(layout.client);
			expect(layout.contentTop).toBeGreaterThanOrEqual(layout.navBottom);
		} finally {
			await context.close();
		}
	});

	it("shows each operation's request body, the token endpoint's form fields included", async () => {
		const context = await browser.newContext();
		try {
			const page = await context.newPage();
			const pageErrors: string[] = [];
			page.on("pageerror", (error) => pageErrors.push(String(error)));
			await page.goto(`${stack.url}/docs`);
			const token = page.locator("#POST-oauth2-token");
			await token.waitFor();
			const text = (await token.textContent()) ?? "";
			expect(text).toContain("application/x-www-form-urlencoded");
			for (const field of ["grant_type", "client_id", "client_secret", "scope"]) expect(text).toContain(field);
			expect(text).toContain("grant_type=client_credentials");
			const conversions = (await page.locator("#POST-api-v1-voice-conversions").textContent()) ?? "";
			expect(conversions).toContain("application/json");
			expect(conversions).toContain("voice_model_id");
			expect(pageErrors).toEqual([]);
		} finally {
			await context.close();
		}
	});

	it("has an icon the browser fetches from this origin, not a /favicon.ico that answers 404", async () => {
		const context = await browser.newContext();
		try {
			const page = await context.newPage();
			const answers = new Map<string, number>();
			page.on("response", (response) => answers.set(new URL(response.url()).pathname, response.status()));
			await page.goto(`${stack.url}/docs`);
			await page.locator("#POST-api-v1-voice-conversions").waitFor();
			const icon = await page.evaluate(async () => {
				const link = document.querySelector<HTMLLinkElement>('link[rel="icon"]');
				const response = await fetch(link?.href ?? "/favicon.ico");
				return {
					path: new URL(response.url).pathname,
					status: response.status,
					type: response.headers.get("content-type"),
				};
			});
			expect(icon).toEqual({
				path: "/playground/icon.svg",
				status: 200,
				type: expect.stringMatching(/^image\/svg\+xml/),
			});
			expect(answers.get("/favicon.ico")).toBeUndefined();
		} finally {
			await context.close();
		}
	});
});
