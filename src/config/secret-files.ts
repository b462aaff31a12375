// Secrets from files: a Kubernetes Secret mounted as a volume (the chart's way), or any file named
// by <VARIABLE>_FILE (Docker's convention). Files keep secrets out of the process environment (which
// `kubectl describe`, crash dumps and child processes see) and, unlike environment variables, can
// change while the process runs: the kubelet swaps a mounted Secret's files when the Secret
// changes. watchSecretFiles re-reads them and updates the parsed configuration in place, so a
// rotated key takes effect without a restart (the code that uses a secret reads it from the
// configuration when it needs it).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";

/** The directory whose files named after variables (GPU_PROVIDER_API_KEY, ...) supply them. */
const SECRETS_DIR_VARIABLE = "SECRETS_DIR";

export class SecretFileError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join("; "));
    this.name = "SecretFileError";
  }
}

/** Where each variable's file is: <NAME>_FILE, else SECRETS_DIR/<NAME> when that file exists. */
function secretFilePaths(source: NodeJS.ProcessEnv, names: readonly string[]): Map<string, string> {
  const dir = source[SECRETS_DIR_VARIABLE]?.trim();
  const paths = new Map<string, string>();
  const problems: string[] = [];
  for (const name of names) {
    const given = source[`${name}_FILE`]?.trim();
    if (given) {
      // Two sources of one secret would leave which one wins to the reader.
      if (source[name] !== undefined && source[name] !== "")
        problems.push(`${name}: both ${name} and ${name}_FILE are set: set one`);
      paths.set(name, given);
    } else if (dir && (source[name] === undefined || source[name] === "") && existsSync(join(dir, name))) {
      paths.set(name, join(dir, name));
    }
  }
  if (problems.length) throw new SecretFileError(problems);
  return paths;
}

/** A secret file's value: its text without the line end an editor or `echo` adds. */
function readSecretFile(path: string): string {
  return readFileSync(path, "utf8").replace(/\r?\n$/, "");
}

/**
 * The environment with every secret file read in: what parseEnv parses. An unreadable file names
 * its variable (never the content).
 */
export function withSecretFiles(
  source: NodeJS.ProcessEnv,
  names: readonly string[],
): { env: NodeJS.ProcessEnv; files: Map<string, string> } {
  const files = secretFilePaths(source, names);
  const env: NodeJS.ProcessEnv = { ...source };
  const problems: string[] = [];
  for (const [name, path] of files) {
    try {
      env[name] = readSecretFile(path);
    } catch (err) {
      problems.push(`${name}: cannot read its file (${(err as NodeJS.ErrnoException).code ?? "error"})`);
    }
  }
  if (problems.length) throw new SecretFileError(problems);
  // Watched as well: the directory's file of every variable not set at start, for a key the Secret
  // gains later (the previous callback key of a rotation: CALLBACK_SECRET_PREVIOUS).
  const dir = source[SECRETS_DIR_VARIABLE]?.trim();
  const watched = new Map(files);
  if (dir)
    for (const name of names)
      if (!watched.has(name) && (source[name] === undefined || source[name] === ""))
        watched.set(name, join(dir, name));
  return { env, files: watched };
}

/** Which files each parsed configuration came from (set by parseEnv, read by watchSecretFiles). */
const origins = new WeakMap<object, Map<string, string>>();

export function rememberSecretFiles(config: object, files: Map<string, string>): void {
  if (files.size) origins.set(config, files);
}

function secretFilesOf(config: object): ReadonlyMap<string, string> {
  return origins.get(config) ?? new Map();
}

export interface SecretFilesWatch {
  /** Re-reads every file now; returns the names whose value changed. */
  check(): string[];
  stop(): void;
}

/**
 * Re-reads the secret files of `config` every `intervalMs` and writes a changed value into it.
 * `parse` validates one variable's new value as parseEnv would (an invalid or unreadable file is
 * logged by name and the value in use is kept: a half-written rotation must not stop the process).
 */
export function watchSecretFiles<C extends object>(
  config: C,
  opts: {
    intervalMs: number;
    log: Logger;
    parse: (name: string, value: string) => { ok: true; value: unknown } | { ok: false; problem: string };
  },
): SecretFilesWatch {
  const files = secretFilesOf(config);
  const current = config as Record<string, unknown>;
  // The problem last logged per variable: a file that stays broken is reported once, not per pass.
  const reported = new Map<string, string>();
  const report = (name: string, problem: string) => {
    if (reported.get(name) === problem) return;
    reported.set(name, problem);
    opts.log.error({ variable: name, problem }, "secret file not usable; the value in use is kept");
  };
  // The files read so far: one that disappears afterwards is reported, one never seen is not.
  const seen = new Set([...files].filter(([, path]) => existsSync(path)).map(([name]) => name));
  const check = (): string[] => {
    const changed: string[] = [];
    for (const [name, path] of files) {
      let text: string;
      try {
        text = readSecretFile(path);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // A file that has never been there (a key the Secret does not hold yet): nothing to do.
        if (code === "ENOENT" && !seen.has(name)) continue;
        report(name, `unreadable (${code ?? "error"})`);
        continue;
      }
      const parsed = opts.parse(name, text);
      if (!parsed.ok) {
        report(name, parsed.problem);
        continue;
      }
      seen.add(name);
      reported.delete(name);
      if (parsed.value === current[name]) continue;
      current[name] = parsed.value;
      changed.push(name);
      opts.log.info({ variable: name }, "secret reloaded from its file");
    }
    return changed;
  };
  const timer = files.size ? setInterval(check, opts.intervalMs) : undefined;
  timer?.unref();
  return { check, stop: () => clearInterval(timer) };
}

/**
 * An object rebuilt whenever the secret it was built with changes: callers keep one reference
 * (a provider client handed to the reconcilers at start) and every call reaches an instance built
 * with the current value.
 */
export function rebuiltOnChange<T extends object>(read: () => string, build: (value: string) => T): T {
  let value = read();
  let instance = build(value);
  const current = (): T => {
    const now = read();
    if (now !== value) {
      instance = build(now);
      value = now;
    }
    return instance;
  };
  return new Proxy(instance, {
    get(_target, prop) {
      const target = current();
      const v: unknown = Reflect.get(target, prop, target);
      // Methods run on the instance itself (its private fields are not the proxy's).
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
