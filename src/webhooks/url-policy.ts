/**
 * Where webhooks may be sent: HTTPS to a public host. This is the server-side request forgery guard at the
 * trust boundary where a client names a URL the service will later POST to. Checked on create and on every
 * URL change; a host name is judged by its name (DNS is not resolved here: Workers' outbound fetch cannot reach
 * private networks, and names are re-resolved at send time anyway).
 */
import { MAX_WEBHOOK_URL_LENGTH } from "../contracts/webhooks.ts";
import { blockedIpv4Reason, blockedIpv6Reason, parseIpv4, parseIpv6 } from "./ip-ranges.ts";

export type UrlCheck = { ok: true; url: string } | { ok: false; reason: string };

export interface UrlPolicyOptions {
	/** Local development only (`ALLOW_LOCAL_WEBHOOK_URLS=true`): also admit http(s)://localhost and 127.0.0.1, any port. */
	allowLocal?: boolean;
}

/** Suffixes that name private networks, never the public internet (RFC 6761, 6762, 8375 and common internal zones). */
const INTERNAL_SUFFIXES = [
	"localhost",
	"local",
	"internal",
	"home.arpa",
	"localdomain",
	"lan",
	"intranet",
	"corp",
	"private",
	"test",
	"invalid",
];

const LOCAL_DEV_HOSTS = new Set(["localhost", "127.0.0.1"]);

export const allowLocalWebhookUrls = (env: Pick<Env, "ALLOW_LOCAL_WEBHOOK_URLS">) =>
	String(env.ALLOW_LOCAL_WEBHOOK_URLS).toLowerCase() === "true";

export function checkWebhookUrl(raw: string, options: UrlPolicyOptions = {}): UrlCheck {
	const fail = (reason: string): UrlCheck => ({ ok: false, reason });
	if (raw.length > MAX_WEBHOOK_URL_LENGTH) return fail(`must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`);
	// Control characters and spaces are silently dropped or encoded by URL parsers; refuse them instead.
	if ([...raw].some((c) => c.charCodeAt(0) <= 0x20 || c.charCodeAt(0) === 0x7f || c === "\\")) {
		return fail("must not contain spaces, control characters or backslashes");
	}
	let url: URL;
	try {
		url = new URL(raw);
	} catch {
		return fail("is not a valid absolute URL");
	}
	if (url.username || url.password || /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(raw)) {
		return fail("must not contain credentials (user:password@)");
	}
	const host = url.hostname.toLowerCase().replace(/\.+$/, "");

	if (options.allowLocal && LOCAL_DEV_HOSTS.has(host) && (url.protocol === "http:" || url.protocol === "https:")) {
		return { ok: true, url: url.href };
	}
	if (url.protocol !== "https:") return fail("must use https://");
	if (host === "") return fail("must name a host");
	// The parser keeps an explicit port 0 (it drops only the scheme's default): nothing can be reached on it.
	if (url.port === "0") return fail("must be publicly reachable: port 0 cannot be connected to");

	if (host.startsWith("[")) {
		const groups = parseIpv6(host.slice(1, -1));
		if (!groups) return fail("has a malformed IPv6 address");
		const reason = blockedIpv6Reason(groups);
		return reason ? fail(`must be publicly reachable: ${host} is ${reason}`) : { ok: true, url: url.href };
	}
	// The URL parser already turns decimal, octal and hex spellings (0x7f.1, 2130706433) into dotted quads;
	// parsing again here keeps the rule independent of that.
	const v4 = parseIpv4(host);
	if (v4 !== null) {
		const reason = blockedIpv4Reason(v4);
		return reason ? fail(`must be publicly reachable: ${host} is a ${reason} address`) : { ok: true, url: url.href };
	}
	if (/^[0-9.]+$/.test(host) || /^0x/i.test(host.split(".").at(-1) ?? "")) {
		return fail("has a malformed IPv4 address");
	}
	if (!host.includes(".")) return fail(`must be publicly reachable: single-label host "${host}" is internal`);
	const internal = INTERNAL_SUFFIXES.find((suffix) => host === suffix || host.endsWith(`.${suffix}`));
	if (internal) return fail(`must be publicly reachable: "${host}" is an internal (.${internal}) host name`);
	return { ok: true, url: url.href };
}
