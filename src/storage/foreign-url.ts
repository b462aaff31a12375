// Which foreign URLs the controller may fetch to keep an output a worker left at its provider (or
// anywhere else) instead of writing it through its presigned PUT (docs/design.md, "Outputs kept
// before the provider forgets them"). The URL comes from a worker's output, so a tenant chooses it:
// fetched from inside the cluster it could reach the cluster's own services, the node's metadata
// endpoint or the store's admin port (SSRF). Only https to a public address is fetched, the
// operator may narrow the hosts to an allow-list, and private, loopback and link-local addresses
// (and plain http) are refused unless STORAGE_KEEP_ALLOW_PRIVATE says otherwise (tests, a dev
// store on 127.0.0.1). The address is judged after the name is resolved, at connection time
// (keep.ts's lookup), so a name that resolves to a private address is refused too. Pure.
import { BlockList, isIP } from "node:net";

export interface KeepPolicy {
  /** Host names the controller may fetch from (`host` exactly, `.suffix` for a domain); empty: any public host. */
  allowedHosts: readonly string[];
  /** Plain http and private, loopback and link-local addresses allowed (tests and dev only). */
  allowPrivate: boolean;
  /** The largest output kept, bytes. */
  maxBytes: number;
  /** The longest one output's copy may take, ms (answer, body and the store's PUT together). */
  timeoutMs: number;
}

/** Why a foreign URL is not fetched, fit for a job's status (it never repeats the URL). */
export type UrlRefusal = { ok: false; cause: string };

/** Ranges never fetched without allowPrivate: RFC 1918, loopback, link-local, CGNAT, unspecified, ULA, ... */
const PRIVATE = (() => {
  const b = new BlockList();
  for (const [net, bits] of [
    ["0.0.0.0", 8],
    ["10.0.0.0", 8],
    ["100.64.0.0", 10],
    ["127.0.0.0", 8],
    ["169.254.0.0", 16],
    ["172.16.0.0", 12],
    ["192.0.0.0", 24],
    ["192.168.0.0", 16],
    ["198.18.0.0", 15],
    ["224.0.0.0", 3],
  ] as const)
    b.addSubnet(net, bits, "ipv4");
  for (const [net, bits] of [
    ["::", 128],
    ["::1", 128],
    ["fc00::", 7],
    ["fe80::", 10],
    ["ff00::", 8],
    ["64:ff9b::", 96],
  ] as const)
    b.addSubnet(net, bits, "ipv6");
  return b;
})();

/** Whether an address (as a resolver or a URL gives it) may be connected to under the policy. */
export function addressAllowed(address: string, policy: Pick<KeepPolicy, "allowPrivate">): boolean {
  if (policy.allowPrivate) return true;
  const family = isIP(address);
  if (family === 0) return false;
  if (family === 6) {
    // An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged as the IPv4 address it maps.
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return !PRIVATE.check(mapped[1]!, "ipv4");
    return !PRIVATE.check(address, "ipv6");
  }
  return !PRIVATE.check(address, "ipv4");
}

const hostAllowed = (host: string, allowed: readonly string[]): boolean =>
  allowed.length === 0 ||
  allowed.some((a) => (a.startsWith(".") ? host.endsWith(a) && host.length > a.length : host === a));

/**
 * Whether a URL a worker reported may be fetched at all: a well-formed https URL (http with
 * allowPrivate), no credentials in it, a host the allow-list names, and no literal address the
 * policy refuses. The resolved addresses are judged again at connection time (addressAllowed).
 */
export function foreignUrlVerdict(raw: unknown, policy: KeepPolicy): { ok: true; url: URL } | UrlRefusal {
  if (typeof raw !== "string" || raw.length > 8192)
    return { ok: false, cause: "the reported URL is not a URL" };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, cause: "the reported URL is not a URL" };
  }
  const schemes = policy.allowPrivate ? ["https:", "http:"] : ["https:"];
  if (!schemes.includes(url.protocol))
    return {
      ok: false,
      cause: `the reported URL's scheme ${url.protocol.slice(0, 16)} is refused: https only`,
    };
  if (url.username !== "" || url.password !== "")
    return { ok: false, cause: "the reported URL carries credentials: refused" };
  const host = url.hostname.toLowerCase().replace(/^\[|\]$/g, "");
  if (!hostAllowed(host, policy.allowedHosts))
    return { ok: false, cause: "the reported URL's host is not in STORAGE_KEEP_ALLOWED_HOSTS" };
  if (isIP(host) !== 0 && !addressAllowed(host, policy))
    return { ok: false, cause: "the reported URL names a private, loopback or link-local address: refused" };
  return { ok: true, url };
}

/** The allow-list as STORAGE_KEEP_ALLOWED_HOSTS gives it: comma-separated, lowercased, blanks dropped. */
export function parseAllowedHosts(text: string | undefined): string[] {
  return (text ?? "")
    .split(",")
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
}
