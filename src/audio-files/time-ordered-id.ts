/**
 * UUIDv7 (RFC 9562): a millisecond timestamp then random bits, so ids sort in creation order. Lists are ordered by
 * `created_at` (whole seconds, see registration) and then by id, which keeps "newest first" exact within a second.
 * Within one millisecond a counter in `rand_a` keeps ids from one isolate increasing.
 */
let lastMs = 0;
let counter = 0;

export function timeOrderedId(now = Date.now()): string {
	if (now <= lastMs) {
		counter++;
		if (counter > 0xfff) {
			lastMs++;
			counter = 0;
		}
	} else {
		lastMs = now;
		counter = 0;
	}
	const bytes = crypto.getRandomValues(new Uint8Array(16));
	let ms = lastMs;
	for (let i = 5; i >= 0; i--) {
		bytes[i] = ms % 256;
		ms = Math.floor(ms / 256);
	}
	bytes[6] = 0x70 | (counter >> 8);
	bytes[7] = counter & 0xff;
	bytes[8] = 0x80 | ((bytes[8] as number) & 0x3f);
	const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
	return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
