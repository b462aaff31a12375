// The README's quick start as a new user runs it: the shell block marked "run as written by
// test/cli/readme.test.ts" goes to bash as it stands, from a shell whose PATH has the machine's own
// node first (Node 20 on the project's machines, not the Node 24 the project runs on), with the
// real make, kubectl and the plugin from bin/. Only a watch (`kubectl get ... -w`, which a user
// stops with Ctrl-C) is stopped after WATCH_SECONDS. `make demo` runs in a terminal (util-linux
// `script`), where it keeps the stack up for the look-around commands it prints until Enter.
//
// `make dev-up` brings up the stack of this checkout (.local/), so the test refuses to run while a
// dev stack is already up rather than take it down at the end.
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readState, stackDown } from "../../scripts/devstack-lib.js";
import { REPO_ROOT } from "../support/controlplane.js";

const MARKER = /<!-- run as written by test\/cli\/readme\.test\.ts[^>]*-->\n```sh\n([\s\S]*?)```/g;
const WATCH_SECONDS = 30;

/** The marked blocks of README.md, each watch bounded. */
function readmeBlocks(): string[] {
  const text = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
  return [...text.matchAll(MARKER)].map((m) =>
    m[1]!
      .split("\n")
      .map((line) => {
        if (!/^kubectl get \S+( .*)? -w\b/.test(line)) return line;
        const command = line.replace(/\s+#.*$/, "");
        return `{ timeout ${WATCH_SECONDS} ${command} || [ $? -eq 124 ]; }`;
      })
      .join("\n"),
  );
}

// The machine's PATH, without the project's Node: the first `node` on it is the machine's own.
const machinePath = (process.env.PATH ?? "")
  .split(delimiter)
  .filter((dir) => dir && !/\.local[/\\]node[/\\]/.test(dir));
const machineNodeDir = machinePath.find((dir) => existsSync(join(dir, "node")));
const PATH = [...(machineNodeDir ? [machineNodeDir] : []), ...machinePath].join(delimiter);

function bash(script: string, cwd = REPO_ROOT): Promise<{ status: number; output: string }> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { HOME: process.env.HOME, PATH, TERM: "dumb" };
    for (const k of ["GOPATH", "GOMODCACHE", "GOCACHE", "GOFLAGS", "GOPROXY"])
      if (process.env[k]) env[k] = process.env[k];
    const child = spawn("bash", ["-euo", "pipefail", "-c", script], {
      cwd,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ status: code ?? -1, output }));
  });
}

async function machineNodeMajor(): Promise<number> {
  const res = await bash("node -p 'process.versions.node'");
  return Number(res.output.trim().split(".")[0]);
}

