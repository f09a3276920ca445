/** Load-time int8 quantisation of constant-weight matrix products, run by onnxruntime against the float model. */
import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import { sessionOptionsFor } from "../../src/engines/rvc/execution-provider.ts";
import { quantizeMatMuls } from "../../src/engines/rvc/int8-matmul.ts";
import { OnnxGraphBuilder } from "../../src/engines/rvc/onnx-writer.ts";
import { pseudoRandom } from "./support/tiny-models.ts";

/** x [1, frames, 64] -> MatMul(64x96) -> Relu -> MatMul(96x32), plus a small MatMul and a dynamic one left alone. */
function model(): Uint8Array {
	const g = new OnnxGraphBuilder();
	const x = g.input("x", "float32", [1, "frames", 64]);
	const hidden = g.node("Relu", [g.node("MatMul", [x, g.floats("w1", [64, 96], pseudoRandom(64 * 96, 1, 0.2))])]);
	const y = g.node("MatMul", [hidden, g.floats("w2", [96, 32], pseudoRandom(96 * 32, 2, 0.2))]);
	const small = g.node("MatMul", [y, g.floats("w3", [32, 4], pseudoRandom(32 * 4, 3, 0.2))]);
	const gram = g.node("MatMul", [small, g.node("Transpose", [small], { perm: [0, 2, 1] })]);
	g.node("Identity", [gram], {}, ["y"]);
	g.output("y", "float32", [1, "frames", "frames"]);
	return g.toModel();
}

async function run(bytes: Uint8Array, input: Float32Array, frames: number): Promise<Float32Array> {
	const session = await ort.InferenceSession.create(bytes, sessionOptionsFor("cpu"));
	try {
		const result = await session.run({ x: new ort.Tensor("float32", input, [1, frames, 64]) });
		return result.y?.data as Float32Array;
	} finally {
		await session.release();
	}
}

describe("int8 matrix products", () => {
	it("replaces constant-weight MatMuls of at least the minimum size and stays close to the float model", async () => {
		const float = model();
		const quantized = quantizeMatMuls(float, 1024);
		expect(quantized.matMuls).toBe(2);
		expect(quantized.parameters).toBe(64 * 96 + 96 * 32);
		// Weights now take a byte each instead of four.
		expect(float.length - quantized.model.length).toBeGreaterThan(3 * quantized.parameters - 4096);

		const frames = 50;
		const input = pseudoRandom(frames * 64, 7, 1);
		const expected = await run(float, input, frames);
		const actual = await run(quantized.model, input, frames);
		expect(actual.length).toBe(expected.length);
		let signal = 0;
		let error = 0;
		for (let i = 0; i < expected.length; i++) {
			signal += (expected[i] as number) ** 2;
			error += ((expected[i] as number) - (actual[i] as number)) ** 2;
		}
		const snr = 10 * Math.log10(signal / error);
		expect(snr).toBeGreaterThan(25);
		expect(snr).toBeLessThan(200);
	});

	it("leaves a model without such products as it was, apart from the operator set", () => {
		const g = new OnnxGraphBuilder();
		const x = g.input("x", "float32", [1, 4]);
		g.node("Relu", [x], {}, ["y"]);
		g.output("y", "float32", [1, 4]);
		const result = quantizeMatMuls(g.toModel());
		expect(result.matMuls).toBe(0);
	});
});
