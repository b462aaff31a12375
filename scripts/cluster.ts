// make cluster-up / cluster-down: the local control plane alone, in the background, with its
// admin kubeconfig at .local/kubeconfig.
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT, startControlPlane, stopProcess } from "../test/support/controlplane.js";
import { writePrivateFile } from "./private-file.js";

const LOCAL = join(REPO_ROOT, ".local");
const DATA = join(LOCAL, "controlplane");
const PID = join(LOCAL, "controlplane.pid");
const KUBECONFIG = join(LOCAL, "kubeconfig");

function runningPid(): number | undefined {
  if (!existsSync(PID)) return undefined;
  const pid = Number(readFileSync(PID, "utf8").trim());
  // A pid file can outlive its process and the pid be reused: check it is our binary.
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("controlplane-") ? pid : undefined;
  } catch {
    return undefined;
  }
}

export async function clusterUp(): Promise<string> {
  const pid = runningPid();
  if (pid) {
    console.log(`control plane already running (pid ${pid}); kubeconfig: ${KUBECONFIG}`);
    return KUBECONFIG;
  }
  const cp = await startControlPlane({
    dataDir: DATA,
    logFile: join(LOCAL, "logs/controlplane.log"),
    detached: true,
  });
  writeFileSync(PID, String(cp.process.pid));
  writePrivateFile(KUBECONFIG, readFileSync(cp.kubeconfig));
  console.log(
    `control plane ready at ${cp.url}\nkubeconfig: ${KUBECONFIG}\n  export KUBECONFIG=${KUBECONFIG}`,
  );
  return KUBECONFIG;
}

export async function clusterDown(): Promise<void> {
  const pid = runningPid();
  if (pid) await stopProcess(pid, DATA);
  rmSync(DATA, { recursive: true, force: true });
  rmSync(PID, { force: true });
  rmSync(KUBECONFIG, { force: true });
  console.log(pid ? `control plane stopped (pid ${pid}); data removed` : "control plane was not running");
}

const cmd = process.argv[2];
if (cmd === "up") await clusterUp();
else if (cmd === "down") await clusterDown();
else if (cmd === "build") {
  const { buildControlPlane } = await import("../test/support/controlplane.js");
  console.log(buildControlPlane());
} else if (cmd !== undefined) {
  console.error("usage: tsx scripts/cluster.ts up|down|build");
  process.exitCode = 2;
}