describe("the README's quick start, as written, on the machine's Node", () => {
  let started = false;
  let demo: ReturnType<typeof spawn> | undefined;
  afterAll(async () => {
    if (demo && demo.exitCode === null) demo.kill("SIGINT"); // the demo stops what it started
    if (started) await stackDown();
  });

  it("finds the marked block", () => {
    expect(readmeBlocks()).toHaveLength(1);
  });

  it("make dev-up, the sample pipeline to the end, kubectl media doctor, make dev-down", async () => {
    expect(readState(), "a dev stack is already up in this checkout: make dev-down first").toBeUndefined();
    started = true;
    const res = await bash(readmeBlocks()[0]!);
    if (process.env.README_TEST_ECHO) process.stderr.write(res.output);
    expect(res.status, res.output).toBe(0);
    // dev-up made the sample customer active with a signed event, and said so.
    expect(res.output).toMatch(/cus_demo \(the sample pipeline's customer\) is active: .*signed/);
    // The pipeline ran to its last step without a hidden step.
    expect(res.output).toContain("mediajob.media-orchestrator.io/episode-42 condition met");
    expect(res.output).toMatch(/episode-42-2-render +render +Completed/);
    // The render's file is in the dev store, with its digest and a presigned download URL.
    expect(res.output).toMatch(
      /episode\.mp4 +[\d.]+ \S+ +[0-9a-f]{12} +http:\/\/127\.0\.0\.1:\d+\/media-dev\/default\/[^ ]*X-Amz-Signature=/,
    );
    // The plugin ran (on the project's Node) and found nothing wrong, nothing waiting.
    expect(res.output).not.toContain("TypeError");
    expect(res.output).not.toContain("reading 'bind'");
    expect(res.output).toMatch(/\[ok\] +waiting jobs: no Pending MediaJob is held/);
    expect(res.output).toMatch(/webhook signature: the sidecar accepted .*was removed/);
    expect(res.output).toMatch(/\d+ checks: \d+ ok, \d+ warnings, 0 failed/);
    expect(res.output).toContain("the dev stack is down");
    started = false;
  }, 360_000);

  it("make demo in a terminal: all green, and the stack stays up for the look-around until Enter", async () => {
    expect(readState(), "a dev stack is already up in this checkout: make dev-down first").toBeUndefined();
    // util-linux's script gives make a terminal, as a user's shell would.
    const child = (demo = spawn("script", ["-qefc", "make demo", "/dev/null"], {
      cwd: REPO_ROOT,
      env: { HOME: process.env.HOME, PATH, TERM: "dumb" },
      stdio: ["pipe", "pipe", "pipe"],
    }));
    let output = "";
    const closed = new Promise<number>((resolve) => child.on("close", (code) => resolve(code ?? -1)));
    const prompted = new Promise<void>((resolve) => {
      const onData = (d: Buffer) => {
        output += d.toString();
        if (output.includes("press Enter to stop it")) resolve();
      };
      child.stdout.on("data", onData);
      child.stderr.on("data", onData);
    });
    await Promise.race([prompted, closed]);
    if (process.env.README_TEST_ECHO) process.stderr.write(output);
    expect(output).toContain("demo finished: all green");
    expect(output).toContain("press Enter to stop it (make demo DEMO_ARGS=--keep leaves it running)");
    // The look-around works while the demo waits: the printed command, then kubectl.
    const look = await bash(
      `export KUBECONFIG=${join(REPO_ROOT, ".local/kubeconfig")} && kubectl get mediajobs && kubectl get media`,
    );
    expect(look.status, look.output).toBe(0);
    expect(look.output).toMatch(/episode-42-2-render +render +Completed/);
    child.stdin.write("\n");
    expect(await closed).toBe(0);
    expect(output).toContain("stopping everything the demo started");
    expect(readState()).toBeUndefined();
  }, 300_000);

  it("bin/kubectl-media runs on the project's Node when the machine's is older", async () => {
    const res = await bash("bin/kubectl-media --help");
    expect(res.status, res.output).toBe(0);
    expect(res.output).toContain("kubectl media: the media-orchestrator runbook as commands");
  });

  it("without the project's Node, an older node gets a plain message, not a crash", async () => {
    const major = await machineNodeMajor();
    if (major >= 24) return; // a machine with Node 24 has nothing to refuse
    // A checkout without .local/node: the shim names the Node it needs and how to get it.
    const bare = mkdtempSync(join(tmpdir(), "mo-bare-checkout-"));
    mkdirSync(join(bare, "bin"));
    copyFileSync(join(REPO_ROOT, "bin/kubectl-media"), join(bare, "bin/kubectl-media"));
    copyFileSync(join(REPO_ROOT, "Makefile"), join(bare, "Makefile"));
    const shim = await bash("sh bin/kubectl-media --help", bare);
    expect(shim.status).toBe(1);
    expect(shim.output).toMatch(/needs Node\.js 24 \(24\.\d+\.\d+\); the node on PATH is 2\d\./);
    expect(shim.output).toContain("make node");
    // The installed entry point (what npm links) checks before loading the Kubernetes client.
    const entry = await bash(
      `node --import ${REPO_ROOT}/node_modules/tsx/dist/loader.mjs ${REPO_ROOT}/src/cli/kubectl-media.ts --help`,
    );
    expect(entry.status).toBe(1);
    expect(entry.output).toContain("kubectl-media: needs Node.js 24.11 or newer; this is Node.js");
    expect(entry.output).not.toContain("TypeError");
  });
});
