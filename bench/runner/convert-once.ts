/**
 * Child process of the benchmark: one full conversion through the runner's real pipeline (signed GET,
 * streaming decode, dsp engine, WAV file, signed PUT), then its peak RSS. Arguments: sourceUrl outputUrl workDir.
 */
import { DspEngine } from "../../gpu-runner/src/engines/dsp/dsp-engine.ts";
import { convertSource } from "../../gpu-runner/src/pipeline/convert-source.ts";

const [sourceUrl, outputUrl, workDir] = process.argv.slice(2);
if (!sourceUrl || !outputUrl || !workDir) throw new Error("usage: convert-once.ts sourceUrl outputUrl workDir");

const engine = new DspEngine();
await engine.init();
const rssBeforeMiB = process.memoryUsage().rss / 2 ** 20;
const result = await convertSource({
	sourceUrl,
	outputUrl,
	engine,
	voice: { id: "bench", name: "bench", engine: "dsp", params: { formant_shift: -2 }, artifacts: [] },
	semitones: -3,
	artifactPaths: new Map(),
	workDir,
	signal: new AbortController().signal,
});
// maxRSS is the process's high-water mark in KiB (getrusage).
const peakRssMiB = process.resourceUsage().maxRSS / 1024;
console.log(JSON.stringify({ ...result, rssBeforeMiB, peakRssMiB }));
