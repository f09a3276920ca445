/** The ContentVec and RMVPE layouts the engine loads, and the admin's base-model check reads, from metadata alone. */
import { describe, expect, it } from "vitest";
import { contentVecLayoutProblem, rmvpeLayoutProblem } from "../../src/engines/rvc/feature-model-layout.ts";

const tensor = (name: string, shape: (number | string)[], type = "float32") => ({ name, type, shape });

describe("feature model layouts", () => {
	it("takes ContentVec as RVC exports it, with or without the channel axis, and symbolic sizes", () => {
		const out = [tensor("feats", [1, "frames", 768])];
		expect(contentVecLayoutProblem([tensor("source", [1, 1, "samples"])], out)).toBeUndefined();
		expect(contentVecLayoutProblem([tensor("source", [1, "samples"])], out)).toBeUndefined();
		expect(contentVecLayoutProblem([tensor("source", [])], [tensor("feats", [])])).toBeUndefined();
	});

	it("says what is wrong with a model that is not ContentVec", () => {
		const out = [tensor("feats", [1, "frames", 768])];
		expect(contentVecLayoutProblem([], out)).toBe("expected one audio input and a features output, found inputs []");
		expect(contentVecLayoutProblem([tensor("a", [1, 1, 1, 9])], out)).toBe(
			'input "a" has shape [1, 1, 1, 9], expected [1, 1, samples] or [1, samples]',
		);
		expect(contentVecLayoutProblem([tensor("a", [1, 9], "int64")], out)).toBe('input "a" is int64, expected float32');
		expect(contentVecLayoutProblem([{ name: "a" }], out)).toBe('input "a" is not a tensor');
		expect(contentVecLayoutProblem([tensor("a", [1, 9])], [tensor("f", [9, 768])])).toBe(
			'output "f" has shape [9, 768], expected rank 3',
		);
	});

	it("takes RMVPE's 128-band log-mel and 360 bins, and refuses other widths", () => {
		expect(rmvpeLayoutProblem([tensor("mel", [1, 128, "n"])], [tensor("hidden", [1, "n", 360])])).toBeUndefined();
		expect(rmvpeLayoutProblem([tensor("mel", [1, 64, "n"])], [tensor("hidden", [1, "n", 360])])).toBe(
			'input "mel" has shape [1, 64, n], expected [1, 128, frames]',
		);
		expect(rmvpeLayoutProblem([tensor("mel", [1, 128, "n"])], [tensor("hidden", [1, "n", 768])])).toBe(
			'output "hidden" has shape [1, n, 768], expected [1, frames, 360]',
		);
	});
});
