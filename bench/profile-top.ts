// The top frames of a V8 CPU profile (node --cpu-prof), by self time, and the same time summed by
// where the code lives (our modules, each dependency, Node's internals, the garbage collector).
//   tsx bench/profile-top.ts <file.cpuprofile> [--top 25] [--skip-seconds S]
// --skip-seconds leaves out the first S seconds of the profile (the process starting up).
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: "string", default: "25" }, "skip-seconds": { type: "string", default: "0" } },
});
const file = positionals[0];
if (!file) throw new Error("usage: tsx bench/profile-top.ts <file.cpuprofile> [--top N]");
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;

// Self time per node: each sample's time delta goes to the node it sampled.
const selfUs = new Map<number, number>();
const skipUs = Number(values["skip-seconds"]) * 1e6;
let elapsedUs = 0;
profile.samples.forEach((id, i) => {
  elapsedUs += profile.timeDeltas[i] ?? 0;
  if (elapsedUs >= skipUs) selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
const byId = new Map(profile.nodes.map((n) => [n.id, n]));

/** Where a frame's code lives: a dependency's name, one of our source files, or Node itself. */
function home(url: string, fn: string): string {
  if (url === "") return fn.startsWith("(") ? fn : "(native)";
  const dep = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (dep) return dep[1]!;
  const ours = /\/(src|bench|scripts)\/(.+)$/.exec(url);
  if (ours) return `${ours[1]}/${ours[2]}`;
  if (url.startsWith("node:")) return "node:*";
  return url;
}

const frames = new Map<string, number>();
const homes = new Map<string, number>();
let total = 0;
for (const [id, us] of selfUs) {
  const n = byId.get(id)!;
  const { functionName, url, lineNumber } = n.callFrame;
  const where = home(url, functionName);
  const frame = `${functionName || "(anonymous)"} ${where}:${lineNumber + 1}`;
  frames.set(frame, (frames.get(frame) ?? 0) + us);
  homes.set(where, (homes.get(where) ?? 0) + us);
  total += us;
}
const idle = frames.get("(idle) (idle):0") ?? 0;
const busy = total - idle;
const top = Number(values.top);
const pct = (us: number) => `${((100 * us) / busy).toFixed(1)}%`.padStart(6);
const row = ([name, us]: [string, number]) => `${pct(us)} ${(us / 1000).toFixed(0).padStart(7)} ms  ${name}`;
const sorted = (m: Map<string, number>) =>
  [...m].filter(([k]) => !k.startsWith("(idle)")).sort((a, b) => b[1] - a[1]);

console.log(`${file}: ${(busy / 1e6).toFixed(2)} s busy of ${(total / 1e6).toFixed(2)} s profiled`);
console.log(`\nby self time (share of busy time):`);
for (const r of sorted(frames).slice(0, top)) console.log(row(r));
console.log(`\nby where the code lives:`);
for (const r of sorted(homes).slice(0, top)) console.log(row(r));
