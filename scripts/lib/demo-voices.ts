/**
 * The demo voices that `npm run dev` seeds: CPU (`dsp`) engine voices with a generated portrait and a
 * generated sung sample, so a fresh clone has something real to list, look at and listen to.
 */
import { encodePng } from "./png.ts";

export interface DemoVoice {
	name: string;
	tags: string[];
	/** `dsp` engine parameters: see gpu-runner/README.md. */
	params: Record<string, number>;
	/** Portrait colours and the sample's fundamental frequency (Hz). */
	hue: number;
	sampleHz: number;
}

export const DEMO_VOICES: DemoVoice[] = [
	{
		name: "Aurora",
		tags: ["female", "bright", "pop"],
		params: { formant_shift: 3, brightness: 0.3 },
		hue: 330,
		sampleHz: 330,
	},
	{
		name: "Basalt",
		tags: ["male", "deep", "baritone"],
		params: { formant_shift: -3, brightness: -0.3 },
		hue: 25,
		sampleHz: 110,
	},
	{
		name: "Cirrus",
		tags: ["child", "airy", "light"],
		params: { formant_shift: 5, brightness: 0.5 },
		hue: 200,
		sampleHz: 440,
	},
	{
		name: "Dune",
		tags: ["neutral", "warm", "speech"],
		params: { formant_shift: -1, brightness: 0 },
		hue: 45,
		sampleHz: 175,
	},
];

function hsl(h: number, s: number, l: number): [number, number, number] {
	const a = s * Math.min(l, 1 - l);
	const f = (n: number) => {
		const k = (n + h / 30) % 12;
		return Math.round(255 * (l - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
	};
	return [f(0), f(8), f(4)];
}

/** A 256×256 portrait: a gradient background and a disc, both in the voice's hue. */
export function demoVoiceImage(voice: DemoVoice): Buffer {
	const size = 256;
	return encodePng(size, size, (x, y) => {
		const dx = x - size / 2;
		const dy = y - size * 0.45;
		const inDisc = Math.hypot(dx, dy) < size * 0.28;
		const wave = Math.sin((x + voice.sampleHz) / 18) * 0.05;
		return inDisc ? hsl(voice.hue, 0.7, 0.75 + wave) : hsl((voice.hue + 30) % 360, 0.55, 0.25 + (y / size) * 0.3);
	});
}

/** A 4-second sung phrase (16-bit mono WAV, 44.1 kHz): harmonic voice with vibrato over a short melody. */
export function demoVoiceSample(voice: DemoVoice): Buffer {
	const rate = 44_100;
	const seconds = 4;
	const melody = [0, 2, 4, 5, 7, 5, 4, 2]; // semitones above the voice's base pitch
	const samples = new Int16Array(rate * seconds);
	let phase = 0;
	for (let i = 0; i < samples.length; i++) {
		const t = i / rate;
		const note = melody[Math.min(melody.length - 1, Math.floor((t / seconds) * melody.length))] ?? 0;
		const f0 = voice.sampleHz * 2 ** (note / 12) * (1 + 0.006 * Math.sin(2 * Math.PI * 5.5 * t));
		phase += (2 * Math.PI * f0) / rate;
		let value = 0;
		// Harmonic amplitudes fall off faster for darker voices.
		const tilt = 1.2 - (voice.params.brightness ?? 0);
		for (let h = 1; h <= 12; h++) value += Math.sin(h * phase) / h ** tilt;
		const noteT = (t * melody.length) / seconds - Math.floor((t * melody.length) / seconds);
		const envelope = Math.min(1, noteT * 20) * Math.min(1, (1 - noteT) * 10);
		samples[i] = Math.round(value * envelope * 0.25 * 32767);
	}
	const data = Buffer.from(samples.buffer);
	const header = Buffer.alloc(44);
	header.write("RIFF", 0, "ascii");
	header.writeUInt32LE(36 + data.length, 4);
	header.write("WAVEfmt ", 8, "ascii");
	header.writeUInt32LE(16, 16);
	header.writeUInt16LE(1, 20);
	header.writeUInt16LE(1, 22);
	header.writeUInt32LE(rate, 24);
	header.writeUInt32LE(rate * 2, 28);
	header.writeUInt16LE(2, 32);
	header.writeUInt16LE(16, 34);
	header.write("data", 36, "ascii");
	header.writeUInt32LE(data.length, 40);
	return Buffer.concat([header, data]);
}
