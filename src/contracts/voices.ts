import { z } from "zod";
import { Id } from "./common.ts";

export const VoiceModel = z.object({
	id: Id,
	name: z.string(),
	tags: z.array(z.string()),
	/** Time-limited pre-signed address of the voice's image; null if the voice has none. */
	image_url: z.url().nullable(),
	/** Time-limited pre-signed address of an audio sample; null if the voice has none. */
	song_url: z.url().nullable(),
});
export type VoiceModel = z.infer<typeof VoiceModel>;
