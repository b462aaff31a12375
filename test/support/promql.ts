// Loose readers of the two Prometheus languages the tests compare: the text exposition format a
// scrape returns, and PromQL as the dashboard and the alerts write it. Loose on purpose: they find
// metric names and label names, enough to tell whether a query names something that exists.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
  line: string;
}

export interface Exposed {
  /** Every metric name: from # TYPE lines and from samples (with _bucket, _sum, _count). */
  names: Set<string>;
  /** Label names seen on each sample name, and on a histogram's base name too. */
  labels: Map<string, Set<string>>;
  samples: Sample[];
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function exposition(...texts: string[]): Exposed {
  const names = new Set<string>();
  const labels = new Map<string, Set<string>>();
  const samples: Sample[] = [];
  const addLabels = (name: string, ls: string[]) => {
    const set = labels.get(name) ?? new Set<string>();
    for (const l of ls) set.add(l);
    labels.set(name, set);
  };
  for (const text of texts) {
    for (const line of text.split("\n")) {
      const type = /^# TYPE (\S+) (\S+)/.exec(line);
      if (type) {
        names.add(type[1]!);
        continue;
      }
      if (line.startsWith("#") || line.trim() === "") continue;
      const m = SAMPLE.exec(line);
      if (!m) continue;
      const name = m[1]!;
      const ls: Record<string, string> = {};
      for (const l of (m[2] ?? "").matchAll(LABEL)) ls[l[1]!] = l[2]!;
      samples.push({ name, labels: ls, value: Number(m[3]), line });
      names.add(name);
      addLabels(name, Object.keys(ls));
      const base = name.replace(/_(bucket|sum|count)$/, "");
      if (base !== name && names.has(base)) addLabels(base, Object.keys(ls));
    }
  }
  return { names, labels, samples };
}

export interface PromqlReferences {
  metrics: Set<string>;
  /** Label names in each metric's {…} selector. */
  matchers: Map<string, Set<string>>;
  /** Label names in by (…), without (…), on (…), ignoring (…), group_left/right (…). */
  grouping: Set<string>;
}

const KEYWORDS = new Set([
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "and",
  "or",
  "unless",
  "bool",
  "offset",
  "inf",
  "nan",
]);

export function promqlReferences(expr: string): PromqlReferences {
  const metrics = new Set<string>();
  const matchers = new Map<string, Set<string>>();
  const grouping = new Set<string>();
  // Strings and range/subquery brackets carry no names ($__rate_interval, durations, regexes).
  let rest = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/\[[^\]]*\]/g, "");
  rest = rest.replace(
    /\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g,
    (_m, _k, list: string) => {
      for (const l of list
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean))
        grouping.add(l);
      return " ";
    },
  );
  rest = rest.replace(
    /([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}/g,
    (_m, name: string | undefined, body: string) => {
      const ls = [...body.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)/g)].map((l) => l[1]!);
      if (name && !KEYWORDS.has(name)) {
        metrics.add(name);
        const set = matchers.get(name) ?? new Set<string>();
        for (const l of ls) set.add(l);
        matchers.set(name, set);
      }
      return " ";
    },
  );
  for (const m of rest.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, name, call] = m;
    if (call || KEYWORDS.has(name!.toLowerCase())) continue;
    if (/^\d/.test(name!)) continue;
    metrics.add(name!);
  }
  return { metrics, matchers, grouping };
}
