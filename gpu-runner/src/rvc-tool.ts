/**
 * Operator tool for RVC voice files, run from the repository root:
 *
 *   npm run rvc -- inspect FILE              # JSON facts about a .pth, .onnx or .index; exit 1 if refused
 *   npm run rvc -- export MODEL.pth OUT.onnx # writes the synthesizer ONNX (RVC's input names), prints the JSON
 *
 * The exported graph is the one the runner builds from a `.pth` voice itself, with RVC's input names
 * (`phone`, `phone_lengths`, `pitch`, `pitchf`, `ds`, `rnd`; no pitch inputs for f0 = 0 models), less the inputs
 * the runner adds to decode only a span of frames (`decodeSpan`), which RVC's own callers do not pass.
 *
 * Exit codes: 0 done; 1 the file is refused (the JSON says why); 2 bad usage, or a file that cannot be read or
 * written at all (missing, a folder, no permission), said in one line on stderr.
 */
import { readFile, writeFile } from "node:fs/promises";
import { inspectModelFile } from "./engines/rvc/model-inspection.ts";
import { readRvcCheckpoint } from "./engines/rvc/rvc-checkpoint.ts";
import { buildSynthesizerGraph } from "./engines/rvc/synthesizer-graph.ts";

const USAGE = "usage: npm run rvc -- inspect FILE | export MODEL.pth OUT.onnx";

async function main(args: string[]): Promise<number> {
	const [command, ...rest] = args;
	if (command === "inspect" && rest.length === 1) {
		const inspection = await inspectModelFile(rest[0] as string);
		console.log(JSON.stringify(inspection, null, 2));
		return inspection.refused === undefined ? 0 : 1;
	}
	if (command === "export" && rest.length === 2) {
		const [model, out] = rest as [string, string];
		const inspection = await inspectModelFile(model);
		if (inspection.refused !== undefined || inspection.kind !== "rvc_checkpoint") {
			console.log(
				JSON.stringify(
					inspection.refused === undefined
						? {
								...inspection,
								refused: {
									problem: "not_a_checkpoint",
									message: `export takes an RVC .pth checkpoint, ${model} is ${inspection.kind}`,
								},
							}
						: inspection,
					null,
					2,
				),
			);
			return 1;
		}
		const { bytes } = buildSynthesizerGraph(readRvcCheckpoint(new Uint8Array(await readFile(model))));
		await writeFile(out, bytes);
		console.log(JSON.stringify({ ...inspection, exported: { file: out, bytes: bytes.length } }, null, 2));
		return 0;
	}
	console.error(USAGE);
	return 2;
}

/** A file the tool cannot open or write (ENOENT, EISDIR, EACCES, ...): the operator's mistake, not the file's. */
const fileSystemCode = (error: unknown) =>
	typeof (error as NodeJS.ErrnoException | null)?.code === "string" && (error as { syscall?: unknown }).syscall
		? (error as NodeJS.ErrnoException).code
		: undefined;

const args = process.argv.slice(2);
process.exitCode = await main(args).catch((error: unknown) => {
	const code = fileSystemCode(error);
	if (code === undefined) throw error;
	console.error(`${(error as NodeJS.ErrnoException).path ?? args[1]}: cannot be used (${code})`);
	return 2;
});
