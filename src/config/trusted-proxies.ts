// WEBHOOKS_TRUSTED_PROXIES: the proxies whose X-Forwarded-For the sidecar believes. A value that
// trusts every address would let any sender name its own source, and so spend or escape any
// per-source budget, so such values are refused at start (src/config/env.ts).
import { isIP } from "node:net";

/** The eight 16-bit groups of an IPv6 address, as lowercase hex without leading zeros. */
export function expandIPv6(ip: string): string[] {
  let text = ip.split("%")[0]!.toLowerCase(); // a zone id is not part of the address
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string | undefined];
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const zeros = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill("0");
  return [...left, ...zeros, ...right].map((g) => parseInt(g, 16).toString(16));
}

/**
 * What is wrong with a WEBHOOKS_TRUSTED_PROXIES value, or undefined: addresses or CIDRs separated
 * by commas, none of them wider than a private network. Trusting every address (0.0.0.0/0, ::/0,
 * ::ffff:0:0/96, or any IPv4 range wider than /8) would let any sender name its own source in
 * X-Forwarded-For, and so spend, or escape, any budget it likes.
 */
export function trustedProxiesProblem(text: string): string | undefined {
  for (const entry of text.split(",")) {
    const [addr = "", bits, extra] = entry.trim().split("/");
    const family = isIP(addr);
    if (extra !== undefined || family === 0 || (bits !== undefined && !/^\d{1,3}$/.test(bits)))
      return "must be IP addresses or CIDRs separated by commas";
    const prefix = bits === undefined ? (family === 4 ? 32 : 128) : Number(bits);
    if (prefix > (family === 4 ? 32 : 128)) return "must be IP addresses or CIDRs separated by commas";
    if (tooBroad(addr, family, prefix))
      return "must not trust every address (0.0.0.0/0, ::/0 or any range wider than a private network): list the ingress controller's pod addresses or CIDR";
  }
  return undefined;
}

function tooBroad(addr: string, family: number, prefix: number): boolean {
  if (family === 4) return prefix < 8;
  const groups = expandIPv6(addr).map((g) => parseInt(g, 16));
  const bitsOf = (n: number) =>
    groups
      .flatMap((g) => [...g.toString(2).padStart(16, "0")])
      .slice(0, n)
      .join("");
  // IPv4-mapped (::ffff:a.b.c.d): judged as the IPv4 range it is; a prefix under 96 that
  // contains ::ffff:0:0/96 covers all of IPv4.
  const mapped = "0".repeat(80) + "1".repeat(16);
  if (prefix >= 96 && bitsOf(96) === mapped) return prefix - 96 < 8;
  if (prefix < 96 && mapped.startsWith(bitsOf(prefix))) return true;
  // Wider than /16 only inside the private (fc00::/7) and link-local (fe80::/10) ranges.
  if (prefix >= 16) return false;
  const first = groups[0]!;
  return !((prefix >= 7 && (first & 0xfe00) === 0xfc00) || (prefix >= 10 && (first & 0xffc0) === 0xfe80));
}
