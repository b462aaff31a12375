// The tools the machine must provide (Go, kubectl, npm, make) are checked when make starts, before
// anything is downloaded or built: a missing one is named with the version needed and the README
// section that says how to get it. A Go build that fails says why in go's own words.
import { spawn } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../support/controlplane.js";

// The machine's PATH without the project's Node (so its own node, 20 on the project's machines,
// comes first) and without any directory holding `go`.
const machinePath = (process.env.PATH ?? "")
  .split(delimiter)
  .filter((dir) => dir && !/\.local[/\\]node[/\\]/.test(dir));
const noGoPath = machinePath.filter((dir) => !existsSync(join(dir, "go"))).join(delimiter);

function run(
  command: string,
  args: string[],
  opts: { cwd?: string; path: string; env?: Record<string, string> },
): Promise<{ status: number; output: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: opts.cwd ?? REPO_ROOT,
      env: { HOME: process.env.HOME, PATH: opts.path, TERM: "dumb", ...opts.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ status: code ?? -1, output, ms: Date.now() - started }));
  });
}

/** A checkout with only what make reads before it installs anything. */
function bareCheckout(): string {
  const dir = mkdtempSync(join(tmpdir(), "mo-prereqs-"));
  for (const f of [
    "Makefile",
    "package.json",
    "package-lock.json",
    "scripts/prereqs.sh",
    "test/controlplane/go.mod",
  ]) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    copyFileSync(join(REPO_ROOT, f), join(dir, f));
  }
  chmodSync(join(dir, "scripts/prereqs.sh"), 0o755);
  return dir;
}

describe("prerequisites are checked before anything is downloaded", () => {
  it("make demo without Go on PATH names Go, the version needed and the README section, within a minute", async () => {
    const res = await run("make", ["demo"], { path: noGoPath });
    expect(res.ms).toBeLessThan(60_000);
    expect(res.status).not.toBe(0);
    expect(res.output).toContain("missing prerequisite: go is not on PATH: Go >= 1.24 is needed");
    expect(res.output).toContain('README.md, "Prerequisites"');
    expect(res.output).not.toContain("exit null");
    // The README has the section the message points to, and it says how to get Go.
    const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
    const section = /^#+ Prerequisites\n([\s\S]*?)(?=\n#)/m.exec(readme)?.[1] ?? "";
    expect(section).toMatch(/Go ≥ 1\.24/);
    expect(section).toContain("go.dev/doc/install");
  }, 70_000);

  it("a fresh checkout downloads nothing (no pinned Node, no npm ci) when Go is missing", async () => {
    const dir = bareCheckout();
    const res = await run("make", ["dev-up"], { cwd: dir, path: noGoPath });
    expect(res.status).not.toBe(0);
    expect(res.output).toContain("missing prerequisite: go is not on PATH");
    expect(res.output).not.toContain("npm");
    expect(existsSync(join(dir, ".local"))).toBe(false);
    expect(existsSync(join(dir, "node_modules"))).toBe(false);
  }, 70_000);

  it("a Go older than the control plane's module is named with the version needed", async () => {
    const dir = bareCheckout();
    const fakeBin = join(dir, "fake-bin");
    mkdirSync(fakeBin);
    writeFileSync(join(fakeBin, "go"), '#!/bin/sh\n[ "$1 $2" = "env GOVERSION" ] && echo go1.21.5\n', {
      mode: 0o755,
    });
    const res = await run("make", ["controlplane"], { cwd: dir, path: [fakeBin, noGoPath].join(delimiter) });
    expect(res.status).not.toBe(0);
    expect(res.output).toContain("missing prerequisite: go is 1.21.5: Go >= 1.24 is needed");
    expect(existsSync(join(dir, ".local"))).toBe(false);
  }, 70_000);

  it("a python3 without venv is named before make test or sdk-venv creates anything", async () => {
    const dir = bareCheckout();
    const fakeBin = join(dir, "fake-bin");
    mkdirSync(fakeBin);
    writeFileSync(join(fakeBin, "python3"), "#!/bin/sh\nexit 1\n", { mode: 0o755 });
    const res = await run("make", ["sdk-venv"], {
      cwd: dir,
      path: [fakeBin, machinePath.join(delimiter)].join(delimiter),
    });
    expect(res.status).not.toBe(0);
    expect(res.output).toContain("missing prerequisite: python3 has no venv/ensurepip module");
    expect(existsSync(join(dir, ".local"))).toBe(false);
  }, 70_000);

  it("targets that need no Go still run without it", async () => {
    const res = await run("make", ["help"], { path: noGoPath });
    expect(res.status, res.output).toBe(0);
    expect(res.output).toContain("make demo");
  });
});

describe("a Go build that fails says why", () => {
  // A tool built the way helm and promtool are (test/support/go-install.ts), in a child process so
  // go's own output is captured.
  const buildBogusTool = (path: string) => {
    const bin = join(mkdtempSync(join(tmpdir(), "mo-gotool-")), "bogus-v0");
    const script =
      `import { goInstalledBinary } from ${JSON.stringify(join(REPO_ROOT, "test/support/go-install.ts"))};` +
      `try { goInstalledBinary({ name: "bogus", version: "v0", bin: ${JSON.stringify(bin)}, ` +
      `pkg: "example.invalid/bogus/cmd/bogus@v0.0.1", ldflags: [] }, () => {}); } ` +
      `catch (err) { console.error(String(err)); process.exit(1); }`;
    return run(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      path,
      env: {
        GOPROXY: "off",
        GOFLAGS: "",
        GOCACHE: process.env.GOCACHE ?? join(process.env.HOME ?? "/tmp", ".cache/go-build"),
      },
    });
  };

  it("without go on PATH: says go is missing, not an exit code of null", async () => {
    const res = await buildBogusTool(noGoPath);
    expect(res.status).toBe(1);
    expect(res.output).toContain(
      'building bogus failed: go is not on PATH (Go >= 1.24 is needed; README.md, "Prerequisites"',
    );
    expect(res.output).not.toContain("null");
  }, 60_000);

  it("a failing go command: its own error, then its exit code", async () => {
    if (!machinePath.some((dir) => existsSync(join(dir, "go")))) return; // no Go on this machine
    const res = await buildBogusTool(machinePath.join(delimiter));
    expect(res.status).toBe(1);
    expect(res.output).toContain("example.invalid/bogus"); // go's own words about the module
    expect(res.output).toContain("building bogus failed: go exited with code 1; its error is printed above");
  }, 60_000);
});
