/**
 * Which IP literals a webhook may target. Pure: parsing and range tables only, so the rules can be read and
 * tested alone. IPv4 follows the IANA special-purpose registry; IPv6 is an allow-list (global unicast 2000::/3
 * minus its special blocks), with every form that embeds an IPv4 address judged by that address.
 */

/** Parses IPv4 the way URL hosts are read (WHATWG / inet_aton): 1 to 4 parts, each decimal, octal (0..) or hex (0x..). */
export function parseIpv4(text: string): number | null {
	const parts = text.endsWith(".") ? text.slice(0, -1).split(".") : text.split(".");
	if (parts.length < 1 || parts.length > 4) return null;
	const values: number[] = [];
	for (const part of parts) {
		let value: number;
		if (/^0x[0-9a-f]*$/i.test(part)) value = part.length === 2 ? 0 : Number.parseInt(part.slice(2), 16);
		else if (/^0[0-7]+$/.test(part)) value = Number.parseInt(part.slice(1), 8);
		else if (/^(0|[1-9][0-9]*)$/.test(part)) value = Number(part);
		else return null;
		if (!Number.isSafeInteger(value)) return null;
		values.push(value);
	}
	const last = values.pop() as number;
	if (values.some((v) => v > 255)) return null;
	if (last >= 256 ** (4 - values.length)) return null;
	let address = last;
	values.forEach((v, i) => {
		address += v * 256 ** (3 - i);
	});
	return address >>> 0;
}

export const formatIpv4 = (address: number) =>
	[address >>> 24, (address >>> 16) & 255, (address >>> 8) & 255, address & 255].join(".");

/** Parses an IPv6 address (without brackets, no zone id) into 8 groups; null if malformed. */
export function parseIpv6(text: string): number[] | null {
	if (text.includes("%")) return null;
	let head = text;
	let tail: number[] = [];
	// A trailing dotted quad stands for the last two groups.
	const dotted = /^(.*:)(\d{1,3}(?:\.\d{1,3}){3})$/.exec(text);
	if (dotted) {
		const quad = dotted[2] as string;
		if (!quad.split(".").every((p) => Number(p) <= 255 && !/^0\d/.test(p))) return null;
		const v4 = parseIpv4(quad);
		if (v4 === null) return null;
		head = dotted[1] as string;
		if (head.endsWith(":") && !head.endsWith("::")) head = head.slice(0, -1);
		tail = [v4 >>> 16, v4 & 0xffff];
	}
	const halves = head.split("::");
	if (halves.length > 2) return null;
	const groups = (part: string) => (part === "" ? [] : part.split(":"));
	const left = groups(halves[0] as string);
	const right = halves.length === 2 ? groups(halves[1] as string) : [];
	const explicit = [...left, ...right];
	if (!explicit.every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return null;
	const total = explicit.length + tail.length;
	if (halves.length === 1 ? total !== 8 : total > 7) return null;
	const fill = new Array(8 - total).fill(0);
	return [...left.map((g) => Number.parseInt(g, 16)), ...fill, ...right.map((g) => Number.parseInt(g, 16)), ...tail];
}

type Ipv4Range = [base: string, prefix: number, label: string];

/** Not publicly routable IPv4 blocks (IANA IPv4 Special-Purpose Address Registry, RFC 6890 and successors). */
const IPV4_BLOCKED: Ipv4Range[] = [
	["0.0.0.0", 8, "unspecified / this network"],
	["10.0.0.0", 8, "private"],
	["100.64.0.0", 10, "carrier-grade NAT"],
	["127.0.0.0", 8, "loopback"],
	["169.254.0.0", 16, "link-local"],
	["172.16.0.0", 12, "private"],
	["192.0.0.0", 24, "IETF protocol assignments"],
	["192.0.2.0", 24, "documentation"],
	["192.31.196.0", 24, "AS112"],
	["192.52.193.0", 24, "AMT"],
	["192.88.99.0", 24, "6to4 relay anycast"],
	["192.168.0.0", 16, "private"],
	["192.175.48.0", 24, "AS112"],
	["198.18.0.0", 15, "benchmarking"],
	["198.51.100.0", 24, "documentation"],
	["203.0.113.0", 24, "documentation"],
	["224.0.0.0", 4, "multicast"],
	["240.0.0.0", 4, "reserved"],
	["255.255.255.255", 32, "broadcast"],
];

const ipv4Ranges = IPV4_BLOCKED.map(([base, prefix, label]) => ({
	base: parseIpv4(base) as number,
	mask: prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0,
	label,
}));

/** Why an IPv4 address may not be a webhook target, or null when it is public. Broadcast is checked first (it sits in 240/4). */
export function blockedIpv4Reason(address: number): string | null {
	if (address === 0xffffffff) return "broadcast";
	for (const range of ipv4Ranges) {
		if ((address & range.mask) >>> 0 === range.base) return range.label;
	}
	return null;
}

const v4From = (hi: number, lo: number) => ((hi << 16) | lo) >>> 0;

/** Why an IPv6 address may not be a webhook target, or null when it is public. */
export function blockedIpv6Reason(groups: number[]): string | null {
	const g = (i: number) => groups[i] as number;
	const zeroUpTo = (n: number) => groups.slice(0, n).every((x) => x === 0);
	const embedded = (label: string, v4: number) => {
		const reason = blockedIpv4Reason(v4);
		return reason ? `${label} of a ${reason} IPv4 address (${formatIpv4(v4)})` : null;
	};
	if (groups.every((x) => x === 0)) return "unspecified";
	if (zeroUpTo(7) && g(7) === 1) return "loopback";
	if (zeroUpTo(5) && g(5) === 0xffff) return embedded("IPv4-mapped form", v4From(g(6), g(7)));
	if (zeroUpTo(4) && g(4) === 0xffff && g(5) === 0) return embedded("IPv4-translated form", v4From(g(6), g(7)));
	if (zeroUpTo(6)) return embedded("IPv4-compatible form", v4From(g(6), g(7)));
	if (g(0) === 0x64 && g(1) === 0xff9b && groups.slice(2, 6).every((x) => x === 0)) {
		return embedded("NAT64 form", v4From(g(6), g(7)));
	}
	if (g(0) === 0x64 && g(1) === 0xff9b && g(2) === 1) return "local-use NAT64";
	if (g(0) === 0x2002) return embedded("6to4 form", v4From(g(1), g(2)));
	// Outside global unicast: ULA fc00::/7, link-local fe80::/10, site-local, multicast ff00::/8, discard 100::/64, ...
	if ((g(0) & 0xe000) !== 0x2000) {
		if ((g(0) & 0xfe00) === 0xfc00) return "unique local (private)";
		if ((g(0) & 0xffc0) === 0xfe80) return "link-local";
		if ((g(0) & 0xff00) === 0xff00) return "multicast";
		return "reserved";
	}
	if (g(0) === 0x2001 && g(1) === 0x0db8) return "documentation";
	if (g(0) === 0x2001 && g(1) < 0x0200) return "IETF protocol assignments (Teredo, benchmarking, ORCHID)";
	if (g(0) === 0x3fff && g(1) < 0x1000) return "documentation";
	return null;
}
