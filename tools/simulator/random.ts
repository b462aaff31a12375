import { createHash } from "node:crypto";

// Two kinds of randomness, both derived from the simulator's seed:
// - `unit(...)` hashes a key (seed, job id, purpose, attempt) to [0, 1). Per-job decisions (drop this
//   callback? fail this job?) therefore do not depend on the order in which concurrent work arrives,
//   so a faulty run repeats even when timing differs.
// - `Rng` is a sequential generator (mulberry32) for per-request faults, where no stable key exists.

export function unit(...parts: Array<string | number>): number {
  const digest = createHash("sha256").update(parts.join("\u0000")).digest();
  return digest.readUInt32BE(0) / 2 ** 32;
}

/** True with probability `rate` for this key; rate <= 0 never, rate >= 1 always. */
export function chance(rate: number | undefined, ...parts: Array<string | number>): boolean {
  if (rate === undefined || rate <= 0) return false;
  if (rate >= 1) return true;
  return unit(...parts) < rate;
}

export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  }

  chance(rate: number | undefined): boolean {
    if (rate === undefined || rate <= 0) return false;
    return rate >= 1 || this.next() < rate;
  }

  /** Lower-case alphanumerics, like RunPod's endpoint and worker ids ("oqk7ao1uomckye"). */
  token(length: number): string {
    const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
    let out = "";
    for (let i = 0; i < length; i++) out += alphabet[Math.floor(this.next() * alphabet.length)];
    return out;
  }

  /** A v4-shaped UUID from the seeded stream, so generated job ids repeat with the seed. */
  uuid(): string {
    const hex = Array.from({ length: 32 }, () => Math.floor(this.next() * 16).toString(16));
    hex[12] = "4";
    hex[16] = ((parseInt(hex[16] ?? "0", 16) & 0x3) | 0x8).toString(16);
    const s = hex.join("");
    return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`;
  }
}

/** A stable RunPod-looking endpoint id for a name, so restarts of the simulator keep ids. */
export function endpointIdFor(name: string): string {
  const digest = createHash("sha256").update(`endpoint:${name}`).digest();
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  let out = "";
  for (let i = 0; i < 14; i++) out += alphabet[(digest[i] ?? 0) % alphabet.length];
  return out;
}
