/**
 * Child process of the benchmark: real-time factor of the dsp engine on generated audio. Run pinned to one
 * core by run.ts (`taskset -c 0`), so the figure is for one thread of this CPU.
 * Prints one JSON line per case.
 */
import { DspEngine } from "../../gpu-runner/src/engines/dsp/dsp-engine.ts";
import type { AudioBlock } from "../../gpu-runner/src/engines/engine.ts";

function harmonicSweep(seconds: number, sampleRate: number, phaseOffset: number): Float32Array {
	// A voice-like source: harmonics of a fundamental gliding 110–220 Hz, with a slow amplitude envelope.
	const out = new Float32Array(Math.round(seconds * sampleRate));
	let phase = phaseOffset;
	for (let i = 0; i < out.length; i++) {
		const t = i / sampleRate;
		const f0 = 165 + 55 * Math.sin(2 * Math.PI * 0.2 * t);
		phase += (2 * Math.PI * f0) / sampleRate;
		let sample = 0;
		for (let h = 1; h <= 12; h++) sample += Math.sin(h * phase) / h;
		out[i] = 0.2 * sample * (0.6 + 0.4 * Math.sin(2 * Math.PI * 3 * t));
	}
	return out;
}

async function* blocks(channels: Float32Array[], sampleRate: number): AsyncGenerator<AudioBlock> {
	const size = 4096;
	const total = channels[0]?.length ?? 0;
	for (let start = 0; start < total; start += size) {
		yield { sampleRate, channels: channels.map((c) => c.subarray(start, Math.min(total, start + size))) };
	}
}

const SECONDS = 60;
for (const [sampleRate, channelCount, pitchMethod] of [
	[44_100, 1, "transpose"],
	[48_000, 2, "transpose"],
	[16_000, 1, "transpose"],
	[44_100, 1, "exact"],
] as const) {
	const channels = Array.from({ length: channelCount }, (_, c) => harmonicSweep(SECONDS, sampleRate, c));
	const engine = new DspEngine();
	await engine.init();
	const job = {
		voice: {
			id: "bench",
			name: "bench",
			engine: "dsp" as const,
			params: { formant_shift: 2, brightness: 2, pitch_method: pitchMethod },
			artifacts: [],
		},
		semitones: 4,
		artifactPaths: new Map<string, string>(),
		input: { sampleRate, channels: channelCount },
	};
	// Warm-up: let V8 optimise the hot loops and the wasm compile, so the figure is the steady state.
	for await (const _ of engine.convert(
		blocks(
			channels.map((c) => c.subarray(0, 5 * sampleRate)),
			sampleRate,
		),
		job,
		new AbortController().signal,
	)) {
	}
	const started = performance.now();
	let frames = 0;
	for await (const block of engine.convert(blocks(channels, sampleRate), job, new AbortController().signal)) {
		frames += block.channels[0]?.length ?? 0;
	}
	const seconds = (performance.now() - started) / 1000;
	console.log(
		JSON.stringify({
			sampleRate,
			channels: channelCount,
			pitchMethod,
			audioSeconds: frames / sampleRate,
			processingSeconds: seconds,
			rtf: seconds / SECONDS,
		}),
	);
}
