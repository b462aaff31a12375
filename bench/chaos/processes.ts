// The stack's processes as a kubelet would keep them: each is restarted when it exits, whether it
// was SIGKILLed by the chaos schedule or ended itself (a controller that loses its lease exits, as
// controller-runtime does). The control plane is stopped and started again on its data directory.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, openSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { buildControlPlane, REPO_ROOT } from "../../test/support/controlplane.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Whatever happens to the harness (an exception, Ctrl-C), nothing it started outlives it.
const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130));
function track(child: ChildProcess): ChildProcess {
  running.add(child);
  child.once("exit", () => running.delete(child));
  return child;
}

/** A node process of the product (`src/main.ts controller|webhooks`, the simulator), restarted when it exits. */
export class Supervised {
  #child: ChildProcess | undefined;
  #stopping = false;
  #exits = 0;
  #starts = 0;
  /** Exits by the process's own code (not a signal): when, the code, and its last log message. */
  readonly ownExits: Array<{ at: string; code: number; lastMessage: string }> = [];
  readonly #logFile: string;

  constructor(
    readonly name: string,
    private readonly args: string[],
    /** The environment of the n-th start (1-based): a restarted pod gets a new name. */
    private readonly env: (start: number) => Record<string, string>,
    logDir: string,
    private readonly opts: { restart?: boolean; restartDelayMs?: number } = {},
  ) {
    mkdirSync(logDir, { recursive: true });
    this.#logFile = join(logDir, `${name}.log`);
  }

  get pid(): number | undefined {
    return this.#child?.exitCode === null && this.#child.signalCode === null ? this.#child.pid : undefined;
  }

  /** Exits that were not asked for by `stop`, SIGKILLs included. */
  get exits(): number {
    return this.#exits;
  }

  get starts(): number {
    return this.#starts;
  }

  start(): void {
    const out = openSync(this.#logFile, "a");
    const child = track(
      spawn(process.execPath, ["--import", "tsx", ...this.args], {
        cwd: REPO_ROOT,
        env: { ...process.env, ...this.env(this.#starts + 1) },
        stdio: ["ignore", out, out],
      }),
    );
    this.#starts++;
    this.#child = child;
    child.once("exit", (code, signal) => {
      if (this.#stopping) return;
      this.#exits++;
      if (signal === null && code !== null)
        this.ownExits.push({
          at: new Date().toISOString(),
          code,
          lastMessage: lastLogMessage(this.#logFile),
        });
      if (this.opts.restart === false) return;
      setTimeout(() => {
        if (!this.#stopping) this.start();
      }, this.opts.restartDelayMs ?? 500);
    });
  }

  /** SIGKILL; the supervisor starts it again. Resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (child === undefined || this.pid === undefined) return;
    const gone = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await gone;
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    const child = this.#child;
    if (child === undefined || this.pid === undefined) return;
    const gone = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await gone;
    clearTimeout(timer);
  }
}

export interface ControlPlaneAddress {
  /** https://127.0.0.1:PORT */
  url: string;
  /** The admin token of this start (the local binary makes a new one every time it starts). */
  token: string;
}

/**
 * The local kube-apiserver + etcd binary on a data directory that survives `restart`. (The test
 * helper's startControlPlane wipes its directory; a restart here must keep etcd's data.)
 */
export class ControlPlane {
  #child: ChildProcess | undefined;
  readonly #bin = buildControlPlane();
  #restarts = 0;

  constructor(
    readonly dataDir: string,
    private readonly port: number,
    private readonly logFile: string,
  ) {}

  get restarts(): number {
    return this.#restarts;
  }

  async start(timeoutMs = 120_000): Promise<ControlPlaneAddress> {
    mkdirSync(this.dataDir, { recursive: true });
    const kubeconfig = join(this.dataDir, "kubeconfig");
    // The binary writes its kubeconfig once /readyz answers: its appearance is the readiness signal.
    rmSync(kubeconfig, { force: true });
    const out = openSync(this.logFile, "a");
    const child = track(
      spawn(this.#bin, ["--dir", this.dataDir, "--port", String(this.port)], { stdio: ["ignore", out, out] }),
    );
    this.#child = child;
    let exited: number | null | undefined;
    child.once("exit", (code) => (exited = code));
    const deadline = Date.now() + timeoutMs;
    while (!existsSync(kubeconfig)) {
      if (exited !== undefined) throw new Error(`control plane exited (${exited}); see ${this.logFile}`);
      if (Date.now() > deadline) throw new Error(`control plane not ready in time; see ${this.logFile}`);
      await sleep(100);
    }
    await sleep(50); // written in one call, but let the write finish
    const text = readFileSync(kubeconfig, "utf8");
    return { url: /server: (\S+)/.exec(text)![1]!, token: /token: (\S+)/.exec(text)![1]! };
  }

  /** SIGTERM (SIGKILL after 15 s), then a new start on the same data directory. */
  async restart(downMs: number): Promise<ControlPlaneAddress> {
    await this.stop();
    await sleep(downMs);
    this.#restarts++;
    return this.start();
  }

  async stop(): Promise<void> {
    const child = this.#child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    await gone;
    clearTimeout(timer);
  }
}

/** The `msg` of the last pino line of a log file (what a process said last before it exited). */
function lastLogMessage(file: string): string {
  const lines = readFileSync(file, "utf8").trimEnd().split("\n").slice(-20).reverse();
  for (const line of lines) {
    try {
      const rec = JSON.parse(line) as { msg?: unknown; err?: unknown };
      if (typeof rec.msg === "string")
        return `${rec.msg}${rec.err ? `: ${String(rec.err)}` : ""}`.slice(0, 300);
    } catch {
      // not a pino line (a stack trace, a warning)
    }
  }
  return lines[0]?.slice(0, 300) ?? "";
}
