/** Sessions shared across jobs: reuse, eviction of idle ones beyond capacity, never of ones in use. */
import { describe, expect, it } from "vitest";
import { ModelCache } from "../../src/engines/rvc/models.ts";
import { NormalNoise } from "../../src/engines/rvc/random.ts";
import { SessionHost } from "../../src/engines/rvc/session-host.ts";
import { buildTinyContentVec, buildTinyRmvpe, buildTinySynthesizer, writeModels } from "./support/tiny-models.ts";

describe("model cache", () => {
	const shared = writeModels({
		contentvec: buildTinyContentVec(),
		rmvpe: buildTinyRmvpe({ pitchBin: 100 }),
	});
	const voice = (sampleRate: number) => ({
		contentvec: shared.get("contentvec") as string,
		rmvpe: shared.get("rmvpe") as string,
		synthesizer: writeModels({
			synthesizer: buildTinySynthesizer({ sampleRate }),
		}).get("synthesizer") as string,
	});

	it("shares ContentVec and RMVPE between voices and evicts idle sessions beyond capacity", async () => {
		const cache = new ModelCache({ provider: "cpu" }, 3);
		const first = voice(40000);
		const second = voice(48000);
		const a = await cache.acquire(first);
		const b = await cache.acquire(second);
		// Both voices in use: four sessions, over capacity, but none may go.
		expect(cache.size).toBe(4);
		expect(b.models.contentvec.model).toBe(a.models.contentvec.model);
		a.release();
		// The first voice's synthesizer is idle and least recently used: released.
		expect(cache.size).toBe(3);
		const again = await cache.acquire(second);
		expect(again.models.synthesizer.model).toBe(b.models.synthesizer.model);
		b.release();
		again.release();
		expect(cache.size).toBe(3);
		await cache.dispose();
		expect(cache.size).toBe(0);
	});

	it("takes ContentVec and RMVPE from a shared feature cache, once for every model thread, synthesizers from its own", async () => {
		const hostOf = new Map<ModelCache, SessionHost[]>();
		const counted = (hosts: SessionHost[]) => () => {
			const host = new SessionHost();
			hosts.push(host);
			return host;
		};
		const featureHosts: SessionHost[] = [];
		const features = new ModelCache({ provider: "cpu" }, 3, { newHost: counted(featureHosts) });
		const threads = [0, 1].map(() => {
			const hosts: SessionHost[] = [];
			const cache = new ModelCache({ provider: "cpu" }, 3, { newHost: counted(hosts), features });
			hostOf.set(cache, hosts);
			return cache;
		});
		const [one, two] = threads as [ModelCache, ModelCache];
		const paths = voice(40000);
		const a = await one.acquire(paths);
		const b = await two.acquire(paths);
		// One copy of each feature model, in the shared cache; a synthesizer in each thread's.
		expect(b.models.contentvec.model).toBe(a.models.contentvec.model);
		expect(b.models.rmvpe?.model).toBe(a.models.rmvpe?.model);
		expect(b.models.synthesizer.model).not.toBe(a.models.synthesizer.model);
		expect([features.size, one.size, two.size]).toEqual([2, 1, 1]);
		const audio = new Float32Array(16000).fill(0.1);
		const [x, y] = await Promise.all([a.models.contentvec.extract(audio), b.models.contentvec.extract(audio)]);
		expect(y.data).toEqual(x.data);
		expect(x.frames).toBe(49);
		// Released by each job, the shared sessions stay for the next (within capacity); a thread's dispose
		// leaves them to their own cache.
		a.release();
		b.release();
		await one.dispose();
		expect(features.size).toBe(2);
		const c = await two.acquire(paths);
		expect(c.models.contentvec.model).toBe(a.models.contentvec.model);
		c.release();
		await two.dispose();
		await features.dispose();
		expect(featureHosts).toHaveLength(1);
		expect([...hostOf.values()].map((hosts) => hosts.length)).toEqual([1, 1]);
	});

	it("lends a synthesizer it has loaded, held until given back, and never loads one to lend", async () => {
		const cache = new ModelCache({ provider: "cpu" }, 3);
		const first = voice(40000);
		const second = voice(48000);
		expect(cache.holdsSynthesizer(first.synthesizer)).toBe(false);
		expect(cache.lendSynthesizer(first.synthesizer)).toBeUndefined();
		expect(cache.size).toBe(0);
		const a = await cache.acquire(first);
		a.release();
		expect(cache.holdsSynthesizer(first.synthesizer)).toBe(true);
		const lent = cache.lendSynthesizer(first.synthesizer);
		expect(lent?.synthesizer.model).toBe(a.models.synthesizer.model);
		// Lent, it is in use: another voice over capacity evicts an idle feature model, not the lent synthesizer.
		const b = await cache.acquire(second);
		b.release();
		expect(cache.holdsSynthesizer(first.synthesizer)).toBe(true);
		lent?.release();
		lent?.release(); // once only
		const c = await cache.acquire(second);
		c.release();
		expect(cache.holdsSynthesizer(first.synthesizer)).toBe(false);
		expect(cache.size).toBe(3);
		await cache.dispose();
		expect(cache.lendSynthesizer(second.synthesizer)).toBeUndefined();
	});

	it("keeps at most maxSynthesizers synthesizers, releasing an idle one before the next loads, never one in use", async () => {
		const events: string[] = [];
		const names = new Map<string, string>();
		const newHost = () => {
			const host = new SessionHost();
			const create = host.create.bind(host);
			host.create = async (source, options) => {
				const name = names.get(String(source)) ?? "feature model";
				events.push(`load ${name}`);
				const session = await create(source, options);
				return {
					...session,
					release: async () => {
						events.push(`release ${name}`);
						await session.release();
					},
				};
			};
			return host;
		};
		const cache = new ModelCache({ provider: "cpu" }, 6, { newHost, maxSynthesizers: 1 });
		const [a, b, c] = [40000, 48000, 32000].map(voice) as [
			ReturnType<typeof voice>,
			ReturnType<typeof voice>,
			ReturnType<typeof voice>,
		];
		names.set(a.synthesizer, "A").set(b.synthesizer, "B").set(c.synthesizer, "C");
		(await cache.acquire(a)).release();
		expect(cache.holdsSynthesizer(a.synthesizer)).toBe(true);
		// Another voice: A, idle, goes before B loads, so the two are never in memory together.
		const withB = await cache.acquire(b);
		expect(events.slice(events.indexOf("load A") + 1)).toEqual(["release A", "load B"]);
		expect([cache.holdsSynthesizer(a.synthesizer), cache.size]).toEqual([false, 3]);
		// B in use stays while C loads beside it; once B is idle it goes, as the one beyond the limit.
		const withC = await cache.acquire(c);
		expect(cache.size).toBe(4);
		withB.release();
		expect([cache.holdsSynthesizer(b.synthesizer), cache.holdsSynthesizer(c.synthesizer), cache.size]).toEqual([
			false,
			true,
			3,
		]);
		withC.release();
		await cache.dispose();
		expect(events.filter((e) => e === "load feature model")).toHaveLength(2);
	});

	it("loads a transient use's synthesizer beside the kept one, evicting nothing, and drops it after", async () => {
		const cache = new ModelCache({ provider: "cpu" }, 6, { maxSynthesizers: 1 });
		const kept = voice(40000);
		const validated = voice(48000);
		(await cache.acquire(kept)).release();
		const validation = await cache.acquire(validated, { transient: true });
		expect([cache.holdsSynthesizer(kept.synthesizer), cache.holdsSynthesizer(validated.synthesizer)]).toEqual([
			true,
			true,
		]);
		validation.release();
		expect([cache.holdsSynthesizer(kept.synthesizer), cache.holdsSynthesizer(validated.synthesizer)]).toEqual([
			true,
			false,
		]);
		// The feature models it shared with the kept voice stay.
		expect(cache.size).toBe(3);
		// Taken by a lasting use meanwhile, it is kept like any other (and the idle one beyond the limit goes).
		const again = await cache.acquire(validated, { transient: true });
		const job = await cache.acquire(validated);
		again.release();
		job.release();
		expect([cache.holdsSynthesizer(kept.synthesizer), cache.holdsSynthesizer(validated.synthesizer)]).toEqual([
			false,
			true,
		]);
		await cache.dispose();
	});

	it("forgets a model that failed to load, so a fixed file can be retried", async () => {
		const cache = new ModelCache({ provider: "cpu" }, 3);
		const broken = {
			...voice(40000),
			rmvpe: writeModels({ rmvpe: new Uint8Array([1, 2, 3]) }).get("rmvpe") as string,
		};
		await expect(cache.acquire(broken)).rejects.toMatchObject({
			code: "invalid_model",
		});
		expect(cache.size).toBe(2);
		await cache.dispose();
	});

	it("fails the runs of a model thread that stopped as retryable, and loads again on a new thread", async () => {
		const hosts: SessionHost[] = [];
		const cache = new ModelCache({ provider: "cpu" }, 3, {
			newHost: () => {
				const host = new SessionHost();
				hosts.push(host);
				return host;
			},
		});
		const paths = voice(40000);
		const first = await cache.acquire(paths);
		const audio = new Float32Array(16000).fill(0.1);
		expect((await first.models.contentvec.extract(audio)).frames).toBe(49);
		// The thread goes away under the job (as if it had crashed).
		await hosts[0]?.close();
		await expect(first.models.contentvec.extract(audio)).rejects.toMatchObject({
			code: "model_thread_stopped",
			permanent: false,
			message: expect.stringMatching(/running contentvec model: the model thread was closed/),
		});
		first.release();
		const again = await cache.acquire(paths);
		expect(hosts).toHaveLength(2);
		expect(again.models.contentvec.model).not.toBe(first.models.contentvec.model);
		expect((await again.models.contentvec.extract(audio)).frames).toBe(49);
		again.release();
		await cache.dispose();
		await expect(cache.acquire(paths)).rejects.toMatchObject({ code: "not_ready" });
	});
});

describe("synthesizer noise", () => {
	it("is standard normal, scaled, and reproducible from its seed", () => {
		const values = new NormalNoise(42).fill(200_000, 0.5);
		const mean = values.reduce((s, v) => s + v, 0) / values.length;
		const variance = values.reduce((s, v) => s + (v - mean) ** 2, 0) / values.length;
		expect(Math.abs(mean)).toBeLessThan(0.01);
		expect(Math.sqrt(variance)).toBeCloseTo(0.5, 2);
		// About 68.3% within one standard deviation.
		const within = values.filter((v) => Math.abs(v) < 0.5).length / values.length;
		expect(within).toBeCloseTo(0.683, 2);
		expect(new NormalNoise(42).fill(10, 1)).toEqual(new NormalNoise(42).fill(10, 1));
		expect(new NormalNoise(43).fill(10, 1)).not.toEqual(new NormalNoise(42).fill(10, 1));
	});
});
