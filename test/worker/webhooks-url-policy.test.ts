import { describe, expect, it } from "vitest";
import { blockedIpv6Reason, parseIpv4, parseIpv6 } from "../../src/webhooks/ip-ranges.ts";
import { checkWebhookUrl } from "../../src/webhooks/url-policy.ts";

const rejected = (url: string, allowLocal = false) => {
	const result = checkWebhookUrl(url, { allowLocal });
	return result.ok ? null : result.reason;
};

describe("webhook URL policy", () => {
	it.each([
		"https://hooks.example.com/receive",
		"https://api.customer.io:8443/webhooks?source=voice",
		"https://8.8.8.8/hook",
		"https://[2606:4700:4700::1111]/hook",
		"https://[::ffff:8.8.8.8]/hook",
		"https://[64:ff9b::808:808]/hook",
		"https://[2002:808:808::1]/hook",
		"https://xn--bcher-kva.example/hook",
		"https://hooks.example.com./hook",
	])("accepts the public HTTPS URL %s", (url) => {
		expect(rejected(url)).toBeNull();
	});

	it.each([
		["http://hooks.example.com/hook", /https/],
		["ftp://hooks.example.com/hook", /https/],
		["ws://hooks.example.com/hook", /https/],
		["javascript:alert(1)", /https|host/],
		["hooks.example.com/hook", /absolute URL/],
		["https://user:pass@hooks.example.com/hook", /credentials/],
		["https://user@hooks.example.com/hook", /credentials/],
		["https://hooks.example.com /hook", /spaces/],
		["https://hooks.example.com\\@evil.example/", /backslash/],
		[`https://hooks.example.com/${"a".repeat(2048)}`, /2048/],
		// loopback, private, link-local, CGNAT, unspecified, broadcast, multicast, reserved, benchmark, documentation
		["https://127.0.0.1/hook", /loopback/],
		["https://127.255.0.9/hook", /loopback/],
		["https://10.1.2.3/hook", /private/],
		["https://172.16.0.1/hook", /private/],
		["https://172.31.255.255/hook", /private/],
		["https://192.168.1.10/hook", /private/],
		["https://169.254.169.254/latest/meta-data", /link-local/],
		["https://100.64.0.1/hook", /carrier-grade NAT/],
		["https://100.127.255.254/hook", /carrier-grade NAT/],
		["https://0.0.0.0/hook", /unspecified/],
		["https://255.255.255.255/hook", /broadcast/],
		["https://224.0.0.1/hook", /multicast/],
		["https://239.255.255.250/hook", /multicast/],
		["https://240.0.0.1/hook", /reserved/],
		["https://198.18.0.1/hook", /benchmarking/],
		["https://198.19.255.1/hook", /benchmarking/],
		["https://192.0.2.1/hook", /documentation/],
		["https://198.51.100.7/hook", /documentation/],
		["https://203.0.113.9/hook", /documentation/],
		["https://192.0.0.8/hook", /IETF/],
		// odd IPv4 spellings that mean loopback or private addresses
		["https://2130706433/hook", /loopback/],
		["https://0x7f000001/hook", /loopback/],
		["https://0x7f.1/hook", /loopback/],
		["https://0177.0.0.1/hook", /loopback/],
		["https://127.1/hook", /loopback/],
		["https://017700000001/hook", /loopback/],
		["https://0xa9.0xfe.0xa9.0xfe/hook", /link-local/],
		["https://1.2.3.256/hook", /valid absolute URL|malformed/],
		// IPv6
		["https://[::1]/hook", /loopback/],
		["https://[::]/hook", /unspecified/],
		["https://[fe80::1]/hook", /link-local/],
		["https://[fc00::1]/hook", /unique local/],
		["https://[fd12:3456::1]/hook", /unique local/],
		["https://[ff02::1]/hook", /multicast/],
		["https://[fec0::1]/hook", /reserved/],
		["https://[100::1]/hook", /reserved/],
		["https://[2001:db8::1]/hook", /documentation/],
		["https://[3fff::1]/hook", /documentation/],
		["https://[2001::1]/hook", /IETF/],
		["https://[2001:2::1]/hook", /IETF/],
		["https://[::ffff:127.0.0.1]/hook", /IPv4-mapped.*loopback/],
		["https://[::ffff:7f00:1]/hook", /IPv4-mapped.*loopback/],
		["https://[::ffff:169.254.169.254]/hook", /IPv4-mapped.*link-local/],
		["https://[::ffff:0:10.0.0.1]/hook", /IPv4-translated.*private/],
		["https://[::127.0.0.1]/hook", /IPv4-compatible.*loopback/],
		["https://[::10.0.0.1]/hook", /IPv4-compatible.*private/],
		["https://[64:ff9b::7f00:1]/hook", /NAT64.*loopback/],
		["https://[64:ff9b::192.168.0.1]/hook", /NAT64.*private/],
		["https://[64:ff9b:1::1]/hook", /local-use NAT64/],
		["https://[2002:7f00:1::1]/hook", /6to4.*loopback/],
		["https://[2002:c0a8:101::1]/hook", /6to4.*private/],
		// internal-looking names
		["https://localhost/hook", /internal/],
		["https://LOCALHOST./hook", /internal/],
		["https://api.localhost/hook", /internal/],
		["https://printer.local/hook", /internal/],
		["https://metadata.google.internal/computeMetadata", /internal/],
		["https://router.home.arpa/hook", /internal/],
		["https://intranet/hook", /single-label/],
		["https://metadata/hook", /single-label/],
		// a port nothing listens on
		["https://example.com:0/hook", /port 0/],
		["https://93.184.216.34:00/hook", /port 0/],
	])("rejects %s", (url, reason) => {
		expect(rejected(url)).toMatch(reason);
	});

	it("admits http(s)://localhost and 127.0.0.1 with any port only when local URLs are allowed", () => {
		for (const url of ["http://localhost:8787/hook", "http://127.0.0.1:3000/hook", "http://localhost/hook"]) {
			expect(rejected(url)).not.toBeNull();
			expect(rejected(url, true)).toBeNull();
		}
		// Still refused locally: other private addresses, other schemes, credentials.
		expect(rejected("http://10.0.0.1:8080/hook", true)).toMatch(/https/);
		expect(rejected("https://192.168.0.1/hook", true)).toMatch(/private/);
		expect(rejected("http://user:pw@localhost:8787/hook", true)).toMatch(/credentials/);
		expect(rejected("ftp://localhost/hook", true)).toMatch(/https/);
	});

	it("returns the normalised URL it checked", () => {
		expect(checkWebhookUrl("https://Hooks.Example.com")).toEqual({ ok: true, url: "https://hooks.example.com/" });
	});
});

describe("IP literal parsing", () => {
	it.each([
		["127.0.0.1", 0x7f000001],
		["2130706433", 0x7f000001],
		["0x7f.0.0.1", 0x7f000001],
		["0177.1", 0x7f000001],
		["10.0x10.1", 0x0a100001],
		["1.2.3.256", null],
		["1.2.3.4.5", null],
		["08.1.1.1", null],
		["4294967296", null],
	])("parseIpv4(%s)", (text, value) => {
		expect(parseIpv4(text)).toBe(value);
	});

	it("parses IPv6 forms, embedded IPv4 included", () => {
		expect(parseIpv6("::1")).toEqual([0, 0, 0, 0, 0, 0, 0, 1]);
		expect(parseIpv6("::ffff:1.2.3.4")).toEqual([0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304]);
		expect(parseIpv6("1:2:3:4:5:6:7:8")).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
		expect(parseIpv6("1::2::3")).toBeNull();
		expect(parseIpv6("1:2:3:4:5:6:7:8:9")).toBeNull();
		expect(parseIpv6("fe80::1%eth0")).toBeNull();
		expect(blockedIpv6Reason(parseIpv6("2606:4700::1111") as number[])).toBeNull();
	});
});
