/**
 * The one protobuf reader under the runner's ONNX readers (`onnx-protobuf.ts`): strict on what is not protobuf
 * (a runaway varint, a length past its message, a number it cannot read exactly), the same fields from memory and
 * from a file read through its window, and `int8-matmul.ts` refusing a hostile model rather than mis-walking it.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { quantizeMatMuls } from "../../src/engines/rvc/int8-matmul.ts";
import {
	bytesSource,
	fields,
	int64Of,
	readVarint,
	UnreadableProtobuf,
	withFileSource,
} from "../../src/engines/rvc/onnx-protobuf.ts";
import { OnnxGraphBuilder } from "../../src/engines/rvc/onnx-writer.ts";
import { scratchDir } from "../helpers/scratch.ts";
import { pseudoRandom } from "./support/tiny-models.ts";

const varintOf = (...bytes: number[]) => readVarint(bytesSource(Uint8Array.from(bytes)), 0);
const run = (byte: number, count: number): number[] => new Array<number>(count).fill(byte);
/** The varint encoding of a non-negative bigint (64 bits at most). */
function encode(value: bigint): number[] {
	const out: number[] = [];
	do {
		const low = Number(value & 0x7fn);
		value >>= 7n;
		out.push(value > 0n ? low | 0x80 : low);
	} while (value > 0n);
	return out;
}

describe("protobuf wire format", () => {
	it("reads varints exactly, up to 2^53 - 1, and int64s with their sign", () => {
		expect(varintOf(0x96, 0x01)).toEqual([150, 2]);
		expect(varintOf(...encode(2n ** 53n - 1n))).toEqual([2 ** 53 - 1, 8]);
		// Field 3, varint: -1 as protobuf writes an int64 (10 bytes, two's complement), and -(2^53 - 1).
		const negatives = Uint8Array.from([0x18, ...encode(2n ** 64n - 1n), 0x18, ...encode(2n ** 64n - (2n ** 53n - 1n))]);
		const source = bytesSource(negatives);
		expect([...fields(source)].map((f) => int64Of(source, f))).toEqual([-1, -(2 ** 53 - 1)]);
	});

	it("refuses a varint that never ends, rather than reading NaN or a shorter message", () => {
		expect(() => varintOf(...run(0xff, 11), 0x01)).toThrow("a protobuf varint is longer than 10 bytes");
		expect(() => varintOf(...run(0xff, 200), 0x00)).toThrow("a protobuf varint is longer than 10 bytes");
		// As a field's length: the walk fails, it does not end early.
		const message = Uint8Array.from([0x08, 0x01, 0x12, ...run(0xff, 200), 0x00, 0x08, 0x02]);
		expect(() => [...fields(bytesSource(message))]).toThrow(UnreadableProtobuf);
	});

	it("refuses a length or a varint that runs past the end of its message", () => {
		// Field 2, length 5, with 2 bytes after it.
		expect(() => [...fields(bytesSource(Uint8Array.from([0x12, 0x05, 0x61, 0x62])))]).toThrow(
			"a protobuf field runs past the end of its message",
		);
		// A varint cut at the end of the bytes, and one that runs past the end of its (inner) message.
		expect(() => varintOf(0x96)).toThrow("a protobuf varint runs past the end of its message");
		const outer = bytesSource(Uint8Array.from([0x08, 0x96, 0x01]));
		expect(() => [...fields(outer, 0, 2)]).toThrow("a protobuf varint runs past the end of its message");
		expect([...fields(outer, 0, 3)]).toEqual([{ field: 1, wire: 0, start: 1, end: 3 }]);
	});

	it("refuses a number past 2^53, which it could not read exactly", () => {
		expect(() => varintOf(...encode(2n ** 53n))).toThrow("a protobuf number is past 2^53");
		expect(() => varintOf(...encode(2n ** 63n - 1n))).toThrow("a protobuf number is past 2^53");
		const big = bytesSource(Uint8Array.from([0x18, ...encode(2n ** 60n)]));
		const [field] = [...fields(big)];
		if (field === undefined) throw new Error("no field");
		expect(() => int64Of(big, field)).toThrow("a protobuf number is past 2^53");
		// A length past 2^53 is refused as such, not taken for a shorter one.
		expect(() => [...fields(bytesSource(Uint8Array.from([0x12, ...encode(2n ** 53n + 1n)])))]).toThrow(
			"a protobuf number is past 2^53",
		);
	});

	it("walks a file through its window as it walks the same bytes in memory", () => {
		const g = new OnnxGraphBuilder();
		const x = g.input("x", "float32", [1, 300]);
		let y = x;
		for (let i = 0; i < 4; i++)
			y = g.node("MatMul", [y, g.floats(`w${i}`, [300, 300], pseudoRandom(300 * 300, i, 0.1))]);
		g.node("Identity", [y], {}, ["y"]);
		g.output("y", "float32", [1, 300]);
		const model = g.toModel();
		expect(model.length).toBeGreaterThan(4 * 64 * 1024);
		const path = join(scratchDir("onnx-protobuf"), "model.onnx");
		writeFileSync(path, model);
		const walk = (source: ReturnType<typeof bytesSource>) => {
			const graph = [...fields(source)].find((f) => f.field === 7);
			if (graph === undefined) throw new Error("no graph");
			return [...fields(source, graph.start, graph.end)].map((f) => ({
				...f,
				inner: f.field === 1 || f.field === 5 ? [...fields(source, f.start, f.end)] : [],
			}));
		};
		const inMemory = walk(bytesSource(readFileSync(path)));
		expect(inMemory.filter((f) => f.field === 5)).toHaveLength(4);
		expect(withFileSource(path, walk)).toEqual(inMemory);
	});
});

describe("int8 quantisation of a hostile model", () => {
	it("refuses a model whose bytes hold a runaway varint, rather than quantising what comes before it", () => {
		const g = new OnnxGraphBuilder();
		const x = g.input("x", "float32", [1, 64]);
		g.node("MatMul", [x, g.floats("w", [64, 96], pseudoRandom(64 * 96, 1, 0.2))], {}, ["y"]);
		g.output("y", "float32", [1, 96]);
		const model = g.toModel();
		expect(quantizeMatMuls(model, 1024).matMuls).toBe(1);
		// A field 7 (the graph) whose length is 200 bytes of 0xff and a 0: read loosely, NaN, and the walk ends there.
		const hostile = Uint8Array.from([0x3a, ...run(0xff, 200), 0x00, ...model]);
		expect(() => quantizeMatMuls(hostile, 1024)).toThrow("a protobuf varint is longer than 10 bytes");
	});
});
