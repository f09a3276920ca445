/**
 * The CLI as a user runs it (`node cli/main.ts ...`, what `npm run cli --` does) against the real local service
 * and a real runner: converting a generated MP3 end to end, the listing commands, webhooks, and the errors.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveConnection, UsageError } from "../../cli/config.ts";
import { verifyWebhook } from "../../sdk/index.ts";
import { runCli } from "../support/cli-process.ts";
import { type Credentials, type LocalStack, ROOT, startLocalStack } from "../support/local-stack.ts";
import { encodeMp3 } from "../support/mp3-generator.ts";
import { type RunnerProcess, startRunner } from "../support/runner-process.ts";
import { estimatePitchHz, readWav } from "../support/wav-reader.ts";
import { startReceiver } from "../support/webhook-receiver.ts";

let stack: LocalStack;
let runner: RunnerProcess;
let credentials: Credentials;
let workDir: string;
const receiver = startReceiver();
let receiverUrl: string;

/** Runs the CLI in `workDir` with the client's credentials in the environment (or `env` instead). */
const cli = (args: string[], env: Record<string, string | undefined> = {}) =>
	runCli(args, { url: stack.url, credentials, cwd: workDir }, env);

beforeAll(async () => {
	stack = await startLocalStack({ vars: { ALLOW_LOCAL_WEBHOOK_URLS: "true" } });
	credentials = await stack.provision("api");
	runner = startRunner(stack.url, await stack.provision("runner", credentials.accountId));
	await stack.addVoice({ name: "CLI Alto", tags: ["cli", "alto"], params: { formant_shift: 0 } });
	await stack.addVoice({ name: "CLI Baritone", tags: ["cli"], params: { formant_shift: 0 } });
	await stack.addVoice({
		name: "CLI Soprano",
		tags: ["cli"],
		params: { formant_shift: 0 },
		pitchRangeHz: { low: 330, high: 660 },
	});
	receiverUrl = `http://127.0.0.1:${await receiver.listen()}`;
	workDir = await mkdtemp(path.join(tmpdir(), "voice-cli-"));
}, 120_000);

afterAll(async () => {
	await runner?.stop();
	await receiver.close();
	await stack?.close();
	if (workDir) await rm(workDir, { recursive: true, force: true });
});

