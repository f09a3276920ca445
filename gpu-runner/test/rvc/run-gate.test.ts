/** The gate that keeps concurrent jobs' model runs from contending for the CPU cores. */
import { describe, expect, it } from "vitest";
import { RunGate } from "../../src/engines/rvc/run-gate.ts";

const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 2));

describe("run gate", () => {
	for (const slots of [1, 2]) {
		it(`runs at most ${slots} task(s) at once, in arrival order, through failures`, async () => {
			const gate = new RunGate(slots);
			let running = 0;
			let most = 0;
			const started: number[] = [];
			const results = await Promise.allSettled(
				Array.from({ length: 7 }, (_, i) =>
					gate.run(async () => {
						started.push(i);
						running++;
						most = Math.max(most, running);
						await tick();
						running--;
						if (i === 3) throw new Error("run 3 failed");
						return i;
					}),
				),
			);
			expect(most).toBe(slots);
			expect(started).toEqual([0, 1, 2, 3, 4, 5, 6]);
			expect(results.map((r) => r.status)).toEqual([
				...Array(3).fill("fulfilled"),
				"rejected",
				...Array(3).fill("fulfilled"),
			]);
			// The slots are free again afterwards.
			expect(await gate.run(async () => "again")).toBe("again");
		});
	}

	it("refuses a gate without slots", () => {
		expect(() => new RunGate(0)).toThrow(/at least one slot/);
	});
});
