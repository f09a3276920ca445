/**
 * The speaker count of an ONNX synthesizer, read from its graph (`onnx-speakers.ts`): the rows of the initializer a
 * `Gather` looks up by `ds`. On RVC's own kind of export (`torch.onnx.export`, fixtures/make-torch-onnx.py) and on
 * this runner's (`rvc export`), from the file in place and from bytes in memory, through `inspectModelFile`; and
 * nothing where the graph does not say it with certainty.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { inspectModelFile } from "../../src/engines/rvc/model-inspection.ts";
import { bytesSource, onnxFileSpeakers, onnxSpeakers } from "../../src/engines/rvc/onnx-speakers.ts";
import { readRvcCheckpoint } from "../../src/engines/rvc/rvc-checkpoint.ts";
import { buildSynthesizerGraph } from "../../src/engines/rvc/synthesizer-graph.ts";
import { scratchDir } from "../helpers/scratch.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
const TORCH_EXPORT = join(FIXTURES, "torch-export-3-speakers.onnx");

/** `rvc export` of a fixture checkpoint, written to a scratch file. */
function exported(checkpoint: string): string {
	const { bytes } = buildSynthesizerGraph(readRvcCheckpoint(readFileSync(join(FIXTURES, checkpoint))), {
		decodeSpan: true,
	});
	const path = join(scratchDir("onnx-speakers"), checkpoint.replace(/\.pth$/, ".onnx"));
	writeFileSync(path, bytes);
	return path;
}

describe("ONNX synthesizer speaker count", () => {
	it("reads the rows of the embedding looked up by ds, from the file and from its bytes", () => {
		expect(onnxFileSpeakers(TORCH_EXPORT)).toBe(3);
		expect(onnxSpeakers(bytesSource(readFileSync(TORCH_EXPORT)))).toBe(3);
		const three = exported("v2-f0-40k-3-speakers.pth");
		expect(onnxFileSpeakers(three)).toBe(3);
		expect(onnxSpeakers(bytesSource(readFileSync(three)))).toBe(3);
		expect(onnxFileSpeakers(exported("v2-f0-40k.pth"))).toBe(1);
	});

	it("says nothing where the graph does not say it with certainty", () => {
		// RVC's inputs, ds among them, but no lookup by it (make-hostile-onnx.py).
		expect(onnxFileSpeakers(join(FIXTURES, "hostile/loop-3m.onnx"))).toBeUndefined();
		// A file cut short: its graph cannot be read to the end.
		const whole = readFileSync(TORCH_EXPORT);
		const cut = join(scratchDir("onnx-speakers"), "cut.onnx");
		writeFileSync(cut, whole.subarray(0, Math.floor(whole.length / 2)));
		expect(onnxFileSpeakers(cut)).toBeUndefined();
		// The lookup's table under a name no initializer has (as if computed as the graph runs): nothing is read.
		const renamed = Buffer.from(whole);
		const at = renamed.indexOf("emb_g.weight");
		expect(at).toBeGreaterThan(0);
		renamed.write("emb_g.weigh_", at, "latin1");
		const path = join(scratchDir("onnx-speakers"), "renamed.onnx");
		writeFileSync(path, renamed);
		expect(onnxFileSpeakers(path)).toBeUndefined();
		// Not ONNX at all.
		expect(onnxFileSpeakers(join(FIXTURES, "v2-f0-40k.pth"))).toBeUndefined();
	});

	it("is among what inspecting the file reports", async () => {
		const facts = await inspectModelFile(TORCH_EXPORT);
		expect(facts).toMatchObject({ kind: "onnx", role: "synthesizer", f0: 1, feature_dim: 768, speakers: 3 });
		expect(await inspectModelFile(join(FIXTURES, "hostile/loop-3m.onnx"))).not.toHaveProperty("speakers");
	});
});