describe("CLI", () => {
	it("lists voices as a table and as JSON", async () => {
		const table = await cli(["voices"]);
		expect(table.code).toBe(0);
		expect(table.stdout).toMatch(/^NAME\s+ID\s+TAGS/);
		expect(table.stdout).toMatch(/CLI Alto\s+[0-9a-f-]{36}\s+cli, alto/);
		const json = await cli(["voices", "--json"]);
		expect(JSON.parse(json.stdout).map((v: { name: string }) => v.name)).toEqual(
			expect.arrayContaining(["CLI Alto", "CLI Baritone"]),
		);
	});

	it("converts an MP3 end to end with preview and a pitch shift, showing progress and status", async () => {
		const mp3 = encodeMp3({ sampleRate: 44_100, channels: 1, frames: 44_100 * 12, kbps: 128 });
		await writeFile(path.join(workDir, "input.mp3"), mp3);

		const run = await cli([
			"convert",
			"input.mp3",
			"--voice",
			"cli alto",
			"--pitch",
			"third_up",
			"--preview",
			"--out",
			"out.wav",
		]);
		expect(run.stderr).not.toMatch(/Error/);
		expect(run.code).toBe(0);
		// stderr is a pipe here, so progress and status come as plain lines rather than a redrawn bar.
		expect(run.stderr).toMatch(/Uploading 100% \(\d+(\.\d)? kB of \d+(\.\d)? kB\)/);
		expect(run.stderr).toMatch(/Conversion [0-9a-f-]{36}: CLI Alto, pitch third_up, preview/);
		expect(run.stderr).toMatch(/Status: (pending_preprocessing|queued|processing)/);
		expect(run.stderr).toMatch(/Completed after \d\d:\d\d/);
		expect(run.stdout).toMatch(/Saved out\.wav \(\d+(\.\d)? (kB|MB)\)/);

		const wav = readWav(new Uint8Array(await readFile(path.join(workDir, "out.wav"))));
		expect(Math.abs(wav.durationSeconds - 10)).toBeLessThan(0.1);
		const cents = 1200 * Math.log2(estimatePitchHz(wav.samples, wav.sampleRate) / (220 * 2 ** (4 / 12)));
		expect(Math.abs(cents)).toBeLessThan(25);
		expect((await readdir(workDir)).filter((f) => f.endsWith(".part"))).toEqual([]);

		const id = run.stderr.match(/Conversion ([0-9a-f-]{36})/)?.[1];
		const list = await cli(["conversions", "list", "--status", "completed", "--json"]);
		expect(JSON.parse(list.stdout).data.map((c: { id: string }) => c.id)).toContain(id);
		const show = await cli(["conversions", "show", String(id)]);
		expect(show.stdout).toMatch(/status\s+completed/);
		expect(show.stdout).toMatch(/pitch_shift\s+third_up/);
		const again = await cli(["conversions", "download", String(id), "--out", "again.wav"]);
		expect(again.code).toBe(0);
		expect(await readFile(path.join(workDir, "again.wav"))).toEqual(await readFile(path.join(workDir, "out.wav")));
	});

	it("converts with pitch auto and voice settings, and shows what was applied", async () => {
		const mp3 = encodeMp3({ sampleRate: 44_100, channels: 1, frames: 44_100 * 3, kbps: 128 });
		await writeFile(path.join(workDir, "auto.mp3"), mp3);
		const run = await cli([
			"convert",
			"auto.mp3",
			"--voice",
			"CLI Soprano",
			"--pitch",
			"auto",
			"--formant-shift=-1.5",
			"--out",
			"auto.wav",
		]);
		expect(run.stderr).not.toMatch(/Error/);
		expect(run.stderr).toMatch(/Conversion [0-9a-f-]{36}: CLI Soprano, pitch auto, formant_shift -1.5/);
		expect(run.code).toBe(0);
		// The 220 Hz source into a 330..660 Hz voice: an octave up lands nearest the range's centre.
		expect(run.stderr).toMatch(/Completed \(pitch auto: higher_octave\)/);
		const wav = readWav(new Uint8Array(await readFile(path.join(workDir, "auto.wav"))));
		const cents = 1200 * Math.log2(estimatePitchHz(wav.samples, wav.sampleRate) / 440);
		expect(Math.abs(cents)).toBeLessThan(25);
		const id = run.stderr.match(/Conversion ([0-9a-f-]{36})/)?.[1];
		const show = await cli(["conversions", "show", String(id)]);
		expect(show.stdout).toMatch(/pitch_shift\s+auto/);
		expect(show.stdout).toMatch(/pitch_shift_applied\s+higher_octave/);
		expect(show.stdout).toMatch(/voice_settings\s+\{"formant_shift":-1.5\}/);
	});

	it("refuses voice settings out of range or that the voice cannot honour, before uploading", async () => {
		await writeFile(
			path.join(workDir, "short.mp3"),
			encodeMp3({ sampleRate: 44_100, channels: 1, frames: 44_100, kbps: 128 }),
		);
		const notANumber = await cli(["convert", "short.mp3", "--voice", "CLI Alto", "--index-rate", "high"]);
		expect(notANumber).toMatchObject({ code: 2, stderr: '--index-rate must be a number, got "high"\n' });
		const outOfRange = await cli(["convert", "short.mp3", "--voice", "CLI Alto", "--protect", "0.9"]);
		expect(outOfRange.code).toBe(2);
		expect(outOfRange.stderr).toMatch(/voice_settings.protect/);
		const unsupported = await cli(["convert", "short.mp3", "--voice", "CLI Alto", "--index-rate", "0.5"]);
		expect(unsupported.code).toBe(2);
		expect(unsupported.stderr).toMatch(
			/voice_settings.index_rate.*honours only formant_shift.*unsupported_voice_setting/,
		);
		const noRange = await cli(["convert", "short.mp3", "--voice", "CLI Alto", "--pitch", "auto"]);
		expect(noRange.code).toBe(2);
		expect(noRange.stderr).toMatch(/auto needs the voice's pitch range/);
	});

	it("creates, lists, tests and reads the deliveries of a webhook subscription", async () => {
		const created = await cli([
			"webhooks",
			"create",
			"--url",
			`${receiverUrl}/cli`,
			"--events",
			"conversion_completed",
			"--json",
		]);
		expect(created.code).toBe(0);
		const subscription = JSON.parse(created.stdout) as { id: string; secret: string };
		expect(subscription.secret).toBeTruthy();
		const human = await cli(["webhooks", "create", "--url", `${receiverUrl}/cli-2`]);
		expect(human.stdout).toMatch(/Signing secret: \S+/);
		expect(human.stdout).toMatch(/not shown again/);

		const list = await cli(["webhooks", "list"]);
		expect(list.stdout).toContain(subscription.id);
		expect(list.stdout).toMatch(/ACTIVE\s+FAILURES\s+EVENTS\s+URL/);

		const test = await cli(["webhooks", "test", subscription.id]);
		expect(test.code).toBe(0);
		await receiver.waitFor("/cli", 1);
		const delivery = receiver.received.find((r) => r.path === "/cli");
		expect(
			await verifyWebhook({
				secret: subscription.secret,
				headers: delivery?.headers ?? {},
				body: String(delivery?.body),
			}),
		).toMatchObject({ ok: true });
		expect(test.stdout).toContain(JSON.parse(String(delivery?.body)).id);

		const deliveries = await cli(["webhooks", "deliveries", subscription.id, "--limit", "5"]);
		expect(deliveries.code).toBe(0);
		expect(deliveries.stdout).toBe("No deliveries yet.\n"); // test deliveries are not logged (spec section 4)
		const deleted = await cli(["webhooks", "delete", subscription.id]);
		expect(deleted.code).toBe(0);
	});

	it("explains what is wrong and exits non-zero", async () => {
		const unknownVoice = await cli(["convert", "input.mp3", "--voice", "Nobody"]);
		expect(unknownVoice.code).toBe(2);
		expect(unknownVoice.stderr).toMatch(/No voice named "Nobody". Available: .*"CLI Alto"/);

		const ambiguous = await cli(["convert", "input.mp3", "--voice", "CLI"]);
		expect(ambiguous.stderr).toMatch(/matches several voices/);

		const badPitch = await cli(["convert", "input.mp3", "--voice", "CLI Alto", "--pitch", "up"]);
		expect(badPitch.code).toBe(2);
		expect(badPitch.stderr).toMatch(/--pitch must be one of: same_octave, third_down/);

		const missing = await cli(["convert", "nope.wav", "--voice", "CLI Alto"]);
		expect(missing).toMatchObject({ code: 2, stderr: "No such file: nope.wav\n" });

		const unknownOption = await cli(["voices", "--colour"]);
		expect(unknownOption.code).toBe(2);
		expect(unknownOption.stderr).toMatch(/--colour/);

		const wrongSecret = await cli(["voices"], { VOICE_API_CLIENT_SECRET: "not-the-secret" });
		expect(wrongSecret.code).toBe(1);
		expect(wrongSecret.stderr).toMatch(/HTTP 401, invalid_client/);
		expect(wrongSecret.stderr).toMatch(/Check the client id, secret and base URL/);

		const notFound = await cli(["conversions", "show", crypto.randomUUID()]);
		expect(notFound.code).toBe(1);
		expect(notFound.stderr).toMatch(/HTTP 404, not_found/);

		const help = await cli(["--help"]);
		expect(help.code).toBe(0);
		expect(help.stdout).toMatch(/convert <file> --voice NAME/);
	});

	it("keeps its token between runs, owner-only and without the secret, and fetches another when it is refused", async () => {
		// A token endpoint and a voices route that count what they are asked; `refuse` answers 401 to one token.
		let tokenRequests = 0;
		let refuse: string | undefined;
		const server = createServer((request, response) => {
			response.setHeader("Content-Type", "application/json");
			if (request.url === "/oauth2/token") {
				tokenRequests++;
				response.end(JSON.stringify({ access_token: `t${tokenRequests}`, expires_in: 3600, token_type: "Bearer" }));
			} else if (request.headers.authorization === `Bearer ${refuse}`) {
				response.writeHead(401);
				response.end(JSON.stringify({ success: false, code: "unauthorized", message: "Invalid or expired token" }));
			} else {
				response.end(JSON.stringify({ success: true, data: [] }));
			}
		});
		await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
		const cacheHome = mkdtempSync(path.join(tmpdir(), "vc-cli-tokens-"));
		try {
			const { port } = server.address() as { port: number };
			const run = (env: Record<string, string> = {}) =>
				runCli(["voices"], { url: `http://127.0.0.1:${port}`, credentials }, { XDG_CACHE_HOME: cacheHome, ...env });
			for (let i = 0; i < 3; i++) expect((await run()).code).toBe(0);
			expect(tokenRequests).toBe(1);
			const file = path.join(cacheHome, "voice-conversion-cli", "tokens.json");
			expect(statSync(file).mode & 0o777).toBe(0o600);
			const kept = readFileSync(file, "utf8");
			expect(kept).toContain("t1");
			expect(kept).not.toContain(credentials.clientSecret);

			// Another secret for the same client is not given the token the first one got.
			expect((await run({ VOICE_API_CLIENT_SECRET: "another-secret" })).code).toBe(0);
			expect(tokenRequests).toBe(2);
			// Refused (a rotated signing key): the next token is fetched and kept instead.
			refuse = "t1";
			expect((await run()).code).toBe(0);
			expect(tokenRequests).toBe(3);
			expect((await run()).code).toBe(0);
			expect(tokenRequests).toBe(3);
			// Turned off: a token a run.
			expect((await run({ VOICE_API_TOKEN_CACHE: "off" })).code).toBe(0);
			expect(tokenRequests).toBe(4);
		} finally {
			server.close();
			rmSync(cacheHome, { recursive: true, force: true });
		}
	});

	it("says why it pauses when the service asks it to wait (429 past a request budget), then carries on", async () => {
		// A server answering as the service does past its API budget, once: the CLI's reaction is what is under test.
		let voiceCalls = 0;
		const server = createServer((request, response) => {
			response.setHeader("Content-Type", "application/json");
			if (request.url === "/oauth2/token") {
				response.end(JSON.stringify({ access_token: "t", expires_in: 3600, token_type: "Bearer" }));
			} else if (voiceCalls++ === 0) {
				response.writeHead(429, { "Retry-After": "1" });
				response.end(
					JSON.stringify({
						success: false,
						code: "rate_limited",
						message: "Too many API requests by this account: retry after 1 seconds (the Retry-After header)",
					}),
				);
			} else {
				response.end(JSON.stringify({ success: true, data: [] }));
			}
		});
		await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
		try {
			const { port } = server.address() as { port: number };
			const run = await runCli(["voices"], { url: `http://127.0.0.1:${port}`, credentials });
			expect(run.code, run.stderr).toBe(0);
			expect(run.stderr).toMatch(
				/Too many API requests by this account: retry after 1 seconds \(the Retry-After header\); retrying in [12] s/,
			);
			expect(voiceCalls).toBe(2);
		} finally {
			server.close();
		}
	});

	it("takes credentials from flags, then the environment, then the local demo client", () => {
		const none = path.join(ROOT, "no-such-demo-credentials.json");
		expect(() => resolveConnection({}, {}, none)).toThrow(UsageError);
		expect(() => resolveConnection({ "client-id": "a" }, {}, none)).toThrow(/Both a client id and a client secret/);
		const env = { VOICE_API_URL: "https://env.example", VOICE_API_CLIENT_ID: "env-id", VOICE_API_CLIENT_SECRET: "s" };
		expect(resolveConnection({}, env, none)).toMatchObject({ baseUrl: "https://env.example", source: "environment" });
		expect(
			resolveConnection(
				{ "client-id": "flag-id", "client-secret": "f", "base-url": "https://flag.example" },
				env,
				none,
			),
		).toMatchObject({ clientId: "flag-id", baseUrl: "https://flag.example", source: "flags" });
		expect(existsSync(none)).toBe(false);
	});

	it("connects the local demo client to the address saved with it, 127.0.0.1:8787 for a file without one", async () => {
		const demo = { client_id: "demo-id", client_secret: "demo-secret" };
		const saved = path.join(workDir, "demo-credentials.json");
		await writeFile(saved, JSON.stringify({ ...demo, base_url: "http://127.0.0.1:8941" }));
		expect(resolveConnection({}, {}, saved)).toMatchObject({
			baseUrl: "http://127.0.0.1:8941",
			clientId: "demo-id",
			clientSecret: "demo-secret",
			source: "local demo",
		});
		expect(resolveConnection({}, { VOICE_API_URL: "http://127.0.0.1:9000" }, saved).baseUrl).toBe(
			"http://127.0.0.1:9000",
		);
		const older = path.join(workDir, "older-demo-credentials.json");
		await writeFile(older, JSON.stringify(demo));
		expect(resolveConnection({}, {}, older).baseUrl).toBe("http://127.0.0.1:8787");
	});

	it("lists each voice a name matches, with its id and owner, and says to pass the id", async () => {
		await writeFile(
			path.join(workDir, "tenor.mp3"),
			encodeMp3({ sampleRate: 44_100, channels: 1, frames: 44_100, kbps: 128 }),
		);
		const service = await stack.addVoice({ name: "CLI Tenor", tags: ["cli"], params: { formant_shift: 0 } });
		// An account's voice may have a service voice's name.
		const own = await stack.addVoice({ name: "CLI Tenor (own)", tags: ["cli"], params: { formant_shift: 0 } });
		await stack.admin.execute([
			`UPDATE voices SET account_id = '${credentials.accountId}', name = 'CLI Tenor' WHERE id = '${own}'`,
		]);

		const ambiguous = await cli(["convert", "tenor.mp3", "--voice", "cli tenor"]);
		expect(ambiguous.code).toBe(2);
		expect(ambiguous.stderr).toMatch(/^"cli tenor" matches several voices:\n/);
		expect(ambiguous.stderr).toMatch(new RegExp(`^ +CLI Tenor +${service} +service$`, "m"));
		expect(ambiguous.stderr).toMatch(new RegExp(`^ +CLI Tenor +${own} +account$`, "m"));
		expect(ambiguous.stderr).toMatch(/Pass the voice's id instead, e\.g\. --voice [0-9a-f-]{36}\n$/);

		const byId = await cli(["convert", "tenor.mp3", "--voice", own, "--no-wait", "--json"]);
		expect(byId.code).toBe(0);
		expect(JSON.parse(byId.stdout)).toMatchObject({ voice_model_id: own });
	});

	it("refuses a voice that is not ready before uploading the source", async () => {
		await writeFile(
			path.join(workDir, "early.mp3"),
			encodeMp3({ sampleRate: 44_100, channels: 1, frames: 44_100, kbps: 128 }),
		);
		const voice = await stack.addVoice({ name: "CLI Mine", tags: ["cli"], params: { formant_shift: 0 } });
		const files = async () =>
			(
				await stack.admin.query<{ n: number }>(
					`SELECT count(*) AS n FROM audio_files WHERE account_id = '${credentials.accountId}'`,
				)
			)[0]?.n;
		for (const status of ["validating", "failed"]) {
			await stack.admin.execute([
				`UPDATE voices SET account_id = '${credentials.accountId}', status = '${status}' WHERE id = '${voice}'`,
			]);
			const before = await files();
			const run = await cli(["convert", "early.mp3", "--voice", voice]);
			expect(run.code, status).toBe(2);
			expect(run.stderr).toMatch(new RegExp(`^Voice "CLI Mine" \\(${voice}\\) is ${status}, not ready: `));
			expect(await files(), status).toBe(before);
		}
	});

	it("finds a voice by its name in another Unicode normalisation form, and by its id in capitals", async () => {
		await writeFile(
			path.join(workDir, "celine.mp3"),
			encodeMp3({ sampleRate: 44_100, channels: 1, frames: 44_100, kbps: 128 }),
		);
		// Stored decomposed ("e" and a combining acute accent), as a name taken from a macOS file name is.
		const voice = await stack.addVoice({ name: "CLI Ce\u0301line", tags: ["cli"], params: { formant_shift: 0 } });
		for (const wanted of ["CLI C\u00e9line", "cli c\u00e9l", voice.toUpperCase()]) {
			const run = await cli(["convert", "celine.mp3", "--voice", wanted, "--no-wait", "--json"]);
			expect(run.stderr, wanted).not.toMatch(/No voice named/);
			expect(run.code, wanted).toBe(0);
			expect(JSON.parse(run.stdout)).toMatchObject({ voice_model_id: voice });
		}
	});
});
