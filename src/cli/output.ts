// Everything the CLI prints goes through Output: known secrets are masked on the way out, so no
// code path (an error message quoting a provider, a Secret read for credentials) can print one.
import { stringify as toYaml } from "yaml";
import { UsageError } from "./errors.js";

export type Format = "table" | "json" | "yaml";

const MASK = "[REDACTED]";

/** Secrets shorter than this are not masked: they would mangle ordinary words. */
const MIN_SECRET_LENGTH = 4;

export interface Streams {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

export class Output {
  readonly #secrets = new Set<string>();

  constructor(
    readonly format: Format,
    private readonly streams: Streams = process,
  ) {}

  /** Registers values that must never be printed. */
  addSecrets(...values: Array<string | undefined>): void {
    for (const v of values) if (v && v.length >= MIN_SECRET_LENGTH) this.#secrets.add(v);
  }

  redact(text: string): string {
    // Longest first, so a secret containing another is masked whole.
    const secrets = [...this.#secrets].sort((a, b) => b.length - a.length);
    return secrets.reduce((t, s) => t.split(s).join(MASK), text);
  }

  /** A line (or lines) on stdout. */
  line(text = ""): void {
    this.streams.stdout.write(this.redact(text) + "\n");
  }

  /** A message on stderr: progress, hints, errors. */
  note(text: string): void {
    this.streams.stderr.write(this.redact(text) + "\n");
  }

  /** A document for machines, in the chosen -o format. */
  data(value: unknown): void {
    const text = this.format === "yaml" ? toYaml(value) : JSON.stringify(value, null, 2) + "\n";
    this.streams.stdout.write(this.redact(text));
  }

  get machine(): boolean {
    return this.format !== "table";
  }

  table(headers: string[], rows: string[][]): void {
    this.line(formatTable(headers, rows));
  }
}

/** kubectl's table: upper-case headers, columns left-aligned and three spaces apart. */
export function formatTable(headers: string[], rows: string[][]): string {
  const all = [headers.map((h) => h.toUpperCase()), ...rows];
  const widths = headers.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
  return all
    .map((r) =>
      r
        .map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!)))
        .join("   ")
        .trimEnd(),
    )
    .join("\n");
}

/** Label/value lines, the labels aligned (the shape of `kubectl describe`). */
export function formatFields(fields: Array<[string, string]>, indent = ""): string {
  const width = Math.max(...fields.map(([k]) => k.length)) + 1;
  return fields.map(([k, v]) => `${indent}${`${k}:`.padEnd(width)}  ${v}`).join("\n");
}

export function parseFormat(value: string | undefined, command: string): Format {
  if (value === undefined) return "table";
  if (value === "json" || value === "yaml") return value;
  throw new UsageError(`unknown output format "${value}": use -o json or -o yaml`, command);
}
