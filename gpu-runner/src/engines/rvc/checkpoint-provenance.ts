/**
 * What the tool that wrote an RVC checkpoint recorded beside RVC's own keys, and what of it decides whether the voice
 * can run here. RVC's files (`train/process_ckpt.py`) record nothing of the kind; its forks do:
 * - Applio records its training (`model_name`, `author`, `epoch`, ...) and the embedder and decoder it trained with
 *   (`embedder_model`, `vocoder`); Vietnamese-RVC `vocoder` too, in its own words;
 * - ddPn08's rvc-webui writes a 19-item config and the embedder and its layer (`embedder_name`,
 *   `embedder_output_layer`).
 * This engine extracts ContentVec features (layer 12, or layer 9 projected to 256 for v1) and decodes with RVC's
 * HiFi-GAN, so a voice trained on other features or with another decoder is refused by name: it would run, and not
 * sound like the voice. `rvc-checkpoint.ts` calls these as it reads a file.
 */
import { RvcCheckpointError } from "./errors.ts";
import { quotePickleValue } from "./pickle-reader.ts";
import { FEATURE_DIMS, type RvcVersion } from "./synthesizer-config.ts";

/** A recorded value as a message quotes it. */
const quoted = (value: unknown): string => quotePickleValue(value);

/** What forks record of a voice's training, kept as facts about the file (strings and numbers only). */
const TRAINING_FACTS = [
	"model_name",
	"author",
	"epoch",
	"step",
	"creation_date",
	"dataset_length",
	"overtrain_info",
	"embedder_model",
	"vocoder",
	// ddPn08's rvc-webui
	"embedder_name",
	"embedder_output_layer",
] as const;

export function trainingFacts(root: Map<unknown, unknown>): Record<string, string | number> {
	const facts: Record<string, string | number> = {};
	for (const key of TRAINING_FACTS) {
		const value = root.get(key);
		if (typeof value === "string" || (typeof value === "number" && Number.isFinite(value))) facts[key] = value;
	}
	return facts;
}

/** Feature extractors whose output this engine computes: RVC's ContentVec (which RVC's files call `hubert_base`). */
const CONTENTVEC_NAMES = new Set(["contentvec", "hubert_base", "hubert-base"]);
/**
 * RVC's decoder: Applio's name for it, and Vietnamese-RVC's (`Default`, its NSF HiFi-GAN); the other names those
 * forks store are refused.
 */
const HIFI_GAN_NAMES = new Set(["hifi-gan", "hifigan", "default"]);
/**
 * A name a file records, lower-cased; undefined when it records none. Applio wrote the text `None` for a voice trained
 * on a built-in embedder between September and November 2024 (`str(None)` of an unset custom embedder).
 */
function recordedName(value: unknown): string | undefined {
	if (typeof value !== "string") return undefined;
	const name = value.trim().toLowerCase();
	return name === "" || name === "none" ? undefined : name;
}
/** Tensor name prefixes of decoders other than HiFi-GAN, for files that do not say which they use. */
const OTHER_DECODERS: readonly [prefix: string, vocoder: string][] = [
	["dec.upsample_blocks.", "RefineGAN"],
	["dec.downsample_blocks.", "RefineGAN"],
	["dec.upsamples.", "MRF HiFi-GAN"],
	["dec.mrfs.", "MRF HiFi-GAN"],
];

/**
 * Refuses a voice trained for another engine than this one: Applio records the embedder whose features it was
 * trained on (`embedder_model`) and its decoder (`vocoder`). Both are absent from RVC's own files, which mean
 * ContentVec and HiFi-GAN. A file that does not say is judged by its decoder's tensor names.
 */
export function checkTrainedForThisEngine(root: Map<unknown, unknown>, tensorNames: Iterable<string>): void {
	// Applio's `embedder_model`; ddPn08's `embedder_name`, which it and w-okada's voice changer read with a "768" suffix
	// cut off (`hubert_base768` is `hubert_base` taken 768 wide).
	for (const key of ["embedder_model", "embedder_name"]) {
		const embedder = root.get(key);
		const embedderName = recordedName(embedder)?.replace(/768$/, "");
		if (embedderName !== undefined && !CONTENTVEC_NAMES.has(embedderName))
			throw new RvcCheckpointError(
				"unsupported_embedder",
				`this voice was trained on ${quoted(embedder)} features (its ${key}); this service extracts ContentVec features, on which it would not sound like the voice: use a voice trained with the contentvec embedder`,
			);
	}
	const vocoder = root.get("vocoder");
	const vocoderName = recordedName(vocoder);
	if (vocoderName !== undefined && !HIFI_GAN_NAMES.has(vocoderName))
		throw new RvcCheckpointError(
			"unsupported_vocoder",
			`this voice's decoder is ${quoted(vocoder)} (its vocoder); this service runs RVC's HiFi-GAN decoder: use a voice trained with the HiFi-GAN vocoder`,
		);
	for (const name of tensorNames) {
		const other = OTHER_DECODERS.find(([prefix]) => name.startsWith(prefix));
		if (other !== undefined)
			throw new RvcCheckpointError(
				"unsupported_vocoder",
				`this voice's decoder is ${other[1]} (tensor ${name}); this service runs RVC's HiFi-GAN decoder: use a voice trained with the HiFi-GAN vocoder`,
			);
	}
}

/** The ContentVec layer RVC takes each feature width from: 9 projected to 256 (v1), 12 (v2). */
const RVC_FEATURE_LAYERS: Record<RvcVersion, number> = { v1: 9, v2: 12 };

/**
 * ddPn08's rvc-webui (`lib/rvc/checkpoints.py`, `create_trained_model`; w-okada's voice changer loads its files as
 * "DDPN RVC") writes RVC's config with the feature width (`emb_channels`) before the last item, which is the rate
 * in Hz: 19 items, the same again as a dict (`params`). Its network is RVC's with the phone embedding that wide. The
 * width and the embedder layer the features came from (`embedder_output_layer`, 9 or 12) are chosen apart from
 * `version`, so the file is read as the RVC version whose features it takes, and a pair RVC does not use is refused:
 * this engine extracts RVC's two. Undefined for any other layout.
 */
export function ddpn08Layout(
	root: Map<unknown, unknown>,
	rawConfig: readonly unknown[],
): { config: unknown[]; version: RvcVersion } | undefined {
	if (rawConfig.length !== 19 || !root.has("params")) return undefined;
	const width = rawConfig[17];
	const version = (["v1", "v2"] as const).find((v) => FEATURE_DIMS[v] === width);
	if (version === undefined)
		throw new RvcCheckpointError(
			"invalid_config",
			`config emb_channels (item 18 of ddPn08's 19) is ${quoted(width)}; RVC's feature widths are 256 and 768`,
		);
	// Absent only from merges of files that lacked it; RVC's layer for the width is then the one meant.
	const recorded = root.get("embedder_output_layer");
	// A number, or its text; anything else (a list would be spelt out to convert it) is no layer.
	const layer =
		recorded === undefined || recorded === null
			? RVC_FEATURE_LAYERS[version]
			: typeof recorded === "number" || typeof recorded === "string"
				? Number(recorded)
				: Number.NaN;
	if (layer !== RVC_FEATURE_LAYERS[version])
		throw new RvcCheckpointError(
			"unsupported_embedder",
			`this voice was trained on ${width}-wide features of embedder layer ${quoted(recorded)} (its embedder_output_layer); this service extracts ContentVec's layer ${RVC_FEATURE_LAYERS[version]} at that width, as RVC does, on which it would not sound like the voice`,
		);
	return { config: [...rawConfig.slice(0, 17), rawConfig[18]], version };
}
