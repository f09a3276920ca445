/**
 * Sessions on a model thread: the same outputs as onnxruntime in this thread, the main thread free while a
 * model runs, and clear failures for a bad run, a released session and a closed host.
 */
import * as ort from "onnxruntime-node";
import { afterAll, describe, expect, it } from "vitest";
import { OnnxGraphBuilder } from "../../src/engines/rvc/onnx-writer.ts";
import { SessionHost } from "../../src/engines/rvc/session-host.ts";
import { timerGapsDuring } from "../helpers/timer-gaps.ts";

const WIDTH = 512;

/**
 * y = tanh(x @ W) repeated `layers` times, plus the row count of `x` as int64 (so both element types cross):
 * x float32 [rows, WIDTH] -> y float32 [rows, WIDTH], count int64 [1].
 */
function matMulChain(layers: number): Uint8Array {
	const g = new OnnxGraphBuilder();
	const x = g.input("x", "float32", ["rows", WIDTH]);
	let h = x;
	const weight = Float32Array.from({ length: WIDTH * WIDTH }, (_, i) => Math.sin(i * 0.618) / Math.sqrt(WIDTH));
	const w = g.floats("w", [WIDTH, WIDTH], weight);
	for (let i = 0; i < layers; i++) h = g.node("Tanh", [g.node("MatMul", [h, w])]);
	g.node("Identity", [h], {}, ["y"]);
	g.node("Slice", [g.node("Shape", [x]), g.int64s("start", [0]), g.int64s("end", [1])], {}, ["count"]);
	g.output("y", "float32", ["rows", WIDTH]);
	g.output("count", "int64", [1]);
	return g.toModel();
}

const input = (rows: number) => Float32Array.from({ length: rows * WIDTH }, (_, i) => Math.cos(i * 0.01));
const feeds = (rows: number) => ({ x: new ort.Tensor("float32", input(rows), [rows, WIDTH]) });
const options: ort.InferenceSession.SessionOptions = { executionProviders: ["cpu"], intraOpNumThreads: 1 };

describe("session host", () => {
	const host = new SessionHost();
	afterAll(() => host.close());

	it("runs a model on its thread with the outputs onnxruntime gives in this one", async () => {
		const model = matMulChain(4);
		const local = await ort.InferenceSession.create(model, options);
		const remote = await host.create(model.slice(), options);
		expect(remote.inputNames).toEqual(local.inputNames);
		expect(remote.outputNames).toEqual(local.outputNames);
		expect(remote.inputMetadata).toEqual(local.inputMetadata.map((m) => ({ ...m })));
		const [there, here] = [await remote.run(feeds(3)), await local.run(feeds(3))];
		expect(there.y?.dims).toEqual([3, WIDTH]);
		expect(there.y?.data).toEqual(here.y?.data);
		expect(there.count?.type).toBe("int64");
		expect(there.count?.data).toEqual(BigInt64Array.of(3n));
		await remote.release();
		await local.release();
	});

	it("takes a model's bytes over rather than copying them, when they fill their own buffer", async () => {
		const whole = matMulChain(1);
		const session = await host.create(whole, options);
		expect(whole.byteLength).toBe(0);
		// A view into a larger buffer is copied, and stays usable here.
		const model = matMulChain(1);
		const inLarger = new Uint8Array(model.length + 16);
		inLarger.set(model, 8);
		const view = inLarger.subarray(8, 8 + model.length);
		const copied = await host.create(view, options);
		expect(Buffer.from(view).equals(Buffer.from(model))).toBe(true);
		expect((await copied.run(feeds(2))).y?.data).toEqual((await session.run(feeds(2))).y?.data);
		await Promise.all([session.release(), copied.release()]);
	});

	it("leaves the main thread free while a model runs", async () => {
		const session = await host.create(matMulChain(64), options);
		// Long enough to see: 1024 rows x 64 layers x 512 x 512 x 2 = 34 GFLOP, 0.2 s on a Zen 5 core with AVX-512
		// and about 0.6 s on an AVX2 one (a quarter of it took 49 ms on the former, too short for the check below).
		const { took, ticks, longestGap } = await timerGapsDuring(() => session.run(feeds(1024)));
		expect(took).toBeGreaterThan(50);
		// Run on this thread, the run would be one gap as long as itself.
		expect(ticks).toBeGreaterThan(5);
		expect(longestGap).toBeLessThan(took / 2);
		await session.release();
	});

	it("fails a bad run with onnxruntime's reason and keeps serving", async () => {
		const session = await host.create(matMulChain(1), options);
		const wrong = new ort.Tensor("float32", new Float32Array(7), [1, 7]);
		await expect(session.run({ x: wrong })).rejects.toThrow(/dimension|shape|Got invalid/i);
		expect((await session.run(feeds(1))).y?.dims).toEqual([1, WIDTH]);
		await session.release();
		await expect(session.run(feeds(1))).rejects.toThrow(/not open/);
		await expect(host.create(new Uint8Array([1, 2, 3]), options)).rejects.toThrow(/protobuf|parse|load/i);
	});

	it("on close, finishes the run in progress, fails what is queued and everything after", async () => {
		const own = new SessionHost();
		const session = await own.create(matMulChain(64), options);
		const expected = await session.run(feeds(256));
		const running = session.run(feeds(256));
		// Let the first run start on the thread before the second is queued behind it.
		await new Promise((resolve) => setTimeout(resolve, 20));
		const queued = expect(session.run(feeds(256))).rejects.toThrow(/model thread was closed/);
		const closed = own.close();
		// Closing twice is one close.
		expect(own.close()).toBe(closed);
		await expect(session.run(feeds(1))).rejects.toThrow(/model thread was closed/);
		await closed;
		// A native run cannot be interrupted (ending the thread under it would abort the process): it finishes.
		expect((await running).y?.data).toEqual(expected.y?.data);
		await queued;
		await expect(session.run(feeds(1))).rejects.toThrow(/model thread was closed/);
		await expect(own.create(matMulChain(1), options)).rejects.toThrow(/model thread was closed/);
	});
});
